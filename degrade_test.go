package fluentcore

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore/forwardtest"
	"github.com/fluentcore/fluentcore/internal/degrade"
	"github.com/fluentcore/fluentcore/internal/outcome"
	"github.com/fluentcore/fluentcore/internal/stream"
	"github.com/fluentcore/fluentcore/internal/tagtable"
	"github.com/fluentcore/fluentcore/internal/testkit"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// A shed entry is counted under its policy's reason: degraded for the switching policies
// that drop by level, sampled for DegradeSample's sampler (and DegradeAdaptive's shedder).
func TestAdmitByPolicy(t *testing.T) {
	at := time.Unix(5, 0).UnixNano()
	for _, c := range []struct {
		policy DegradePolicy
		reason outcome.Reason
	}{
		{DegradeDropAll, outcome.Degraded},
		{DegradeKeepWarn, outcome.Degraded},
		{DegradeSample, outcome.Sampled},
	} {
		p := newInfoPolicy(DegradeConfig{Policy: c.policy, SampleFirst: 1, SampleThereafter: 1000}.withDefaults(), zapcore.DefaultClock, nil, nil)
		p.admission.Admit(zapcore.InfoLevel, 0, "m", at) // the sampler keeps the first
		v := p.admission.Admit(zapcore.InfoLevel, 0, "m", at)
		if v == degrade.Keep || p.shed(v) != c.reason {
			t.Errorf("%v: the second info entry's verdict %v, want shed as %v", c.policy, v, c.reason)
		}
	}
}

// BenchmarkAdmit is the cost of admission on the caller's path (what Core.Check adds for an
// info entry): DegradeOff; the default while the stream is calm; and the default
// while it counts keys (a backlog), with a keep ratio of 1, one message or 64.
func BenchmarkAdmit(b *testing.B) {
	for _, c := range []struct {
		name     string
		policy   DegradePolicy
		counting bool
		msgs     int
	}{
		{"off", DegradeOff, false, 1},
		{"adaptive/calm", DegradeAdaptive, false, 1},
		{"adaptive/counting", DegradeAdaptive, true, 1},
		{"adaptive/counting-64-messages", DegradeAdaptive, true, 64},
	} {
		b.Run(c.name, func(b *testing.B) {
			core := New(Config{Addr: "127.0.0.1:1", Degrade: DegradeConfig{Policy: c.policy}})
			defer core.Close()
			info := core.sink.info
			if c.counting {
				info.wake(0)
			}
			msgs := make([]string, c.msgs)
			for i := range msgs {
				msgs[i] = fmt.Sprintf("request %d handled", i)
			}
			admit := func(i int, ent *zapcore.Entry) bool {
				if c.counting && i%1024 == 0 {
					info.wake(0) // the clock, seeing no backlog, stops the counting after a while
				}
				ent.Message = msgs[i%len(msgs)]
				return !core.sink.consults() || core.sink.admit(ent, tagtable.Ref{}, false)
			}
			b.Run("callers=1", func(b *testing.B) {
				ent := zapcore.Entry{Level: zapcore.InfoLevel, Time: time.Now()}
				i := 0
				for b.Loop() {
					if i++; !admit(i, &ent) {
						b.Fatal("an entry was shed with a keep ratio of 1")
					}
				}
			})
			// Every caller on the same keys' counters at once: what a flood of one
			// message from many goroutines costs each of them.
			b.Run("callers=parallel", func(b *testing.B) {
				b.RunParallel(func(pb *testing.PB) {
					ent := zapcore.Entry{Level: zapcore.InfoLevel, Time: time.Now()}
					i := 0
					for pb.Next() {
						if i++; !admit(i, &ent) {
							b.Error("an entry was shed with a keep ratio of 1")
							return
						}
					}
				})
			})
		})
	}
}

// A logging call allocates nothing in the library: not in Check (admission, also while the
// adaptive policy counts keys), not in Write, on either stream. The entry goes down the
// write path by pointer, and a pointer that escaped would cost an allocation per call.
func TestLoggingCallAllocatesNothing(t *testing.T) {
	for _, policy := range []DegradePolicy{DegradeOff, DegradeAdaptive} {
		t.Run(fmt.Sprint(policy), func(t *testing.T) {
			r := forwardtest.NewReceiver(t, forwardtest.CountOnly())
			core := New(Config{Addr: r.Addr(), Degrade: DegradeConfig{Policy: policy}})
			defer core.Close()
			info := core.sink.info
			logger := zap.New(core)
			fields := []zap.Field{zap.String("user", "alice"), zap.Int("n", 1)}
			logger.Info("warm up", fields...)
			logger.Error("warm up", fields...)
			if n := steadyAllocs(100, func() {
				info.wake(0) // keys counted, as under load (the adaptive policy)
				logger.Info("order placed", fields...)
			}); n != 0 {
				t.Errorf("an info call allocates %v times", n)
			}
			if n := steadyAllocs(100, func() { logger.Error("order failed", fields...) }); n != 0 {
				t.Errorf("an err call allocates %v times", n)
			}
		})
	}
}

