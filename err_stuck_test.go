package fluentcore

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore/forwardtest"
	"github.com/fluentcore/fluentcore/internal/testkit"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
)

// The err stream with a receiver that accepts and never reads: its sender is stuck in one
// attempt (frames written, acks that do not come) without any send failing, until
// Timeouts.Ack. The tests run on a manual clock: the stall lasts as long as the test says.

// stalledErrCore returns a core on clk whose err stream delivered one entry to r, and r
// stalled after it.
func stalledErrCore(t *testing.T, r *forwardtest.Receiver, clk *testkit.ManualClock, cfg Config) (*Core, *zap.Logger) {
	t.Helper()
	cfg.Addr, cfg.Tag = r.Addr(), "shop"
	core := NewWithClock(cfg, clk)
	t.Cleanup(func() { _ = core.Close() })
	logger := zap.New(core)
	logger.Error("before", zap.Int64("id", faultID(0, 0)))
	waitUntil(t, "the first err entry delivered", func() bool { return core.Stats().Err.Delivered == 1 })
	r.Stall()
	return core, logger
}

// allErrArrived checks that every id in [1, n) is at the receiver or in the fallback, and
// that nothing was dropped.
func allErrArrived(t *testing.T, core *Core, r *forwardtest.Receiver, fb *fallbackLog, n int) {
	t.Helper()
	st := core.Stats()
	identityHolds(t, st)
	if st.Err.DroppedTotal() != 0 || int(st.Err.Spilled) != fb.count() {
		t.Errorf("dropped %v, spilled %d, fallback %d", st.Err.Dropped, st.Err.Spilled, fb.count())
	}
	got := fb.idSet()
	for _, e := range r.Entries() {
		if id, ok := e.Record["id"].(int64); ok {
			got[id]++
		}
	}
	for i := range n {
		if got[faultID(0, i)] == 0 {
			t.Errorf("err entry %d neither at the receiver nor in Spill.Fallback", i)
		}
	}
}

// Once the sender has been stuck for Err.MaxWait, an Error() that finds the err buffers full
// does not wait: the entry goes to Spill.Fallback at once, counted as spilled. No send has
// failed meanwhile, and Spill.After has not passed: the batches stay where they are.
func TestErrCallersDoNotWaitOnAStuckSender(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	clk := testkit.NewManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	fb := new(fallbackLog)
	const maxWait = 500 * time.Millisecond
	core, logger := stalledErrCore(t, r, clk, Config{
		Spill: SpillConfig{Fallback: fb}, Timeouts: TimeoutsConfig{Close: 5 * time.Second},
		Transport: TransportConfig{MaxBatchBytes: 2 << 10}, Err: ErrConfig{BufferBytes: 8 << 10, MaxWait: maxWait},
	})
	errSt := sinkOf(core).streams[errStream]
	pad := strings.Repeat("e", 400)
	n := 1
	// Fill the buffers: the first call that finds no room waits (at most Err.MaxWait: the
	// clock stands still, so the sender is not stuck for that long yet).
	for ; errSt.Counts.Waits.Load() == 0; n++ {
		if n > 1000 {
			t.Fatalf("no Error() call found the err buffers full: %+v", core.Stats().Err)
		}
		logger.Error("stalled", zap.Int64("id", faultID(0, n)), zap.String("pad", pad))
	}
	if errSt.Senders.Failing() {
		t.Fatal("a send failed: the receiver only stopped reading")
	}

	clk.Add(maxWait) // the sender has now been stuck in its attempt for Err.MaxWait
	waits, spilled := errSt.Counts.Waits.Load(), core.Stats().Err.Spilled
	for range 40 {
		logger.Error("stalled", zap.Int64("id", faultID(0, n)), zap.String("pad", pad))
		n++
		if w := errSt.Counts.Waits.Load(); w != waits {
			t.Fatalf("an Error() call waited for room with the sender stuck for Err.MaxWait (%d waits, %d before)", w, waits)
		}
	}
	// The buffers were full: each of the 40 went to the fallback at once.
	st := core.Stats().Err
	if st.Spilled-spilled != 40 || st.SendErrors != 0 {
		t.Errorf("spilled %d of the 40 entries logged while stuck (want all), send errors %d", st.Spilled-spilled, st.SendErrors)
	}

	r.Resume()
	if err := core.Close(); err != nil {
		t.Fatal(err)
	}
	allErrArrived(t, core, r, fb, n)
}

