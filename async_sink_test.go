package fluentcore

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore/forwardtest"
	"github.com/fluentcore/fluentcore/internal/testkit"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/tinylib/msgp/msgp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// identityHolds checks entries = delivered + spilled + dropped for both streams.
func identityHolds(t *testing.T, st Stats) {
	t.Helper()
	for name, s := range map[string]StreamStats{"info": st.Info, "err": st.Err} {
		if s.Entries != s.Delivered+s.Spilled+s.DroppedTotal() {
			t.Errorf("%s: entries %d != delivered %d + spilled %d + dropped %d %v",
				name, s.Entries, s.Delivered, s.Spilled, s.DroppedTotal(), s.Dropped)
		}
	}
}

// The buffers are the budget: after any amount of logging, with the receiver stalled and
// resumed, every stream still has exactly its batches, none grown past the batch size.
func TestBatchBuffersNeverGrowOrMultiply(t *testing.T) {
	r := forwardtest.NewReceiver(t, forwardtest.CountOnly())
	core := New(Config{
		Addr: r.Addr(), Level: zapcore.DebugLevel, MaxBatchBytes: 8 << 10, MaxEntryBytes: 6 << 10,
		Info: StreamConfig{BufferBytes: 64 << 10}, Err: StreamConfig{BufferBytes: 64 << 10},
		FlushInterval: 5 * time.Millisecond, WriteTimeout: 50 * time.Millisecond,
		RetryMin: time.Millisecond, RetryMax: 10 * time.Millisecond, ErrFallback: io.Discard,
	})
	logger := zap.New(core)
	for i := 0; i < 20_000; i++ {
		if i == 5000 {
			r.Stall()
		}
		if i == 15_000 {
			r.Resume()
		}
		// Entry sizes from a few bytes to over MaxEntryBytes, so batches overflow at every
		// boundary and some entries are refused.
		pad := strings.Repeat("p", rand.IntN(7<<10))
		if i%7 == 0 {
			logger.Error("e", zap.String("pad", pad))
		} else {
			logger.Info("i", zap.String("pad", pad))
		}
	}
	if err := core.Close(); err != nil {
		t.Fatal(err)
	}
	for _, st := range sinkOf(core).streams {
		// Every batch is back on the free list or is a shard's (empty) open batch.
		var all []*batch
		for len(st.free) > 0 {
			all = append(all, <-st.free)
		}
		for i := range st.shards {
			if b := st.shards[i].cur; b != nil {
				all = append(all, b)
			}
		}
		if len(all) != st.nbatches {
			t.Errorf("%s: found %d of %d batches", st.id, len(all), st.nbatches)
		}
		for _, b := range all {
			if cap(b.buf) != st.batchCap || len(b.buf) != 0 || b.n != 0 {
				t.Errorf("%s: batch with cap %d len %d n %d, want cap %d and empty", st.id, cap(b.buf), len(b.buf), b.n, st.batchCap)
			}
		}
	}
	st := core.Stats()
	if st.Info.Dropped["too_large"] == 0 {
		t.Error("no info entry was refused as too large")
	}
	identityHolds(t, st)
}

// With the receiver stalled, logging flat out does not grow the heap past the configured
// buffer budget (which New allocates up front).
func TestHeapStaysWithinBudgetWhileReceiverStalls(t *testing.T) {
	r := forwardtest.NewReceiver(t, forwardtest.CountOnly())
	r.Stall()
	const budget = 2 << 20 // info + err
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	core := New(Config{
		Addr: r.Addr(), MaxBatchBytes: 64 << 10,
		Info: StreamConfig{BufferBytes: budget / 2}, Err: StreamConfig{BufferBytes: budget / 2},
		WriteTimeout: 100 * time.Millisecond, ErrMaxWait: time.Millisecond, ErrFallback: io.Discard,
		RetryMin: time.Millisecond, RetryMax: 20 * time.Millisecond,
	})
	logger := zap.New(core)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50_000; i++ {
				logger.Info("flood", zap.Int("i", i), zap.String("user", "u-8f3a2b9c"), zap.Float64("latency", 12.5))
				if i%1000 == 0 {
					logger.Error("still failing", zap.Int("i", i))
				}
			}
		}()
	}
	wg.Wait()
	runtime.GC()
	runtime.ReadMemStats(&after)
	growth := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	// The budget, plus 1 MiB for everything else the core and the test own (goroutines,
	// encoders, the stalled receiver, timers).
	if limit := int64(budget + 1<<20); growth > limit {
		t.Fatalf("heap grew by %d bytes while the receiver stalled; limit %d", growth, limit)
	}
	st := core.Stats()
	if st.Info.Dropped["queue_full"]+st.Info.Dropped["degraded"]+st.Info.Dropped["sampled"] == 0 {
		t.Fatal("nothing dropped: the receiver was not stalled")
	}
	r.Resume()
	if err := core.Close(); err != nil {
		t.Fatal(err)
	}
	identityHolds(t, core.Stats())
}