// While degraded, Check drops info entries before they are encoded and counts them; the
// transition is reported once through OnEvent and the metrics, and err is unaffected.
func TestDegradeEndToEnd(t *testing.T) {
	r := forwardtest.NewReceiver(t, forwardtest.CountOnly())
	reg := prometheus.NewRegistry()
	events := make(chan Event, 16)
	core := New(Config{
		Addr: r.Addr(), Transport: TransportConfig{MaxBatchBytes: 4 << 10, FlushInterval: time.Millisecond, RetryMin: time.Millisecond, RetryMax: 5 * time.Millisecond}, Metrics: MetricsConfig{Registerer: reg},
		Info:     InfoConfig{BufferBytes: 64 << 10},
		Timeouts: TimeoutsConfig{Write: 20 * time.Millisecond},
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
	if v := testkit.Metric(t, reg, "fluentcore_degraded", map[string]string{"stream": "info"}); v != 1 {
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

// DegradeAdaptive against a receiver slower than the flood, with rare messages alongside,
// on a manual clock: the stream sheds the excess in Check rather than by queue_full, keeps
// every rare entry, weighs what it kept so the receiver can count what was logged, and
// sheds nothing a second after the flood has fallen under what the receiver takes. (How
// much it delivers is a benchmark's question: BenchmarkDegrade, slow-receiver.)
//
// Nothing in it depends on the machine's speed, which decides how fast goroutines logging
// flat out offer a flood, and so its shape: the test is the only caller, and it moves the
// clock 5 ms at a time (degrade.AdaptiveStep), steps the controller itself as the sink's clock does,
// logs the step's entries, and lets the receiver read (forwardtest's Allow) the frames that
// a rate of 6 k entries/s has taken by then, waiting until each is acked and its batch free
// again. The sink's own clock goroutine still runs, and observes what the test's step
// observed: nothing moves between the two. Two shapes: 10 times the receiver's rate, and
// 1.5 times it, fewer entries a step than the margin's floor
// (TestAFloodUnderTheMarginsFloorIsStillAFlood in internal/shed).
func TestAdaptiveShedsOnlyTheExcess(t *testing.T) {
	const (
		rate  = 6_000 // the receiver's entries/s
		step  = degrade.AdaptiveStep
		flood = 8 * time.Second // long enough for 1.5× to fill the buffer and be thinned
	)
	for _, times := range []float64{1.5, 10} {
		t.Run(fmt.Sprintf("flood=%.1fx", times), func(t *testing.T) {
			r := forwardtest.NewReceiver(t)
			reg := prometheus.NewRegistry()
			clk := testkit.NewManualClock(time.Now())
			core := NewWithClock(Config{
				// With acks, delivered means the receiver has it.
				Addr: r.Addr(), Metrics: MetricsConfig{Registerer: reg}, Degrade: DegradeConfig{WeightKey: "weight"},
				// 32 batches, as the defaults have (8 MiB of 256 KiB), of which the margin is
				// 1/64: the same shape, smaller. No flush tick: batches are sealed full, or by
				// Sync.
				Info: InfoConfig{BufferBytes: 1 << 20, Acks: AcksOn}, Transport: TransportConfig{MaxBatchBytes: 32 << 10, FlushInterval: time.Hour},
			}, clk)
			defer core.Close()
			logger := zap.New(core, zap.WithClock(clk))
			k := core.sink
			st := k.streams[infoStream]
			logger.Info("connected") // the connection is up before the clock moves
			if err := core.Sync(); err != nil {
				t.Fatal(err)
			}
			r.Stall()

			// tick moves the clock a step, steps the controller, logs the step's entries and
			// has the receiver take what it reads by then, in whole frames.
			var hot, rare int64
			var owed, credit float64
			tick := func(i int, hotRate float64) {
				clk.Add(step)
				k.info.step()
				owed += hotRate * step.Seconds()
				for ; owed >= 1; owed-- {
					hot++
					logger.Info("hot", zap.Int64("n", hot))
				}
				for j := range 2 { // 20 rare messages, each 20 times a second, two a step
					logger.Info(fmt.Sprintf("rare %d", (2*i+j)%20))
					rare++
				}
				for credit += rate * step.Seconds(); credit > 0 && queued(st) > 0; {
					d, free := st.Counts.Delivered.Load(), st.Ring.Free()
					r.Allow(1)
					waitUntil(t, "a frame acked and its batch free", func() bool { return st.Ring.Free() > free })
					credit -= float64(st.Counts.Delivered.Load() - d)
				}
			}
			thinning := false
			var capacity float64
			i := 0
			for ; time.Duration(i)*step < flood; i++ {
				tick(i, times*rate)
				in := core.Stats().Info
				capacity = testkit.Metric(t, reg, "fluentcore_capacity_entries_per_second", map[string]string{"stream": "info"})
				thinning = thinning || in.AdmitRatio < 1 && in.Degraded && capacity >= rate/2 && capacity <= rate*2
			}
			if o := k.infoObservation(); times < 2 {
				// The shape's point: the margin spread over shed's roomySteps (4) is more
				// entries a step than this flood offers.
				if floor := (1 - degrade.AdaptiveFull) * float64(o.Limit) / o.EntryBytes / 4; times*rate*step.Seconds() >= floor {
					t.Errorf("the flood offers %.0f entries a step, not under the margin's floor of %.0f", times*rate*step.Seconds(), floor)
				}
			}
			if !thinning {
				t.Errorf("never seen thinning the %.1f× flood over %v: last fluentcore_capacity_entries_per_second{info} %.0f (the receiver takes %d/s)", times, flood, capacity, rate)
			}
			// Then half of what the receiver takes, for two seconds: the last entry shed is
			// within a second of the flood's end.
			end, lastShed := i, i
			for sampled := core.Stats().Info.Dropped["sampled"]; i < end+int(2*time.Second/step); i++ {
				tick(i, rate/2)
				if n := core.Stats().Info.Dropped["sampled"]; n != sampled {
					sampled, lastShed = n, i
				}
			}
			if after := time.Duration(lastShed-end) * step; after >= time.Second {
				t.Errorf("an entry shed %v after the flood fell to half the receiver's rate", after)
			}
			r.Resume()
			if err := core.Sync(); err != nil {
				t.Fatal(err)
			}
			in := core.Stats().Info
			offered := in.Entries
			t.Logf("offered %d info entries, delivered %d, dropped %v; the last shed %v after the flood",
				offered, in.Delivered, in.Dropped, time.Duration(lastShed-end)*step)
			if q := in.Dropped["queue_full"]; float64(q) > 0.01*float64(offered) {
				t.Errorf("queue_full dropped %d of %d offered: the shedding should happen in Check", q, offered)
			}
			if in.Dropped["sampled"] == 0 {
				t.Errorf("nothing shed: the %.1f× flood should have been", times)
			}
			entries, err := r.WaitForEntries(int(in.Delivered), 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			var rareGot int64
			var weighed float64
			for _, e := range entries[1:] { // after "connected"
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
			if rareGot != rare {
				t.Errorf("the receiver has %d rare entries of %d logged", rareGot, rare)
			}
			// Each kept entry carries the entries of its key shed since the last kept one,
			// and those shed after the last kept entry wait for the next (residue): with
			// them the sum misses only the kept entries dropped for want of room
			// (queue_full, at most 1 % of what was offered, above), with what they carried.
			residue := float64(k.info.weight(zapcore.InfoLevel, 0, "hot") - 1)
			if h := float64(hot); weighed+residue < 0.98*h || weighed+residue > h {
				t.Errorf("the hot entries' weights add up to %.0f, and %.0f more were shed after the last kept one; %0.f were logged", weighed, residue, h)
			}
			identityHolds(t, core.Stats())
		})
	}
}

// Every shed entry is visible: by the time the first one is counted, the stream shows
// degraded and OnEvent has had EventDegraded, whichever path shed it (a thinned key, the
// spent allowance, a start-up flood before any capacity is measured). A flood from the
// first call, into a small buffer and a slow receiver, sheds on each of those paths.
func TestEveryShedIsVisible(t *testing.T) {
	r := forwardtest.NewReceiver(t, forwardtest.WithReadRate(20_000))
	var core atomic.Pointer[Core]
	type seen struct {
		sampled  uint64
		degraded bool
	}
	first := make(chan seen, 1)
	c := New(Config{
		Addr: r.Addr(), Transport: TransportConfig{MaxBatchBytes: 16 << 10}, Info: InfoConfig{BufferBytes: 256 << 10},
		OnEvent: func(e Event) {
			if e.Kind != EventDegraded {
				return
			}
			st := core.Load().Stats().Info
			select {
			case first <- seen{st.Dropped["sampled"], st.Degraded}:
			default:
			}
		},
	})
	core.Store(c)
	defer c.Close()
	logger := zap.New(c)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				logger.Info("flood", zap.Int("g", g), zap.Int("i", i))
			}
		}()
	}
	testkit.WaitUntil(t, "entries shed", func() bool { return c.Stats().Info.Dropped["sampled"] > 1000 })
	close(stop)
	wg.Wait()
	select {
	case s := <-first:
		if s.sampled != 0 || !s.degraded {
			t.Fatalf("at EventDegraded: %d entries already counted as shed, degraded %v; want 0 and true", s.sampled, s.degraded)
		}
	default:
		t.Fatal("entries were shed and OnEvent never had EventDegraded")
	}
}

// queued is the bytes of the stream's batches sealed and not finished.
func queued(st *stream.Stream) int64 {
	q, _ := st.Ring.Bytes()
	return q
}
