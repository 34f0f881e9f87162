package fluentcore

import (
	"fmt"
	"io"
	"maps"
	"math"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore/forwardtest"
	"github.com/fluentcore/fluentcore/internal/outcome"
	"github.com/fluentcore/fluentcore/internal/stream"
	"github.com/fluentcore/fluentcore/internal/testkit"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
)

// The exposition of a fresh core's counters, compared whole.
func TestMetricsExposition(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	core := New(Config{Addr: r.Addr(), Tag: "m", Metrics: MetricsConfig{Disabled: true}}) // read after Close: not registered
	logger := zap.New(core)
	logger.Info("one")
	logger.Info("two")
	logger.Error("three")
	if err := core.Sync(); err != nil {
		t.Fatal(err)
	}
	core.Close()
	want := `
# HELP fluentcore_entries_total Entries at an enabled level that reached the core, including those dropped before encoding.
# TYPE fluentcore_entries_total counter
fluentcore_entries_total{stream="err"} 1
fluentcore_entries_total{stream="info"} 2
# HELP fluentcore_delivered_entries_total Entries the receiver has (written, or acknowledged when acks are on).
# TYPE fluentcore_delivered_entries_total counter
fluentcore_delivered_entries_total{stream="err"} 1
fluentcore_delivered_entries_total{stream="info"} 2
# HELP fluentcore_spilled_entries_total Entries set aside instead of delivered: appended to the durable spill (Spill.Dir), or written to Spill.Fallback.
# TYPE fluentcore_spilled_entries_total counter
fluentcore_spilled_entries_total{stream="err"} 0
# HELP fluentcore_dropped_entries_total Entries dropped, by reason.
# TYPE fluentcore_dropped_entries_total counter
fluentcore_dropped_entries_total{reason="encode_error",stream="err"} 0
fluentcore_dropped_entries_total{reason="spill_failed",stream="err"} 0
fluentcore_dropped_entries_total{reason="spill_full",stream="err"} 0
fluentcore_dropped_entries_total{reason="closed",stream="info"} 0
fluentcore_dropped_entries_total{reason="degraded",stream="info"} 0
fluentcore_dropped_entries_total{reason="encode_error",stream="info"} 0
fluentcore_dropped_entries_total{reason="queue_full",stream="info"} 0
fluentcore_dropped_entries_total{reason="sampled",stream="info"} 0
fluentcore_dropped_entries_total{reason="shutdown",stream="info"} 0
fluentcore_dropped_entries_total{reason="too_large",stream="info"} 0
# HELP fluentcore_buffer_capacity_bytes The stream's buffer budget in bytes.
# TYPE fluentcore_buffer_capacity_bytes gauge
fluentcore_buffer_capacity_bytes{stream="err"} 4.194304e+06
fluentcore_buffer_capacity_bytes{stream="info"} 8.388608e+06
`
	if err := testutil.CollectAndCompare(core.metrics, strings.NewReader(want),
		"fluentcore_entries_total", "fluentcore_delivered_entries_total",
		"fluentcore_spilled_entries_total", "fluentcore_dropped_entries_total",
		"fluentcore_buffer_capacity_bytes"); err != nil {
		t.Fatal(err)
	}
	if problems, err := testutil.CollectAndLint(core.metrics); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", err, problems)
	}
}

// The spill's metrics are the err stream's alone: the info stream never spills, so it has
// no such series (a zero there would read as "nothing spilled" rather than "cannot spill").
func TestSpillMetricsAreErrOnly(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	core := New(Config{Addr: r.Addr(), Tag: "m"})
	defer core.Close()
	want := `
# HELP fluentcore_spilled_entries_total Entries set aside instead of delivered: appended to the durable spill (Spill.Dir), or written to Spill.Fallback.
# TYPE fluentcore_spilled_entries_total counter
fluentcore_spilled_entries_total{stream="err"} 0
# HELP fluentcore_replayed_entries_total Spilled entries delivered from the durable spill (already counted as spilled).
# TYPE fluentcore_replayed_entries_total counter
fluentcore_replayed_entries_total{stream="err"} 0
# HELP fluentcore_duplicated_entries_total Err entries acknowledged by the receiver after they were spilled while their frame waited for its ack (counted as spilled; also in the spill or Spill.Fallback).
# TYPE fluentcore_duplicated_entries_total counter
fluentcore_duplicated_entries_total{stream="err"} 0
# HELP fluentcore_spill_bytes Bytes of the durable spill's segment files.
# TYPE fluentcore_spill_bytes gauge
fluentcore_spill_bytes{stream="err"} 0
# HELP fluentcore_spill_corrupt_segments_total Spill segments whose damaged tail was skipped on replay.
# TYPE fluentcore_spill_corrupt_segments_total counter
fluentcore_spill_corrupt_segments_total{stream="err"} 0
`
	if err := testutil.CollectAndCompare(core.metrics, strings.NewReader(want),
		"fluentcore_spilled_entries_total", "fluentcore_replayed_entries_total", "fluentcore_duplicated_entries_total",
		"fluentcore_spill_bytes", "fluentcore_spill_corrupt_segments_total"); err != nil {
		t.Fatal(err)
	}
}