// Many goroutines, random levels and sizes, a receiver that stalls and resumes: after Close,
// every entry is accounted for, and the receiver has exactly what was counted delivered.
func TestAccountingIdentityUnderRandomLoad(t *testing.T) {
	r := forwardtest.NewReceiver(t, forwardtest.CountOnly())
	var spilled syncCounter
	core := New(Config{
		Addr: r.Addr(), Level: zapcore.DebugLevel, MaxBatchBytes: 16 << 10,
		Info: StreamConfig{BufferBytes: 128 << 10}, Err: StreamConfig{BufferBytes: 64 << 10},
		FlushInterval: 2 * time.Millisecond, WriteTimeout: 30 * time.Millisecond, ErrMaxWait: 2 * time.Millisecond,
		RetryMin: time.Millisecond, RetryMax: 5 * time.Millisecond, ErrFallback: &spilled,
		Degrade: DegradeConfig{Hold: 20 * time.Millisecond, DisconnectedAfter: 20 * time.Millisecond},
	})
	logger := zap.New(core).With(zap.String("svc", "random"))
	sugar := logger.Sugar()
	var logged atomic.Int64
	stop := make(chan struct{})
	var chaos sync.WaitGroup
	chaos.Add(1)
	go func() { // stall and resume as logging crosses thresholds, not on a clock
		defer chaos.Done()
		for _, at := range []int64{20_000, 60_000, 100_000} {
			for logged.Load() < at {
				select {
				case <-stop:
					return
				default:
					runtime.Gosched()
				}
			}
			r.Stall()
			for logged.Load() < at+20_000 {
				select {
				case <-stop:
					r.Resume()
					return
				default:
					runtime.Gosched()
				}
			}
			r.Resume()
		}
	}()
	var wg sync.WaitGroup
	levels := []zapcore.Level{zapcore.DebugLevel, zapcore.InfoLevel, zapcore.WarnLevel, zapcore.ErrorLevel}
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10_000; i++ {
				lvl := levels[rand.IntN(len(levels))]
				if i%2 == 0 {
					logger.Log(lvl, "event", zap.Int("i", i), zap.String("pad", strings.Repeat("x", rand.IntN(300))))
				} else {
					sugar.Logw(lvl, fmt.Sprint("msg-", i%50), "i", i)
				}
				logged.Add(1)
			}
		}()
	}
	wg.Wait()
	close(stop)
	chaos.Wait()
	if err := core.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	st := core.Stats()
	identityHolds(t, st)
	if st.Info.DroppedTotal() == 0 {
		t.Fatalf("the stalls had no effect (drops %v): the test proves nothing", st.Info.Dropped)
	}
	if st.Info.Entries+st.Err.Entries != 16*10_000 {
		t.Fatalf("entries counted %d, logged %d", st.Info.Entries+st.Err.Entries, 16*10_000)
	}
	if int(st.Err.Spilled) != spilled.lines() {
		t.Fatalf("spilled %d, fallback got %d lines", st.Err.Spilled, spilled.lines())
	}
	if err := r.WaitFor(func(s forwardtest.Stats) bool {
		return s.Entries >= int64(st.Info.Delivered+st.Err.Delivered)
	}, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := r.Stats().Entries; got != int64(st.Info.Delivered+st.Err.Delivered) {
		t.Fatalf("receiver has %d entries, core counted %d delivered", got, st.Info.Delivered+st.Err.Delivered)
	}
}

// syncCounter counts the JSON lines written to it.
type syncCounter struct {
	mu sync.Mutex
	n  int
}

func (c *syncCounter) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.n += strings.Count(string(p), "\n")
	c.mu.Unlock()
	return len(p), nil
}