// An err entry's wait for room ends on the stream's clock (settings.clock): a clock whose
// tickers fire at once ends an Err.MaxWait of 900 ms in about a millisecond.
func TestErrWaitForRoomEndsOnTheInjectedClock(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	clk := &quickTickClock{testkit.NewManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))}
	fb := new(fallbackLog)
	const maxWait = 900 * time.Millisecond
	cfg := Config{
		Addr: r.Addr(), Tag: "shop", Spill: SpillConfig{Fallback: fb}, Timeouts: TimeoutsConfig{Close: 5 * time.Second},
		Transport: TransportConfig{MaxBatchBytes: 2 << 10}, Err: ErrConfig{BufferBytes: 8 << 10, MaxWait: maxWait},
	}
	core := NewWithClock(cfg, clk)
	defer core.Close()
	logger := zap.New(core)
	logger.Error("before", zap.Int64("id", faultID(0, 0)))
	waitUntil(t, "the first err entry delivered", func() bool { return core.Stats().Err.Delivered == 1 })
	r.Stall()
	errSt := sinkOf(core).streams[errStream]
	pad := strings.Repeat("e", 400)
	var slowest time.Duration
	n := 1
	for ; errSt.Counts.WaitsOut.Load() < 3; n++ {
		if n > 1000 {
			t.Fatalf("no Error() call waited out Err.MaxWait: %+v", core.Stats().Err)
		}
		t0 := time.Now()
		logger.Error("stalled", zap.Int64("id", faultID(0, n)), zap.String("pad", pad))
		slowest = max(slowest, time.Since(t0))
	}
	if slowest >= maxWait/2 {
		t.Errorf("the slowest Error() call took %v: its wait ran on a real timer of Err.MaxWait (%v), not the clock's ticker", slowest, maxWait)
	}
	r.Resume()
	if err := core.Close(); err != nil {
		t.Fatal(err)
	}
	allErrArrived(t, core, r, fb, n)
}

// quickTickClock is a testkit.ManualClock whose new tickers tick every millisecond, whatever the
// period asked for.
type quickTickClock struct{ *testkit.ManualClock }

func (c *quickTickClock) NewTicker(time.Duration) *time.Ticker {
	return time.NewTicker(time.Millisecond)
}

// While acks do not come (the receiver stopped reading), the err entries pending — in the
// frames waiting for their acks, and logged since — go to Spill.Fallback once the stall has
// lasted Spill.After, long before Timeouts.Ack, counted as spilled. When the receiver reads
// again and acks those frames, their entries are at the receiver too: counted as
// duplicated, in Stats and in fluentcore_duplicated_entries_total.
func TestErrPendingLeavesMemoryAfterSpillAfterWhileAcksDoNotCome(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	clk := testkit.NewManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	fb := new(fallbackLog)
	reg := prometheus.NewRegistry()
	// The defaults otherwise: Spill.After 5 s, Timeouts.Ack 30 s.
	core, logger := stalledErrCore(t, r, clk, Config{Spill: SpillConfig{Fallback: fb}, Metrics: MetricsConfig{Registerer: reg}, Timeouts: TimeoutsConfig{Close: 5 * time.Second}})
	errSt := sinkOf(core).streams[errStream]
	for i := 1; i <= 3; i++ {
		logger.Error("stalled", zap.Int64("id", faultID(0, i)))
	}
	waitUntil(t, "a frame waiting for its ack", func() bool { return errSt.Senders[0].Forwarder().Status().FramesInFlight() > 0 })

	clk.Add(DefaultSpillAfter)
	logger.Error("stalled", zap.Int64("id", faultID(0, 4))) // an entry wakes the sender, which looks again
	waitUntil(t, "the 4 pending err entries in Spill.Fallback", func() bool { return fb.count() == 4 })
	st := core.Stats().Err
	if st.Spilled != 4 || st.Pending != 0 || st.OldestPending != 0 || st.SendErrors != 0 {
		t.Errorf("spilled %d, pending %d, oldest pending %v, send errors %d; want 4, 0, 0, 0", st.Spilled, st.Pending, st.OldestPending, st.SendErrors)
	}
	if bad := fb.unordered(); bad != "" {
		t.Errorf("Spill.Fallback got entries out of order: %s", bad)
	}

	r.Resume()
	waitUntil(t, "the frames in flight acked", func() bool { return errSt.Senders[0].Forwarder().Status().FramesInFlight() == 0 })
	st = core.Stats().Err
	// The receiver has the first entry (delivered) and those of the frames that waited.
	if dup := r.Len() - 1; dup < 1 || int(st.Duplicated) != dup || st.Delivered != 1 {
		t.Errorf("receiver has %d entries, delivered %d, duplicated %d; want the %d past the first duplicated", r.Len(), st.Delivered, st.Duplicated, dup)
	}
	want := fmt.Sprintf(`# HELP fluentcore_duplicated_entries_total Err entries acknowledged by the receiver after they were spilled while their frame waited for its ack (counted as spilled; also in the spill or Spill.Fallback).
# TYPE fluentcore_duplicated_entries_total counter
fluentcore_duplicated_entries_total{stream="err"} %d
`, st.Duplicated)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "fluentcore_duplicated_entries_total"); err != nil {
		t.Error(err)
	}
	if err := core.Close(); err != nil {
		t.Fatal(err)
	}
	allErrArrived(t, core, r, fb, 5)
}