// Cores joining and leaving the metrics on one Registerer at once, as reloads racing each
// other would: every join succeeds, no scrape fails, and once the last core has left
// nothing is exported. While one core stays throughout, they all join its collector and
// the counters, summed over every core that has been in it, never go backwards.
func TestMetricsSharedByCoresComingAndGoing(t *testing.T) {
	const goroutines, rounds = 8, 50
	one := func() Stats { return Stats{Info: StreamStats{Entries: 1}, Err: StreamStats{Entries: 1}} }
	labels := map[string]string{"app": "shop"}
	churn := func(reg *prometheus.Registry, joined func(*metrics)) error {
		var wg sync.WaitGroup
		errs := make(chan error, goroutines)
		for range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range rounds {
					m, mem, err := joinMetrics(reg, labels)
					if err != nil {
						errs <- err
						return
					}
					m.start(mem, one)
					joined(m)
					if _, err := reg.Gather(); err != nil {
						errs <- err
						return
					}
					m.leave(mem)
				}
			}()
		}
		wg.Wait()
		close(errs)
		return <-errs
	}
	entries := func(reg *prometheus.Registry) float64 { // -1: none, or the gather failed
		mfs, err := reg.Gather()
		if err != nil {
			return -1
		}
		for _, mf := range mfs {
			if mf.GetName() == "fluentcore_entries_total" {
				return mf.GetMetric()[0].GetCounter().GetValue()
			}
		}
		return -1
	}

	t.Run("no core stays", func(t *testing.T) {
		reg := prometheus.NewRegistry()
		if err := churn(reg, func(*metrics) {}); err != nil {
			t.Fatal(err)
		}
		if n, err := testutil.GatherAndCount(reg); err != nil || n != 0 {
			t.Fatalf("%d series after every core left, %v", n, err)
		}
	})
	t.Run("one core stays", func(t *testing.T) {
		reg := prometheus.NewRegistry()
		holder, mem, err := joinMetrics(reg, labels)
		if err != nil {
			t.Fatal(err)
		}
		holder.start(mem, one)
		var mu sync.Mutex
		var other []string
		last := 0.0
		err = churn(reg, func(m *metrics) {
			mu.Lock()
			defer mu.Unlock()
			if m != holder {
				other = append(other, fmt.Sprintf("%p", m))
			}
			if v := entries(reg); v < last {
				other = append(other, fmt.Sprintf("entries went back from %v to %v (-1: no series)", last, v))
			} else {
				last = v
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(other) > 0 {
			t.Fatalf("not the staying core's collector, or a counter went back: %v", other)
		}
		if got, want := entries(reg), float64(1+goroutines*rounds); got != want {
			t.Fatalf("entries %v, want one per core that has been in it, %v", got, want)
		}
		holder.leave(mem)
		if n, err := testutil.GatherAndCount(reg); err != nil || n != 0 {
			t.Fatalf("%d series after the last core left, %v", n, err)
		}
	})
}

// gauge reads one series of the core's metrics (a fresh Registry each time: the core's
// collector is not registered on one).
func gauge(t *testing.T, core *Core, name string, labels map[string]string) float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(core.metrics)
	return testkit.Metric(t, reg, name, labels)
}

// advance moves clk by d and waits until the sink's clock has taken both streams' counts
// at the new time, as it does once a second of the clock.
func advance(t *testing.T, core *Core, clk *testkit.ManualClock, d time.Duration) {
	t.Helper()
	clk.Add(d)
	now := clk.Now().UnixNano()
	waitUntil(t, "the sink's clock counts at the new time", func() bool {
		for _, st := range sinkOf(core).streams {
			if st.Counts.Recent.Newest() != now {
				return false
			}
		}
		return true
	})
}

// An err entry the receiver does not take is visible while it waits, on the injected clock:
// pending 1, the age of the oldest pending entry and of the send under way (the frame
// waits for its ack) both the time the clock moved; and once the receiver acks it, pending
// and the ages are back to 0 and the server's last success is the clock's time of the ack.
// (Before these gauges an err entry stuck in memory showed nowhere.)
func TestErrPendingIsVisibleUntilAcked(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := testkit.NewManualClock(t0)
	core := NewWithClock(Config{Addr: r.Addr(), Transport: TransportConfig{FlushInterval: 10 * time.Millisecond}, Spill: SpillConfig{After: time.Hour}}, clk)
	defer core.Close()
	errs := map[string]string{"stream": "err"}
	server := map[string]string{"stream": "err", "server": r.Addr()}
	if v := gauge(t, core, "fluentcore_last_send_success_timestamp_seconds", server); v != 0 {
		t.Fatalf("last success %v before any send, want 0", v)
	}

	r.Stall()
	zap.New(core).Error("waits for its ack")
	waitUntil(t, "the err frame waits for its ack", func() bool {
		st := core.Stats().Err
		return st.Pending == 1 && st.Servers[0].FramesInFlight == 1
	})
	clk.Add(3 * time.Second)
	for name, want := range map[string]float64{
		"fluentcore_pending_entries":          1,
		"fluentcore_oldest_pending_seconds":   3,
		"fluentcore_send_in_progress_seconds": 3,
	} {
		if v := gauge(t, core, name, errs); v != want {
			t.Errorf("%s{err} = %v while the receiver stalls, want %v", name, v, want)
		}
	}
	if v := gauge(t, core, "fluentcore_last_send_success_timestamp_seconds", server); v != 0 {
		t.Errorf("last success %v with nothing taken yet, want 0", v)
	}

	r.Resume()
	waitUntil(t, "the err entry is acked", func() bool { return core.Stats().Err.Delivered == 1 })
	for _, name := range []string{"fluentcore_pending_entries", "fluentcore_oldest_pending_seconds", "fluentcore_send_in_progress_seconds"} {
		if v := gauge(t, core, name, errs); v != 0 {
			t.Errorf("%s{err} = %v once delivered, want 0", name, v)
		}
	}
	want := float64(t0.Add(3*time.Second).UnixNano()) / 1e9
	if v := gauge(t, core, "fluentcore_last_send_success_timestamp_seconds", server); v != want {
		t.Errorf("last success %v, want the clock's time of the ack %v", v, want)
	}
	if v := gauge(t, core, "fluentcore_last_send_success_timestamp_seconds", map[string]string{"stream": "info"}); v != 0 {
		t.Errorf("info's last success %v, want 0: the info stream sent nothing", v)
	}
}

// A total outage (the receiver unreachable) with the info buffer full: almost everything
// offered is dropped as queue_full, so keep_ratio reads about the share kept, near 0 (it
// read 1, "all kept", when it was the degrade policy's own ratio, which sheds nothing in an
// outage), and dropping is 1 whatever the degrade policy's state. Once nothing has been
// offered for the window, both read as a calm stream again.
func TestKeepRatioAndDroppingInATotalOutage(t *testing.T) {
	clk := testkit.NewManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	core := NewWithClock(fastRetry(Config{
		Addr:      downAddr(t),
		Transport: TransportConfig{MaxBatchBytes: 1024, FlushInterval: 10 * time.Millisecond},
		Info:      InfoConfig{BufferBytes: 4 << 10},
		Timeouts:  TimeoutsConfig{Close: 100 * time.Millisecond},
	}), clk)
	defer core.Close()
	logger := zap.New(core)
	const n = 2000
	for i := range n {
		logger.Info("lost", zap.Int("i", i), zap.String("pad", strings.Repeat("x", 100)))
	}
	st := core.Stats().Info
	info := map[string]string{"stream": "info"}
	keep := gauge(t, core, "fluentcore_keep_ratio", info)
	if kept := 1 - float64(st.DroppedTotal())/float64(st.Entries); keep > 0.1 || math.Abs(keep-kept) > 0.01 {
		t.Errorf("keep_ratio %v with %d of %d dropped (%v), want about %v", keep, st.DroppedTotal(), st.Entries, st.Dropped, kept)
	}
	if v := gauge(t, core, "fluentcore_dropping", info); v != 1 {
		t.Errorf("dropping{info} = %v with %d dropped as queue_full, want 1", v, st.Dropped["queue_full"])
	}
	if v := gauge(t, core, "fluentcore_dropping", map[string]string{"stream": "err"}); v != 0 {
		t.Errorf("dropping{err} = %v, want 0: no err entry was logged", v)
	}

	// The clock counts once a second of its time; this one moves by leaps, and a window
	// reaches back to the newest count at least its length old.
	advance(t, core, clk, 11*time.Second) // a count with every drop in it
	advance(t, core, clk, time.Second)
	if v := gauge(t, core, "fluentcore_dropping", info); v != 0 {
		t.Errorf("dropping{info} = %v after a second with no drop, want 0", v)
	}
	if v := gauge(t, core, "fluentcore_keep_ratio", info); v > 0.1 {
		t.Errorf("keep_ratio %v with the drops 1 s ago, want them still in its window", v)
	}
	advance(t, core, clk, outcome.KeepWindow)
	if v := gauge(t, core, "fluentcore_keep_ratio", info); v != 1 {
		t.Errorf("keep_ratio %v with nothing offered in the window, want 1", v)
	}
}

// A closed core drops nothing for backpressure any more: Dropping, true while it dropped,
// reads false after Close, although the clock that moved its window has stopped.
func TestDroppingEndsWithClose(t *testing.T) {
	clk := testkit.NewManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	core := NewWithClock(fastRetry(Config{
		Addr: downAddr(t), Transport: TransportConfig{MaxBatchBytes: 1024}, Info: InfoConfig{BufferBytes: 4 << 10},
		Timeouts: TimeoutsConfig{Close: 100 * time.Millisecond}, Spill: SpillConfig{Fallback: io.Discard},
	}), clk)
	logger := zap.New(core)
	for i := range 200 {
		logger.Info("lost", zap.Int("i", i), zap.String("pad", strings.Repeat("x", 100)))
	}
	if !core.Stats().Info.Dropping {
		t.Fatalf("not dropping with %v dropped", core.Stats().Info.Dropped)
	}
	_ = core.Close()
	if core.Stats().Info.Dropping {
		t.Error("Dropping still true after Close")
	}
}

// While the receiver stops reading, nothing is delivered: capacity reads 0 (it held the
// last measure, above what the receiver took, while it took nothing), and the stall shows
// while it lasts in send_in_progress_seconds and oldest_pending_seconds.
func TestCapacityIsZeroWhileNothingIsDelivered(t *testing.T) {
	r := forwardtest.NewReceiver(t, forwardtest.WithReadRate(40_000))
	core := New(Config{
		Addr:      r.Addr(),
		Transport: TransportConfig{MaxBatchBytes: 16 << 10, FlushInterval: 10 * time.Millisecond},
		Info:      InfoConfig{BufferBytes: 512 << 10, Acks: AcksOn},
	})
	defer core.Close()
	logger := zap.New(core)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				logger.Info("flood")
			}
		}()
	}
	stopped := false
	stopFlood := func() {
		if !stopped {
			stopped = true
			close(stop)
			wg.Wait()
		}
	}
	defer stopFlood()
	info := map[string]string{"stream": "info"}
	waitUntil(t, "the receiver's capacity is measured", func() bool {
		return gauge(t, core, "fluentcore_capacity_entries_per_second", info) > 0
	})
	r.Stall()
	waitUntil(t, "the stall holds entries back", func() bool { return core.Stats().Info.Servers[0].FramesInFlight > 0 })
	stopFlood()
	waitUntil(t, "capacity reads 0 while nothing is delivered", func() bool {
		return gauge(t, core, "fluentcore_capacity_entries_per_second", info) == 0
	})
	st := core.Stats().Info
	if st.Pending == 0 || st.SendInProgress < stream.StallAfter || st.OldestPending < stream.StallAfter {
		t.Errorf("during the stall: pending %d, send in progress %v, oldest pending %v; want entries pending, both over %v",
			st.Pending, st.SendInProgress, st.OldestPending, stream.StallAfter)
	}
	if v := gauge(t, core, "fluentcore_send_in_progress_seconds", info); v < stream.StallAfter.Seconds() {
		t.Errorf("send_in_progress_seconds{info} = %v during the stall", v)
	}
	r.Resume()
}