func (c *syncCounter) lines() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// While degraded, Check drops info entries before they are encoded and counts them; the
// transition is reported once through OnEvent and the metrics, and err is unaffected.
func TestDegradeEndToEnd(t *testing.T) {
	r := forwardtest.NewReceiver(t, forwardtest.CountOnly())
	reg := prometheus.NewRegistry()
	events := make(chan Event, 16)
	core := New(Config{
		Addr: r.Addr(), MaxBatchBytes: 4 << 10, Registerer: reg,
		Info:          StreamConfig{BufferBytes: 64 << 10},
		FlushInterval: time.Millisecond, WriteTimeout: 20 * time.Millisecond,
		RetryMin: time.Millisecond, RetryMax: 5 * time.Millisecond,
		// Hold is long enough that the stream cannot recover inside the 1000-entry loop
		// below: a reconnect lands in a fresh kernel buffer, sends succeed again and the
		// queue drains even while the receiver reads nothing.
		Degrade: DegradeConfig{Policy: DegradeKeepWarn, Hold: 2 * time.Second},
		OnEvent: func(e Event) { events <- e },
	})
	logger := zap.New(core)
	r.Stall()
	deadline := time.Now().Add(10 * time.Second)
	for !core.Stats().Info.Degraded {
		if time.Now().After(deadline) {
			t.Fatal("info stream never degraded with the receiver stalled")
		}
		logger.Info("filling", zap.String("pad", strings.Repeat("x", 500)))
	}
	if e := <-events; e.Kind != EventDegraded || e.Stream != "info" {
		t.Fatalf("first event %+v", e)
	}
	before := core.Stats().Info
	for i := 0; i < 1000; i++ {
		logger.Info("dropped in Check")
		logger.Warn("kept by DegradeKeepWarn")
	}
	logger.Error("err is not degraded")
	after := core.Stats().Info
	if d := after.Dropped["degraded"] - before.Dropped["degraded"]; d != 1000 {
		t.Fatalf("degraded drops %d, want 1000", d)
	}
	if v := testutil.ToFloat64(gaugeOf(t, reg, "fluentcore_degraded", "info")); v != 1 {
		t.Fatalf("fluentcore_degraded{info} = %v", v)
	}
	r.Resume()
	select {
	case e := <-events:
		if e.Kind != EventRecovered {
			t.Fatalf("second event %+v", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("info stream did not recover after the receiver resumed")
	}
	if err := core.Close(); err != nil {
		t.Fatal(err)
	}
	st := core.Stats()
	if st.Info.DegradeTransitions != 2 || len(events) != 0 {
		t.Fatalf("transitions %d, extra events %d", st.Info.DegradeTransitions, len(events))
	}
	if st.Err.Delivered != 1 {
		t.Fatalf("err delivered %d", st.Err.Delivered)
	}
	identityHolds(t, st)
}

// gaugeOf extracts one stream's series of a metric as a standalone collector for testutil.
func gaugeOf(t *testing.T, reg *prometheus.Registry, name, stream string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "stream" && lp.GetValue() == stream {
					g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name})
					g.Set(m.GetGauge().GetValue())
					return g
				}
			}
		}
	}
	t.Fatalf("no %s{stream=%q}", name, stream)
	return nil
}

