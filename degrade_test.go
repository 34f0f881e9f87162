package fluentcore

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore/forwardtest"
	"github.com/fluentcore/fluentcore/internal/testkit"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

func TestDegraderEntersOnHighWatermarkAndLeavesAfterHold(t *testing.T) {
	d := degrader{cfg: DegradeConfig{}.withDefaults()}
	t0 := time.Unix(1_000_000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

	if d.observe(at(0), 0.5, 0) || d.degraded {
		t.Fatal("degraded below the high watermark")
	}
	if !d.observe(at(10), 0.75, 0) || !d.degraded {
		t.Fatal("did not degrade at the high watermark")
	}
	// Between the watermarks: stays degraded, no transition (no flapping).
	for ms := 20; ms < 10_000; ms += 100 {
		if d.observe(at(ms), 0.5, 0) {
			t.Fatalf("transition at %dms with fill between the watermarks", ms)
		}
	}
	// Below the low watermark, but not yet for Hold (5s).
	if d.observe(at(10_000), 0.2, 0) || d.observe(at(14_999), 0.1, 0) || !d.degraded {
		t.Fatal("left degraded before the hold time")
	}
	// A spike above the low watermark restarts the hold.
	d.observe(at(15_000), 0.3, 0)
	if d.observe(at(16_000), 0.1, 0) || d.observe(at(20_999), 0.1, 0) {
		t.Fatal("hold was not restarted by the spike")
	}
	if !d.observe(at(21_000), 0.1, 0) || d.degraded {
		t.Fatal("did not recover after staying calm for the hold time")
	}
}

func TestDegraderDisconnection(t *testing.T) {
	d := degrader{cfg: DegradeConfig{DisconnectedAfter: time.Second, Hold: time.Second}.withDefaults()}
	t0 := time.Unix(1_000_000, 0)
	if d.observe(t0, 0, 999*time.Millisecond) {
		t.Fatal("degraded before DisconnectedAfter")
	}
	if !d.observe(t0, 0, time.Second) {
		t.Fatal("did not degrade after DisconnectedAfter")
	}
	// Empty buffers do not count as calm while still disconnected.
	if d.observe(t0.Add(5*time.Second), 0, 6*time.Second) || d.observe(t0.Add(10*time.Second), 0, 11*time.Second) {
		t.Fatal("recovered while disconnected")
	}
	d.observe(t0.Add(11*time.Second), 0, 0)
	if !d.observe(t0.Add(12*time.Second), 0, 0) {
		t.Fatal("did not recover one hold after reconnecting")
	}
}

// By default an outage alone degrades nothing: only the bytes buffered do, so entries the
// budget can hold are not shed.
func TestDegraderDefaultIgnoresDisconnection(t *testing.T) {
	d := degrader{cfg: DegradeConfig{}.withDefaults()}
	t0 := time.Unix(1_000_000, 0)
	if d.observe(t0, 0.74, time.Hour) {
		t.Fatal("degraded on disconnection alone, under the high watermark")
	}
	if !d.observe(t0, 0.75, time.Hour) {
		t.Fatal("did not degrade at the high watermark")
	}
}

func TestDegradeOffNeverDegrades(t *testing.T) {
	d := degrader{cfg: DegradeConfig{Policy: DegradeOff}.withDefaults()}
	if d.observe(time.Unix(1, 0), 1, time.Hour) || d.degraded {
		t.Fatal("DegradeOff degraded")
	}
}

func TestSamplerFirstThenEveryMth(t *testing.T) {
	s := newSampler(time.Second, 3, 10)
	now := time.Unix(1_000, 0).UnixNano()
	kept := 0
	var keptAt []int
	for i := 1; i <= 100; i++ {
		if s.keep(now, "cache miss") {
			kept++
			keptAt = append(keptAt, i)
		}
	}
	// 1, 2, 3, then the 13th, 23rd, ... 93rd.
	if kept != 3+9 || keptAt[3] != 13 || keptAt[len(keptAt)-1] != 93 {
		t.Fatalf("kept %d at %v", kept, keptAt)
	}
	// Another message has its own budget.
	if !s.keep(now, "order placed") {
		t.Fatal("a different message was sampled away")
	}
	// A new interval starts over: its first SampleFirst entries are kept again.
	next := now + int64(time.Second)
	for i := 0; i < 3; i++ {
		if !s.keep(next, "cache miss") {
			t.Fatalf("entry %d of the next interval was dropped", i+1)
		}
	}
	if s.keep(next, "cache miss") {
		t.Fatal("the next interval kept more than SampleFirst")
	}
}

func TestAdmitByPolicy(t *testing.T) {
	info := zapcore.Entry{Level: zapcore.InfoLevel, Message: "m", Time: time.Unix(5, 0)}
	warn := zapcore.Entry{Level: zapcore.WarnLevel, Message: "m", Time: time.Unix(5, 0)}
	cases := []struct {
		policy             DegradePolicy
		infoKept, warnKept bool
		infoReason         dropReason
	}{
		{DegradeDropAll, false, false, dropDegraded},
		{DegradeKeepWarn, false, true, dropDegraded},
	}
	for _, c := range cases {
		ctl := newDegradeControl(DegradeConfig{Policy: c.policy}.withDefaults(), nil)
		if ok, r := ctl.rule.admit(info.Level, 0, info.Message, info.Time.UnixNano()); ok != c.infoKept || (!ok && r != c.infoReason) {
			t.Errorf("%v: info admitted=%v reason=%v", c.policy, ok, r)
		}
		if ok, _ := ctl.rule.admit(warn.Level, 0, warn.Message, warn.Time.UnixNano()); ok != c.warnKept {
			t.Errorf("%v: warn admitted=%v", c.policy, ok)
		}
	}
	ctl := newDegradeControl(DegradeConfig{Policy: DegradeSample, SampleFirst: 1, SampleThereafter: 1000}.withDefaults(), nil)
	if ok, _ := ctl.rule.admit(info.Level, 0, info.Message, info.Time.UnixNano()); !ok {
		t.Fatal("sample policy dropped the first entry")
	}
	if ok, r := ctl.rule.admit(info.Level, 0, info.Message, info.Time.UnixNano()); ok || r != dropSampled {
		t.Fatalf("sample policy: second entry admitted=%v reason=%v", ok, r)
	}
}

// A logging call steps DegradeAdaptive's controller only when the real clock says a step
// is due: an entry's time may come from zap.WithClock, and a clock an hour ahead would
// otherwise step it on every call and leave it an hour in the future for the sink's clock.
func TestCallerStepsOnTheRealClock(t *testing.T) {
	r := newAdaptiveRule(DegradeConfig{}.withDefaults())
	now := time.Now()
	r.lastStep.Store(now.UnixNano())
	if !r.stepDue(now.Add(time.Hour).UnixNano()) {
		t.Fatal("an entry an hour ahead does not look due")
	}
	obs := func() degradeObservation {
		return degradeObservation{now: now.Add(adaptiveStep), limit: 1 << 20, room: 1 << 20, entryBytes: 100}
	}
	if r.beginStep(now.Add(time.Millisecond)) {
		t.Fatal("a step began 1 ms after the last one on the real clock")
	}
	if !r.beginStep(now.Add(adaptiveStep)) {
		t.Fatal("no step one adaptiveStep later")
	}
	r.endStep(obs())
	if got := r.lastStep.Load(); got != now.Add(adaptiveStep).UnixNano() {
		t.Errorf("lastStep %d, want the step's time", got)
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
			d := core.sink.info.degrade
			if c.counting {
				d.wake(0)
			}
			msgs := make([]string, c.msgs)
			for i := range msgs {
				msgs[i] = fmt.Sprintf("request %d handled", i)
			}
			admit := func(i int, ent *zapcore.Entry) bool {
				if c.counting && i%1024 == 0 {
					d.wake(0) // the clock, seeing no backlog, stops the counting after a while
				}
				ent.Message = msgs[i%len(msgs)]
				return core.sink.admit(ent, tagRef{}, false)
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
			d := core.sink.info.degrade
			logger := zap.New(core)
			fields := []zap.Field{zap.String("user", "alice"), zap.Int("n", 1)}
			logger.Info("warm up", fields...)
			logger.Error("warm up", fields...)
			if n := steadyAllocs(100, func() {
				d.wake(0) // keys counted, as under load (the adaptive policy)
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

// Shed callers yield only while goroutines wait for a CPU: the step reads the scheduler's
// runnable goroutines.
func TestShedCallersYieldOnlyWhenCrowded(t *testing.T) {
	c := newAdaptiveRule(DegradeConfig{}.withDefaults())
	now := time.Now()
	step := func() {
		now = now.Add(adaptiveStep)
		c.mu.Lock()
		c.stepLocked(degradeObservation{now: now, limit: 1 << 20, room: 1 << 20, entryBytes: 100})
		c.mu.Unlock()
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range 4 * runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() { // spins: it wants a CPU all the time
			}
		}()
	}
	deadline := time.Now().Add(10 * time.Second)
	for step(); !c.yields() && time.Now().Before(deadline); step() {
		runtime.Gosched()
	}
	stop.Store(true)
	wg.Wait()
	if !c.yields() {
		t.Fatal("4 spinning goroutines a CPU, and shed callers would not yield")
	}
	for step(); c.yields() && time.Now().Before(deadline); step() {
		time.Sleep(time.Millisecond) // other tests' goroutines may still be finishing
	}
	if c.yields() {
		t.Fatal("nothing waits for a CPU, and shed callers would still yield")
	}
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
// clock 5 ms at a time (adaptiveStep), steps the controller itself as the sink's clock does,
// logs the step's entries, and lets the receiver read (forwardtest's Allow) the frames that
// a rate of 6 k entries/s has taken by then, waiting until each is acked and its batch free
// again. The sink's own clock goroutine still runs, and observes what the test's step
// observed: nothing moves between the two. Two shapes: 10 times the receiver's rate, and
// 1.5 times it, fewer entries a step than the margin's floor
// (TestAFloodUnderTheMarginsFloorIsStillAFlood in internal/shed).
func TestAdaptiveShedsOnlyTheExcess(t *testing.T) {
	const (
		rate  = 6_000 // the receiver's entries/s
		step  = adaptiveStep
		flood = 8 * time.Second // long enough for 1.5× to fill the buffer and be thinned
	)
	for _, times := range []float64{1.5, 10} {
		t.Run(fmt.Sprintf("flood=%.1fx", times), func(t *testing.T) {
			r := forwardtest.NewReceiver(t)
			reg := prometheus.NewRegistry()
			clk := &manualClock{now: time.Now()}
			core := NewWithClock(Config{
				// With acks, delivered means the receiver has it.
				Addr: r.Addr(), Registerer: reg, RequireAck: true, Degrade: DegradeConfig{WeightKey: "weight"},
				// 32 batches, as the defaults have (8 MiB of 256 KiB), of which the margin is
				// 1/64: the same shape, smaller. No flush tick: batches are sealed full, or by
				// Sync.
				Info: StreamConfig{BufferBytes: 1 << 20}, MaxBatchBytes: 32 << 10, FlushInterval: time.Hour,
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
				clk.add(step)
				k.info.degrade.observe(k.infoObservation(clk.Now()))
				owed += hotRate * step.Seconds()
				for ; owed >= 1; owed-- {
					hot++
					logger.Info("hot", zap.Int64("n", hot))
				}
				for j := range 2 { // 20 rare messages, each 20 times a second, two a step
					logger.Info(fmt.Sprintf("rare %d", (2*i+j)%20))
					rare++
				}
				for credit += rate * step.Seconds(); credit > 0 && queuedBytes(st) > 0; {
					d, free := st.delivered.Load(), st.ring.Free()
					r.Allow(1)
					waitUntil(t, "a frame acked and its batch free", func() bool { return st.ring.Free() > free })
					credit -= float64(st.delivered.Load() - d)
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
			if o := k.infoObservation(clk.Now()); times < 2 {
				// The shape's point: the margin spread over shed's roomySteps (4) is more
				// entries a step than this flood offers.
				if floor := (1 - adaptiveFull) * float64(o.limit) / o.entryBytes / 4; times*rate*step.Seconds() >= floor {
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
			residue := float64(k.info.degrade.rule.weight(zapcore.InfoLevel, 0, "hot") - 1)
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
		Addr: r.Addr(), MaxBatchBytes: 16 << 10, Info: StreamConfig{BufferBytes: 256 << 10},
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

// The control's side of it, without a receiver: shedding an entry puts the adaptive
// policy's stream in the degraded state, with its event, before shed returns; the switching
// kinds enter only on their state machine.
func TestShedEntersDegradedFirst(t *testing.T) {
	var events []bool
	c := newDegradeControl(DegradeConfig{}.withDefaults(), func(_ time.Time, degraded bool) { events = append(events, degraded) })
	now := time.Unix(1_000, 0)
	clock := &manualClock{now: now}
	c.shed(now.UnixNano(), clock)
	if !c.active.Load() || len(events) != 1 || !events[0] || c.transitions.Load() != 1 {
		t.Fatalf("after a shed: active %v, events %v, transitions %d", c.active.Load(), events, c.transitions.Load())
	}
	clock.add(time.Millisecond)
	c.shed(now.Add(time.Millisecond).UnixNano(), clock)
	if len(events) != 1 {
		t.Fatalf("a second shed fired again: %v", events)
	}
	// The clock leaves the state once nothing has been shed for adaptiveHold.
	c.observe(degradeObservation{now: now.Add(2 * adaptiveHold), limit: 1 << 20, room: 1 << 20, entryBytes: 100})
	if c.active.Load() || len(events) != 2 || events[1] {
		t.Fatalf("after adaptiveHold without a shed: active %v, events %v", c.active.Load(), events)
	}
	s := newDegradeControl(DegradeConfig{Policy: DegradeKeepWarn}.withDefaults(), func(time.Time, bool) { t.Fatal("event") })
	s.shed(now.UnixNano(), clock)
	if s.active.Load() {
		t.Fatal("a switching policy entered degraded outside its state machine")
	}
}
