package fluentcore

import (
	"strings"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore/forwardtest"
	"github.com/fluentcore/fluentcore/internal/testkit"
	"go.uber.org/zap"
)

// A receiver down for a while, then back: every err entry logged meanwhile is delivered,
// each once, and none went to the fallback while the budget had room.
func TestOutageThenRecoveryDeliversEverythingOnce(t *testing.T) {
	addr := downAddr(t)
	var fb testkit.Lines
	core := New(fastRetry(Config{
		Addr:      addr,
		Spill:     SpillConfig{Fallback: &fb},
		Transport: TransportConfig{MaxBatchBytes: 16 << 10, FlushInterval: 2 * time.Millisecond},
		Err:       ErrConfig{BufferBytes: 256 << 10},
	}))
	defer core.Close()
	logger := zap.New(core)
	pad := strings.Repeat("x", 600)
	const n = 300 // about 195 KB: room to spare in 256 KiB
	for i := range n {
		logger.Error("outage", zap.Int("i", i), zap.String("pad", pad))
		time.Sleep(200 * time.Microsecond) // flush ticks fall between the entries
	}
	r := forwardtest.NewReceiver(t, forwardtest.WithAddr(addr))
	if err := core.Sync(); err != nil {
		t.Fatal(err)
	}
	got, err := r.WaitForEntries(n, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]int{}
	for _, e := range got {
		seen[e.Record["i"].(int64)]++
	}
	for i := range int64(n) {
		if seen[i] != 1 {
			t.Fatalf("entry %d arrived %d times", i, seen[i])
		}
	}
	if st := core.Stats().Err; fb.Records() != 0 || st.Spilled != 0 || st.Delivered != n {
		t.Fatalf("fallback %d lines, stats %+v", fb.Records(), st)
	}
}

// The err sender reads Spill.After's time from the injected clock (settings.clock), not from
// time.Now: with Spill.After an hour and the receiver down, a failed err batch stays in memory
// however many attempts fail while the clock stands still, and goes to Spill.Fallback (spillDue)
// as soon as the clock is moved past Spill.After, with no hour of real time passing.
func TestSpillAfterIsReadOnTheInjectedClock(t *testing.T) {
	clk := testkit.NewManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	fb := new(fallbackLog)
	core := NewWithClock(Config{
		Addr:      downAddr(t),
		Spill:     SpillConfig{Fallback: fb, After: time.Hour},
		Timeouts:  TimeoutsConfig{Close: 100 * time.Millisecond},
		Transport: TransportConfig{FlushInterval: 10 * time.Millisecond, RetryMin: time.Millisecond, RetryMax: 5 * time.Millisecond},
	}, clk)
	defer core.Close()
	zap.New(core).Error("down", zap.Int64("id", 1))

	waitUntil(t, "five failed sends", func() bool { return core.Stats().Err.SendErrors >= 5 })
	if st := core.Stats().Err; st.Spilled != 0 || fb.count() != 0 {
		t.Fatalf("spilled %d (Spill.Fallback %d) with the clock still: Spill.After was not read on it", st.Spilled, fb.count())
	}

	clk.Add(time.Hour)
	waitUntil(t, "the entry in Spill.Fallback once the clock passed Spill.After", func() bool { return fb.count() == 1 })
	if st := core.Stats().Err; st.Spilled != 1 || st.Delivered != 0 {
		t.Errorf("spilled %d, delivered %d; want 1 and 0", st.Spilled, st.Delivered)
	}
}