// The exposition of a fresh core's counters, compared whole.
func TestMetricsExposition(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	core := New(Config{Addr: r.Addr(), Tag: "m"})
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
# HELP fluentcore_spilled_entries_total Entries set aside instead of delivered: appended to the durable spill (SpillDir), or written to ErrFallback.
# TYPE fluentcore_spilled_entries_total counter
fluentcore_spilled_entries_total{stream="err"} 0
fluentcore_spilled_entries_total{stream="info"} 0
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

// After Close, info entries are counted as closed and err entries go to the fallback.
func TestWritesAfterClose(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	var fb syncCounter
	core := New(Config{Addr: r.Addr(), ErrFallback: &fb})
	if err := core.Close(); err != nil {
		t.Fatal(err)
	}
	logger := zap.New(core)
	logger.Info("late")
	logger.Error("late error")
	st := core.Stats()
	if st.Info.Dropped["closed"] != 1 || st.Err.Spilled != 1 || fb.lines() != 1 {
		t.Fatalf("info closed=%d err spilled=%d fallback lines=%d", st.Info.Dropped["closed"], st.Err.Spilled, fb.lines())
	}
	identityHolds(t, st)
}

// With the err buffers full and the receiver stalled, an err entry waits at most ErrMaxWait
// and then goes to the fallback, counted as spilled; after the receiver resumes, everything
// not spilled is delivered.
func TestErrWaitsBoundedThenSpills(t *testing.T) {
	r := forwardtest.NewReceiver(t, forwardtest.CountOnly())
	var fb syncCounter
	const wait = 20 * time.Millisecond
	core := New(Config{
		Addr: r.Addr(), MaxBatchBytes: 2 << 10, Err: StreamConfig{BufferBytes: 8 << 10},
		FlushInterval: time.Millisecond, WriteTimeout: 20 * time.Millisecond, ErrMaxWait: wait,
		RetryMin: time.Millisecond, RetryMax: 5 * time.Millisecond, ErrFallback: &fb,
	})
	logger := zap.New(core)
	r.Stall()
	var slowest time.Duration
	for i := 0; core.Stats().Err.Spilled < 5; i++ {
		if i > 1_000_000 {
			t.Fatal("err entries never spilled with the receiver stalled")
		}
		start := time.Now()
		logger.Error("outage", zap.Int("i", i), zap.String("pad", strings.Repeat("e", 400)))
		slowest = max(slowest, time.Since(start))
	}
	// Every call above returned while the receiver was stalled, so none waited for it. The
	// bound below only catches a hang: on a loaded 2-core machine with the race detector a
	// call that waited exactly ErrMaxWait can still be descheduled for a second or more, so
	// a tight bound here would measure the machine, not the code.
	t.Logf("slowest err log call: %v (ErrMaxWait %v)", slowest, wait)
	if slowest > wait+5*time.Second {
		t.Fatalf("an err log call took %v; ErrMaxWait is %v", slowest, wait)
	}
	r.Resume()
	if err := core.Close(); err != nil {
		t.Fatal(err)
	}
	st := core.Stats()
	if int(st.Err.Spilled) != fb.lines() || st.Err.DroppedTotal() != 0 {
		t.Fatalf("spilled %d, fallback lines %d, dropped %v", st.Err.Spilled, fb.lines(), st.Err.Dropped)
	}
	identityHolds(t, st)
}

// Err entries do not wait for FlushInterval: with an hour-long FlushInterval an Error entry
// still reaches the receiver (no Sync), while an Info entry logged before it stays batched.
// (Entries may arrive out of order: the buffers are sharded.)
func TestErrSentWithoutWaitingForFlushInterval(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	core := New(Config{Addr: r.Addr(), Tag: "shop", FlushInterval: time.Hour})
	defer core.Close()
	logger := zap.New(core)
	logger.Info("batched")
	for i := range 3 {
		logger.Error("prompt", zap.Int("i", i))
	}
	got, err := r.WaitForEntries(3, 20*time.Second)
	if err != nil {
		t.Fatalf("err entries not sent before FlushInterval: %v (stats %+v)", err, core.Stats().Err)
	}
	seen := map[any]bool{}
	for _, e := range got {
		if e.Tag != "shop.err" || e.Record["msg"] != "prompt" {
			t.Fatalf("entry: %s %v", e.Tag, e.Record)
		}
		seen[e.Record["i"]] = true
	}
	if len(seen) != 3 {
		t.Fatalf("got %v", got)
	}
	// The receiver may have read the frame before the sender's write returned and counted it.
	waitUntil(t, "err delivered 3", func() bool { return core.Stats().Err.Delivered == 3 })
	if st := core.Stats(); st.Info.Delivered != 0 {
		t.Fatalf("info delivered %d (want 0: still batched)", st.Info.Delivered)
	}
}

// BufferedBytes counts what is buffered, open batches included: entries in batches that
// FlushInterval has not sealed yet are memory in use, and an operator's buffer panel must
// show them.
func TestBufferedBytesCountsOpenBatches(t *testing.T) {
	r := forwardtest.NewReceiver(t, forwardtest.CountOnly())
	core := New(Config{Addr: r.Addr(), FlushInterval: time.Hour})
	defer core.Close()
	logger := zap.New(core)
	pad := strings.Repeat("p", 400)
	for i := range 200 {
		logger.Info("open", zap.Int("i", i), zap.String("pad", pad))
	}
	st := core.Stats().Info
	if st.BufferedBytes < 200*int64(len(pad)) || st.Delivered != 0 {
		t.Fatalf("buffered %d bytes after 200 entries of over %d bytes each (delivered %d)", st.BufferedBytes, len(pad), st.Delivered)
	}
	if err := core.Sync(); err != nil {
		t.Fatal(err)
	}
	if st := core.Stats().Info; st.BufferedBytes != 0 || st.Delivered != 200 {
		t.Fatalf("after Sync: buffered %d, delivered %d", st.BufferedBytes, st.Delivered)
	}
}

// The sender allocates nothing per frame once connected. An allocating goroutine is made to
// assist the garbage collector, and under a flood of allocating loggers the sender was parked
// in those assists for most of the time, so delivery collapsed (bench: cmd/throughput -g 1024).
func TestSenderAllocatesNothingPerFrame(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer ln.Close()
	wg.Add(1)
	go func() {
		defer wg.Done()
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = io.Copy(io.Discard, c) // until the client closes
	}()
	s := settingsFor(Config{Addr: ln.Addr().String()})
	// A stream whose sender is this test: deliver is what run calls for the batches it takes.
	st := newStream(infoStream, 1<<20, s, newForwarder(s))
	defer st.senders[0].fwd.close()
	st.sendDuration = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "send_duration_seconds"})
	entry := []byte{0x92, 0xd7, 0x00, 0, 0, 0, 1, 0, 0, 0, 0, 0x81, 0xa1, 'k', 0xa1, 'v'}
	frame := func() {
		b := <-st.free
		b.buf = append(b.buf, entry...)
		b.n = 1
		st.queuedBatches.Add(1)
		snd := st.senders[0]
		snd.out = append(snd.out, b)
		if !st.deliver(context.Background(), snd) {
			t.Fatal("not delivered")
		}
	}
	frame() // connects
	if st.sentBatches.Load() != 1 {
		t.Fatalf("sent %d batches", st.sentBatches.Load())
	}
	if a := steadyAllocs(200, frame); a != 0 {
		t.Fatalf("the sender allocates %.1f times per frame", a)
	}
}