// The send-duration histogram resolves an err frame acked within tens of µs and a stall
// up to Timeouts.Ack's default: its lowest bound is under 100 µs and its highest over 30 s.
func TestSendDurationBucketsSpanMicrosecondsToStalls(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	reg := prometheus.NewPedanticRegistry()
	core := New(Config{Addr: r.Addr(), Metrics: MetricsConfig{Registerer: reg}})
	defer core.Close()
	zap.New(core).Error("one")
	if err := core.Sync(); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "fluentcore_send_duration_seconds" {
			continue
		}
		b := mf.GetMetric()[0].GetHistogram().GetBucket()
		if lo, hi := b[0].GetUpperBound(), b[len(b)-1].GetUpperBound(); lo > 20e-6 || hi < DefaultAckTimeout.Seconds() {
			t.Fatalf("buckets from %v s to %v s; want at most 20 µs to at least %v", lo, hi, DefaultAckTimeout)
		}
		return
	}
	t.Fatal("no fluentcore_send_duration_seconds")
}

// Across the cores of a reload the new gauges combine as documented: pending summed, the
// ages the largest, dropping either's, keep_ratio from the summed window counts (a core
// that was offered nothing does not hide another's drops, as the lowest ratio would not
// either, but it weighs by what each was offered), and the last success the latest of every
// core that has been in the collector, the closed ones too.
func TestMetricsCombineTheNewGaugesOverCores(t *testing.T) {
	t1 := time.Date(2030, 1, 1, 0, 0, 1, 0, time.UTC)
	t2 := t1.Add(time.Minute)
	stats := func(pending uint64, oldest time.Duration, dropping bool, recent outcome.Counts, last time.Time) func() Stats {
		return func() Stats {
			return Stats{Info: StreamStats{
				Pending: pending, OldestPending: oldest, SendInProgress: oldest, Dropping: dropping, AdmitRatio: 1,
				recent: recent, Servers: []ServerStats{{Addr: "a", LastDelivery: last}},
			}}
		}
	}
	reg := prometheus.NewPedanticRegistry()
	m, old, err := joinMetrics(reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	m.start(old, stats(5, 2*time.Second, true, outcome.Counts{Offered: 300, Dropped: 297, Pressed: 297}, t2))
	_, cur, _ := joinMetrics(reg, nil)
	m.start(cur, stats(3, 7*time.Second, false, outcome.Counts{Offered: 100}, t1))
	got := m.total().Info
	if got.Pending != 8 || got.OldestPending != 7*time.Second || got.SendInProgress != 7*time.Second || !got.Dropping ||
		math.Abs(got.KeepRatio-103.0/400) > 1e-9 || !got.Servers[0].LastDelivery.Equal(t2) {
		t.Fatalf("combined: pending %d, oldest %v, in progress %v, dropping %v, keep %v, last %v",
			got.Pending, got.OldestPending, got.SendInProgress, got.Dropping, got.KeepRatio, got.Servers[0].LastDelivery)
	}
	m.leave(old)
	got = m.total().Info
	if got.Pending != 3 || got.Dropping || got.KeepRatio != 1 || !got.Servers[0].LastDelivery.Equal(t2) {
		t.Fatalf("after the old core left: pending %d, dropping %v, keep %v, last %v (want the old core's %v)",
			got.Pending, got.Dropping, got.KeepRatio, got.Servers[0].LastDelivery, t2)
	}
	m.leave(cur)
}

// The exposition of the gauges that say whether entries are arriving, compared whole on a
// core whose entries were all delivered: the names, labels and help that dashboards and
// alerts are written against.
func TestArrivalGaugesExposition(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	core := New(Config{Addr: r.Addr(), Tag: "m"})
	logger := zap.New(core)
	logger.Info("one")
	logger.Error("two")
	if err := core.Sync(); err != nil {
		t.Fatal(err)
	}
	core.Close()
	want := `
# HELP fluentcore_pending_entries Entries taken and not yet delivered, spilled or dropped: in the stream's buffers (open, queued, being sent, waiting for acks) or being written.
# TYPE fluentcore_pending_entries gauge
fluentcore_pending_entries{stream="err"} 0
fluentcore_pending_entries{stream="info"} 0
# HELP fluentcore_oldest_pending_seconds Age of the oldest entry in the stream's buffers not yet delivered, spilled or dropped (its batch's first entry); 0 when none.
# TYPE fluentcore_oldest_pending_seconds gauge
fluentcore_oldest_pending_seconds{stream="err"} 0
fluentcore_oldest_pending_seconds{stream="info"} 0
# HELP fluentcore_send_in_progress_seconds How long the oldest send attempt under way has lasted: a frame's dial and write, or the wait for its ack; 0 when none.
# TYPE fluentcore_send_in_progress_seconds gauge
fluentcore_send_in_progress_seconds{stream="err"} 0
fluentcore_send_in_progress_seconds{stream="info"} 0
# HELP fluentcore_dropping 1 while the stream has dropped entries for backpressure (degraded, sampled, queue_full, spill_full) in the last second, else 0.
# TYPE fluentcore_dropping gauge
fluentcore_dropping{stream="err"} 0
fluentcore_dropping{stream="info"} 0
# HELP fluentcore_keep_ratio Share of the info entries offered in the last 10 s that were not dropped, for any reason (1: none offered, or none dropped; 0: all dropped).
# TYPE fluentcore_keep_ratio gauge
fluentcore_keep_ratio{stream="info"} 1
# HELP fluentcore_degrade_admit_ratio Share of the offered info entries the adaptive degrade policy let through at its last step (1: nothing thinned).
# TYPE fluentcore_degrade_admit_ratio gauge
fluentcore_degrade_admit_ratio{stream="info"} 1
# HELP fluentcore_capacity_entries_per_second Info entries per second the stream delivered while its buffer held a backlog, smoothed: what the adaptive degrade policy admits; 0 while nothing is delivered.
# TYPE fluentcore_capacity_entries_per_second gauge
fluentcore_capacity_entries_per_second{stream="info"} 0
`
	if err := testutil.CollectAndCompare(core.metrics, strings.NewReader(want),
		"fluentcore_pending_entries", "fluentcore_oldest_pending_seconds", "fluentcore_send_in_progress_seconds",
		"fluentcore_dropping", "fluentcore_keep_ratio", "fluentcore_degrade_admit_ratio",
		"fluentcore_capacity_entries_per_second"); err != nil {
		t.Fatal(err)
	}
	for _, stream := range []string{"info", "err"} {
		v := gauge(t, core, "fluentcore_last_send_success_timestamp_seconds", map[string]string{"stream": stream, "server": r.Addr()})
		if now := float64(time.Now().UnixNano()) / 1e9; v <= now-60 || v > now {
			t.Errorf("last_send_success_timestamp_seconds{%s} = %v, want the Unix time of its delivery, just before %v", stream, v, now)
		}
	}
}

// series returns the value of the series of the metric name in g whose labels are exactly
// labels (a counter's or a gauge's), and whether there is one.
func series(t *testing.T, g prometheus.Gatherer, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, lp := range m.GetLabel() {
				if want, ok := labels[lp.GetName()]; !ok || want != lp.GetValue() {
					continue next
				}
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue(), true
			}
			return m.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

// Every label name the metrics set themselves is refused in Metrics.ConstLabels, by name, "tag"
// (the logger tags' series) included: with it, none of the series could be made. New with
// it still gives a working core whose Sync reports Validate's error, and registers nothing.
func TestValidateRefusesEveryMetricsLabelName(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	names := append([]string{"tag"}, metricLabelNames[:]...)
	for _, name := range names {
		cfg := Config{Addr: r.Addr(), Metrics: MetricsConfig{ConstLabels: prometheus.Labels{name: "x", "core": "a"}}}
		err := cfg.Validate()
		if want := fmt.Sprintf("Metrics.ConstLabels %q", name); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Metrics.ConstLabels {%s: x}: Validate() = %v, want an error naming %s", name, err, want)
			continue
		}
		reg := prometheus.NewPedanticRegistry()
		cfg.Metrics.Registerer = reg
		core := New(cfg)
		zap.New(core).Info("still logged")
		if serr := core.Sync(); serr == nil || serr.Error() != err.Error() {
			t.Errorf("Metrics.ConstLabels {%s: x}: Sync() = %v, want Validate's %v", name, serr, err)
		}
		if n, gerr := testutil.GatherAndCount(reg); gerr != nil || n != 0 {
			t.Errorf("Metrics.ConstLabels {%s: x}: %d series registered, %v", name, n, gerr)
		}
		if d := core.Stats().Info.Delivered; d != 1 {
			t.Errorf("Metrics.ConstLabels {%s: x}: %d delivered, want the core to work all the same", name, d)
		}
		core.Close()
	}
}

// Cores with different Metrics.ConstLabels names on one registry all export, each its own series,
// with its labels and no other: none, {core}, {core, team}. A reload of one of them (closed,
// then made again with the same labels) continues its counters, and leaves the others'
// alone. Once every core is closed, nothing is exported.
func TestCoresWithDifferentConstLabelNamesAllExport(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	reg := prometheus.NewPedanticRegistry()
	newCore := func(labels prometheus.Labels) *Core {
		core := New(Config{Addr: r.Addr(), Metrics: MetricsConfig{Registerer: reg, ConstLabels: labels}, Transport: TransportConfig{FlushInterval: 10 * time.Millisecond}})
		if err := core.Sync(); err != nil {
			t.Fatalf("%v: %v", labels, err)
		}
		return core
	}
	logged := func(core *Core, n int) {
		for i := range n {
			zap.New(core).Info("counted", zap.Int("i", i))
		}
		if err := core.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	infoOf := func(labels prometheus.Labels) map[string]string {
		m := map[string]string{"stream": "info"}
		maps.Copy(m, labels)
		return m
	}
	check := func(when string, want map[*prometheus.Labels]float64) {
		t.Helper()
		for labels, n := range want {
			got, ok := series(t, reg, "fluentcore_delivered_entries_total", infoOf(*labels))
			if !ok || got != n {
				t.Errorf("%s: delivered%v = %v (found %v), want %v", when, infoOf(*labels), got, ok, n)
			}
		}
		if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
			t.Errorf("%s: lint: %v %v", when, err, problems)
		}
	}
	none, b, c := prometheus.Labels{}, prometheus.Labels{"core": "b"}, prometheus.Labels{"core": "c", "team": "shop"}

	coreA := newCore(nil)
	coreB := newCore(b)
	logged(coreA, 2)
	logged(coreB, 3)
	check("two cores", map[*prometheus.Labels]float64{&none: 2, &b: 3})

	coreC := newCore(c)
	logged(coreC, 4)
	check("three cores", map[*prometheus.Labels]float64{&none: 2, &b: 3, &c: 4})
	if n, err := testutil.GatherAndCount(reg, "fluentcore_dropped_entries_total"); err != nil || n != 3*(7+3) {
		t.Errorf("dropped series: %d, %v; want every reason of both streams for each of the 3 cores", n, err)
	}

	if err := coreB.Close(); err != nil {
		t.Fatal(err)
	}
	coreB = newCore(b)
	logged(coreB, 1)
	check("core b reloaded", map[*prometheus.Labels]float64{&none: 2, &b: 4, &c: 4})

	for _, core := range []*Core{coreA, coreB, coreC} {
		if err := core.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 0 {
		t.Fatalf("%d series once every core is closed, %v", n, err)
	}
}

// A reload's old core, closed, still counts what it is handed, and the shared series have
// it: 50 info entries logged through its logger after Close are dropped as closed, in its
// Stats and in the registry's dropped counter; 5 err entries go to its Spill.Fallback, counted
// as spilled in both.
func TestClosedCoreDropsCountInSharedMetrics(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	reg := prometheus.NewPedanticRegistry()
	cfg := Config{Addr: r.Addr(), Metrics: MetricsConfig{Registerer: reg}, Spill: SpillConfig{Fallback: io.Discard}}
	old := New(cfg)
	cur := New(cfg)
	defer cur.Close()
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	logger := zap.New(old)
	for i := range 50 {
		logger.Info("after close", zap.Int("i", i))
	}
	for i := range 5 {
		logger.Error("after close", zap.Int("i", i))
	}
	st := old.Stats()
	if st.Info.Dropped["closed"] != 50 || st.Err.Spilled != 5 {
		t.Fatalf("the closed core's Stats: closed %d, err spilled %d; want 50, 5", st.Info.Dropped["closed"], st.Err.Spilled)
	}
	if v, _ := series(t, reg, "fluentcore_dropped_entries_total", map[string]string{"stream": "info", "reason": "closed"}); v != 50 {
		t.Errorf("dropped{info, closed} = %v in the shared series, want the closed core's 50", v)
	}
	if v, _ := series(t, reg, "fluentcore_spilled_entries_total", map[string]string{"stream": "err"}); v != 5 {
		t.Errorf("spilled{err} = %v in the shared series, want the closed core's 5", v)
	}
	if v, _ := series(t, reg, "fluentcore_entries_total", map[string]string{"stream": "info"}); v != 50 {
		t.Errorf("entries{info} = %v in the shared series, want 50", v)
	}
}

// closedAndDropped makes a core on reg, logs 3 info entries, closes it and logs 2 more
// (dropped as closed), and returns its collector; nothing of the core itself stays
// reachable once it returns.
func closedAndDropped(t *testing.T, addr string, reg prometheus.Registerer) *metrics {
	core := New(Config{Addr: addr, Metrics: MetricsConfig{Registerer: reg}})
	logger := zap.New(core)
	for range 3 {
		logger.Info("delivered")
	}
	if err := core.Close(); err != nil {
		t.Fatal(err)
	}
	logger.Info("dropped")
	logger.Info("dropped")
	return core.metrics
}

// A closed core that nothing reaches any more is let go by the shared collector (it holds
// none of its buffers), and its counts stay in the series, as they were at its last.
func TestUnreachableClosedCoreIsReleased(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	reg := prometheus.NewPedanticRegistry()
	cur := New(Config{Addr: r.Addr(), Metrics: MetricsConfig{Registerer: reg}})
	defer cur.Close()
	m := closedAndDropped(t, r.Addr(), reg)
	if m != cur.metrics {
		t.Fatal("the two cores are not in one collector")
	}
	waitUntil(t, "the closed core is released", func() bool {
		runtime.GC()
		m.mu.Lock()
		defer m.mu.Unlock()
		return len(m.closed) == 0
	})
	info := map[string]string{"stream": "info"}
	if v, _ := series(t, reg, "fluentcore_delivered_entries_total", info); v != 3 {
		t.Errorf("delivered{info} = %v after the release, want the closed core's 3", v)
	}
	if v, _ := series(t, reg, "fluentcore_dropped_entries_total", map[string]string{"stream": "info", "reason": "closed"}); v != 2 {
		t.Errorf("dropped{info, closed} = %v after the release, want the closed core's 2", v)
	}
}

// The hub is found through a wrapped Registerer too, each core wrapping the registry anew
// with the same labels; a Metrics.ConstLabels value "" is no label, as Prometheus reads it, so
// {core: ""} shares the series of no Metrics.ConstLabels rather than exporting their duplicates;
// and the metric names stay claimed on the registry: another collector of one of them is
// refused, as it would be by checked metrics.
func TestMetricsHubOnAWrappedRegistererAndEmptyLabelValues(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	pod := prometheus.Labels{"pod": "p1"}
	one := func() Stats { return Stats{Info: StreamStats{Entries: 1}} }
	join := func(labels prometheus.Labels) (*metrics, *metricsMember) {
		m, mem, err := joinMetrics(prometheus.WrapRegistererWith(pod, reg), labels)
		if err != nil {
			t.Fatalf("%v: %v", labels, err)
		}
		m.start(mem, one)
		return m, mem
	}
	m1, mem1 := join(nil)
	m2, mem2 := join(prometheus.Labels{"core": ""})
	m3, mem3 := join(prometheus.Labels{"core": "b"})
	if m1 != m2 || m1 == m3 {
		t.Fatalf("groups: none %p, core=\"\" %p, core=b %p; want the first two one group", m1, m2, m3)
	}
	for labels, want := range map[*map[string]string]float64{
		{"pod": "p1", "stream": "info"}:              2,
		{"pod": "p1", "core": "b", "stream": "info"}: 1,
	} {
		if v, ok := series(t, reg, "fluentcore_entries_total", *labels); !ok || v != want {
			t.Errorf("entries%v = %v (found %v), want %v", *labels, v, ok, want)
		}
	}
	if n, err := testutil.GatherAndCount(reg, "fluentcore_entries_total"); err != nil || n != 4 {
		t.Errorf("%d entries series, %v; want 2 streams of 2 groups", n, err)
	}
	err := reg.Register(prometheus.NewCounter(prometheus.CounterOpts{Name: "fluentcore_entries_total", Help: "not ours"}))
	if err == nil {
		t.Error("another collector of fluentcore_entries_total was registered beside the metrics")
	}
	for _, left := range []struct {
		m   *metrics
		mem *metricsMember
	}{{m1, mem1}, {m2, mem2}, {m3, mem3}} {
		left.m.leave(left.mem)
	}
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 0 {
		t.Fatalf("%d series once every core left, %v", n, err)
	}
}