// With the receiver down, a stream is full when its buffered bytes reach the budget, not when
// its batch buffers run out: the flush tick does not seal partly filled batches while the
// sender fails, and a writer without a free batch uses another shard's open batch. Err
// entries go to the fallback, and info entries are dropped, only once at least 90% of the
// budget is buffered (a sealed batch is at least 15/16 full). Before, every FlushInterval
// sealed one batch per shard, and err entries went to the fallback with the budget at a few
// percent.
func TestOutageFillsTheByteBudgetBeforeSpillingOrDropping(t *testing.T) {
	for _, id := range []streamID{errStream, infoStream} {
		t.Run(id.String(), func(t *testing.T) {
			var fb syncCounter
			reg := prometheus.NewRegistry()
			core := New(Config{
				Addr: "tcp://127.0.0.1:1", ErrFallback: &fb, MaxBatchBytes: 16 << 10, Registerer: reg,
				Info: StreamConfig{BufferBytes: 256 << 10}, Err: StreamConfig{BufferBytes: 256 << 10},
				FlushInterval: 2 * time.Millisecond, RetryMin: time.Millisecond, RetryMax: 5 * time.Millisecond,
				ErrMaxWait: time.Millisecond, CloseTimeout: 100 * time.Millisecond,
				Degrade: DegradeConfig{Policy: DegradeOff},
			})
			defer core.Close()
			logger := zap.New(core)
			pad := strings.Repeat("x", 600) // about 660 bytes an entry, as in the repro
			stats := func() StreamStats {
				if id == errStream {
					return core.Stats().Err
				}
				return core.Stats().Info
			}
			for i := 0; ; i++ {
				// The fill is read before each entry: the one that overflows has the err
				// sender move the whole buffer to the spill at once.
				before := stats()
				used := testutil.ToFloat64(gaugeOf(t, reg, "fluentcore_buffer_bytes", id.String()))
				capacity := testutil.ToFloat64(gaugeOf(t, reg, "fluentcore_buffer_capacity_bytes", id.String()))
				if id == errStream {
					logger.Error("outage", zap.Int("i", i), zap.String("pad", pad))
				} else {
					logger.Info("outage", zap.Int("i", i), zap.String("pad", pad))
				}
				st := stats()
				if st.Spilled > 0 || st.DroppedTotal() > 0 {
					if share := float64(before.BufferedBytes) / float64(before.CapacityBytes); share < 0.9 {
						t.Fatalf("entry %d was the first one %s, with %d of %d bytes buffered (%.0f%%) before it",
							i, map[bool]string{true: "spilled", false: "dropped"}[id == errStream], before.BufferedBytes, before.CapacityBytes, 100*share)
					}
					// What the operator sees: the gauges behind "Buffer fill" and
					// FluentcoreBufferNearlyFull (> 0.9, dashboards/alerts.yml) said full too.
					if used/capacity <= 0.9 {
						t.Errorf("fluentcore_buffer_bytes / fluentcore_buffer_capacity_bytes = %.0f / %.0f before the first drop: FluentcoreBufferNearlyFull would not fire", used, capacity)
					}
					return
				}
				if i > 1000 { // 660 KB offered to a 256 KiB budget
					t.Fatalf("nothing spilled or dropped after %d entries: %+v", i, st)
				}
				time.Sleep(200 * time.Microsecond) // let flush ticks fall between the entries
			}
		})
	}
}

// compact packs the batches queued behind the one the sender holds into as few buffers as
// they fit in, keeping the order of the entries and what Sync waits for: the entries come
// out in sealing order, every freed buffer is back on the free list, and the last batch of
// the chain carries the highest sequence number.
func TestCompactPacksQueuedBatchesInOrder(t *testing.T) {
	s := settingsFor(Config{MaxBatchBytes: 4 << 10, Info: StreamConfig{BufferBytes: 64 << 10}})
	st := newStream(infoStream, s.infoBufferBytes, s, newForwarder(s))
	defer st.senders[0].fwd.close()
	entries := testkit.Entries(400, strings.Repeat("e", 40)) // about 60 bytes each
	var sizes []int
	for rest := entries; len(rest) > 0; {
		after, err := msgp.Skip(rest)
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, len(rest)-len(after))
		rest = after
	}
	// Seal batches of 1, 30, 2, 50, 3, ... entries, as a flush tick and full batches would.
	var held *batch
	next := 0
	for k, counts := 0, []int{5, 30, 2, 50, 3, 60, 1, 40, 7, 55}; k < len(counts) && next < len(sizes); k++ {
		b := st.takeFree()
		for range counts[k] {
			b.buf = append(b.buf, entries[offset(sizes, next):offset(sizes, next+1)]...)
			b.n++
			next++
		}
		st.seal(b)
		if held == nil {
			held = <-st.queue // the batch the sender is trying to deliver
		}
	}
	free, sealed := len(st.free), st.lastSealed()
	st.compact(held)

	got := append([]byte(nil), held.buf...)
	n := held.n
	for _, b := range st.held {
		got = append(got, b.buf...)
		n += b.n
		if b.last <= held.last {
			t.Fatalf("held batch seq %d not after %d", b.last, held.last)
		}
	}
	if !bytes.Equal(got, entries[:offset(sizes, next)]) || n != next {
		t.Fatalf("after compact: %d entries, %d bytes; want %d entries in order", n, len(got), next)
	}
	chain := 1 + len(st.held)
	if want := (offset(sizes, next) + st.batchCap - 1) / st.batchCap; chain > want+1 || len(st.queue) != 0 {
		t.Fatalf("%d batches hold %d bytes of %d-byte buffers (queue %d)", chain, len(got), st.batchCap, len(st.queue))
	}
	last := held
	if len(st.held) > 0 {
		last = st.held[len(st.held)-1]
	}
	if last.last != sealed || len(st.free) != free+(10-chain) || st.queuedBatches.Load() != int64(chain) {
		t.Fatalf("last seq %d (sealed %d), free %d (was %d), queued %d for a chain of %d", last.last, sealed, len(st.free), free, st.queuedBatches.Load(), chain)
	}
}

// offset returns where entry k starts, given the entries' sizes.
func offset(sizes []int, k int) int {
	o := 0
	for _, n := range sizes[:k] {
		o += n
	}
	return o
}

// A receiver down for a while, then back: every err entry logged meanwhile is delivered,
// each once, and none went to the fallback while the budget had room.
func TestOutageThenRecoveryDeliversEverythingOnce(t *testing.T) {
	addr := downAddr(t)
	var fb syncCounter
	core := New(Config{
		Addr: addr, ErrFallback: &fb, MaxBatchBytes: 16 << 10, Err: StreamConfig{BufferBytes: 256 << 10},
		FlushInterval: 2 * time.Millisecond, RetryMin: time.Millisecond, RetryMax: 5 * time.Millisecond,
	})
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
	if st := core.Stats().Err; fb.lines() != 0 || st.Spilled != 0 || st.Delivered != n {
		t.Fatalf("fallback %d lines, stats %+v", fb.lines(), st)
	}
}

// One goroutine's entries reach the receiver in the order they were logged, across many
// batches and flushes, on a stream with several shards.
func TestOneGoroutineEntriesArriveInOrder(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	core := New(Config{Addr: r.Addr(), MaxBatchBytes: 4 << 10, FlushInterval: time.Millisecond})
	defer core.Close()
	if n := len(sinkOf(core).streams[infoStream].shards); n < 2 {
		t.Skipf("the info stream has %d shard; the test needs several", n)
	}
	logger := zap.New(core)
	const n = 3000
	for i := range n {
		if i%100 == 0 {
			time.Sleep(time.Millisecond) // let flush ticks seal batches part full too
		}
		logger.Info("in order", zap.Int("i", i))
	}
	if err := core.Sync(); err != nil {
		t.Fatal(err)
	}
	got, err := r.WaitForEntries(n, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for k, e := range got {
		if i, _ := e.Record["i"].(int64); i != int64(k) {
			t.Fatalf("entry %d of the receiver is entry %d of the logger", k, i)
		}
	}
}

// A receiver that accepts and never reads nor acks: the sender holds one batch for
// AckTimeout, and the flush tick must not seal a partly filled batch per shard every
// FlushInterval meanwhile, or a low rate of errors runs out of batch buffers long before
// the budget's bytes and Error() waits, then falls back.
func TestStalledSenderDoesNotSealPartialBatches(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	var fb syncCounter
	core := New(Config{
		Addr: r.Addr(), ErrFallback: &fb, RequireAck: true, AckTimeout: 10 * time.Second,
		MaxBatchBytes: 4 << 10, Err: StreamConfig{BufferBytes: 64 << 10}, // 16 batches
		FlushInterval: time.Millisecond, CloseTimeout: 100 * time.Millisecond,
	})
	defer core.Close()
	logger := zap.New(core)
	logger.Error("before the stall")
	if err := core.Sync(); err != nil {
		t.Fatal(err)
	}
	r.Stall()
	defer r.Resume()
	st := sinkOf(core).streams[errStream]
	// 300 entries of about 100 bytes (30 KB, half the budget), each a few flush ticks apart.
	for i := range 300 {
		logger.Error("stalled", zap.Int("i", i), zap.String("pad", strings.Repeat("x", 40)))
		time.Sleep(300 * time.Microsecond)
	}
	if w := st.waits.Load(); w != 0 || fb.lines() != 0 {
		t.Errorf("with %d of %d bytes buffered, %d Error() calls waited for a batch and %d went to the fallback",
			st.buffered(), st.capacity(), w, fb.lines())
	}
}

// DegradeAdaptive against a receiver that takes 40 k entries/s, flooded by one hot message
// with rare ones alongside: the stream sheds the excess in Check rather than by
// queue_full, keeps every rare entry, weighs what it kept so the receiver can count what
// was logged, and admits everything again once the flood stops. (How much it delivers is a
// benchmark's question: BenchmarkDegrade, slow-receiver.)
func TestAdaptiveShedsOnlyTheExcess(t *testing.T) {
	const rate = 40_000
	r := forwardtest.NewReceiver(t, forwardtest.WithReadRate(rate))
	reg := prometheus.NewRegistry()
	core := New(Config{
		// With acks, delivered means the receiver has it: without, a write completes when
		// the kernel takes it, and loopback's socket buffers hold seconds of this receiver.
		Addr: r.Addr(), Registerer: reg, RequireAck: true, Degrade: DegradeConfig{WeightKey: "weight"},
	})
	defer core.Close()
	logger := zap.New(core)

	var hot, rare atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				logger.Info("hot", zap.Int64("n", hot.Add(1)))
			}
		}()
	}
	wg.Add(1)
	go func() { // 20 rare messages, each 20 times a second
		defer wg.Done()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			for k := range 20 {
				logger.Info(fmt.Sprintf("rare %d", k))
				rare.Add(1)
			}
		}
	}()
	// The flood runs at least 3 s, and until the stream is seen thinning with the
	// receiver's capacity measured. Keep ratio and capacity are gauges the controller moves
	// every step, so one read can fall on a step where the stream admits everything (a
	// single snapshot at 3 s failed now and then); what must hold is that the flood is
	// thinned while it lasts.
	start := time.Now()
	var mid StreamStats
	var capacity float64
	thinning := func() bool {
		mid = core.Stats().Info
		capacity = testutil.ToFloat64(gaugeOf(t, reg, "fluentcore_capacity_entries_per_second", "info"))
		return mid.KeepRatio < 1 && mid.Degraded && capacity >= rate/2 && capacity <= rate*2
	}
	seen := false
	for deadline := start.Add(20 * time.Second); time.Since(start) < 3*time.Second || !seen && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		seen = seen || thinning()
	}
	close(stop)
	wg.Wait()
	elapsed := time.Since(start)
	if !seen {
		t.Errorf("never seen thinning during the %v flood: last keep ratio %v, degraded %v, fluentcore_capacity_entries_per_second{info} %.0f (the receiver takes %d/s)",
			elapsed.Round(time.Millisecond), mid.KeepRatio, mid.Degraded, capacity, rate)
	}
	// Admission reopens once the flood ends. (How fast is TestRecoversWithinASecond's, on
	// a fake clock; here the machine's load would decide.)
	waitUntil(t, "admission reopens", func() bool { return core.Stats().Info.KeepRatio == 1 })
	if err := core.Sync(); err != nil {
		t.Fatal(err)
	}
	st := core.Stats().Info
	offered := st.Entries
	t.Logf("offered %d info entries in %v, delivered %d (%.0f/s), dropped %v; capacity measured %.0f/s",
		offered, elapsed, st.Delivered, float64(st.Delivered)/elapsed.Seconds(), st.Dropped, mid.Capacity)
	if q := st.Dropped["queue_full"]; float64(q) > 0.01*float64(offered) {
		t.Errorf("queue_full dropped %d of %d offered: the shedding should happen in Check", q, offered)
	}
	entries, err := r.WaitForEntries(int(st.Delivered), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var rareGot int64
	var weighed float64
	for _, e := range entries {
		w, _ := e.Record["weight"].(int64)
		if w < 1 {
			t.Fatalf("entry without a weight: %v", e.Record)
		}
		if strings.HasPrefix(e.Record["msg"].(string), "rare") {
			rareGot++
			if w != 1 {
				t.Errorf("a rare entry weighs %d; rare keys are kept whole", w)
			}
		} else {
			weighed += float64(w)
		}
	}
	if rareGot != rare.Load() {
		t.Errorf("the receiver has %d rare entries of %d logged", rareGot, rare.Load())
	}
	// Each kept entry carries the entries of its key shed since the last kept one: the sum
	// misses only those dropped for want of room (queue_full, at most 1 % above) and those
	// shed after the last kept entry.
	if h := float64(hot.Load()); weighed < 0.98*h || weighed > h {
		t.Errorf("the hot entries' weights add up to %.0f; %0.f were logged", weighed, h)
	} else {
		t.Logf("the hot entries' weights add up to %.0f of %.0f logged", weighed, h)
	}
	identityHolds(t, core.Stats())
}

// compact merges a batch whole only into the one sealed right before it: with several
// senders the batch in between may be in another sender's hands, and a merged batch that
// finished its positions would then also finish that one's. Sync waits for all of them.
func TestCompactLeavesOtherSendersBatchesOut(t *testing.T) {
	s := settingsFor(Config{MaxBatchBytes: 4 << 10, Info: StreamConfig{BufferBytes: 64 << 10}})
	st := newStream(infoStream, s.infoBufferBytes, s, newForwarders(s, 2)...)
	defer st.senders[0].fwd.close()
	defer st.senders[1].fwd.close()
	for range 4 {
		b := st.takeFree()
		b.buf = append(b.buf, testkit.Entries(1, "x")...)
		b.n = 1
		st.seal(b)
	}
	mine, theirs := <-st.queue, <-st.queue // seq 1 fails here; seq 2 is with the other sender
	st.compact(mine)
	if mine.last != 1 || len(st.held) != 1 || st.held[0].first != 3 || st.held[0].last != 4 || st.held[0].n != 2 {
		t.Fatalf("after compact: mine %d..%d, held %d batches (first %d..%d, %d entries); want mine 1..1 and 3..4 merged", mine.first, mine.last, len(st.held), st.held[0].first, st.held[0].last, st.held[0].n)
	}
	st.finish(mine)
	st.finish(st.takeHeld())
	if !st.waitDone(1, nil) || st.done.Upto() != 1 {
		t.Fatalf("done %d with 2 still sending, want 1", st.done.Upto())
	}
	st.finish(theirs)
	if st.done.Upto() != 4 || len(st.done.Early()) != 0 {
		t.Fatalf("done %d (early %v) once every batch finished, want 4", st.done.Upto(), st.done.Early())
	}
}
