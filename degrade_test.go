package fluentcore

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore/forwardtest"
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
		ctl := newDegradeControl(DegradeConfig{Policy: c.policy}.withDefaults())
		if ok, r := ctl.admit(&info, false); ok != c.infoKept || (!ok && r != c.infoReason) {
			t.Errorf("%v: info admitted=%v reason=%v", c.policy, ok, r)
		}
		if ok, _ := ctl.admit(&warn, false); ok != c.warnKept {
			t.Errorf("%v: warn admitted=%v", c.policy, ok)
		}
	}
	ctl := newDegradeControl(DegradeConfig{Policy: DegradeSample, SampleFirst: 1, SampleThereafter: 1000}.withDefaults())
	if ok, _ := ctl.admit(&info, false); !ok {
		t.Fatal("sample policy dropped the first entry")
	}
	if ok, r := ctl.admit(&info, false); ok || r != dropSampled {
		t.Fatalf("sample policy: second entry admitted=%v reason=%v", ok, r)
	}
}

// A logging call steps DegradeAdaptive's controller only when the real clock says a step
// is due: an entry's time may come from zap.WithClock, and a clock an hour ahead would
// otherwise step it on every call and leave it an hour in the future for the sink's clock.
func TestCallerStepsOnTheRealClock(t *testing.T) {
	c := newDegradeControl(DegradeConfig{}.withDefaults())
	now := time.Now()
	c.lastStep.Store(now.UnixNano())
	if !c.stepDue(now.Add(time.Hour).UnixNano()) {
		t.Fatal("an entry an hour ahead does not look due")
	}
	if c.beginStep(now.Add(time.Millisecond)) {
		t.Fatal("a step began 1 ms after the last one on the real clock")
	}
	if !c.beginStep(now.Add(adaptiveStep)) {
		t.Fatal("no step one adaptiveStep later")
	}
	c.endStep(degradeObservation{now: now.Add(adaptiveStep), limit: 1 << 20, entryBytes: 100})
	if got := c.lastStep.Load(); got != now.Add(adaptiveStep).UnixNano() {
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
			d := core.sink.streams[infoStream].info.degrade
			if c.counting {
				d.wake()
			}
			msgs := make([]string, c.msgs)
			for i := range msgs {
				msgs[i] = fmt.Sprintf("request %d handled", i)
			}
			ent := zapcore.Entry{Level: zapcore.InfoLevel, Time: time.Now()}
			i := 0
			for b.Loop() {
				if c.counting && i%1024 == 0 {
					d.wake() // the clock, seeing no backlog, stops the counting after a while
				}
				ent.Message = msgs[i%len(msgs)]
				i++
				if !core.sink.admit(&ent) {
					b.Fatal("an entry was shed with a keep ratio of 1")
				}
			}
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
			d := core.sink.streams[infoStream].info.degrade
			logger := zap.New(core)
			fields := []zap.Field{zap.String("user", "alice"), zap.Int("n", 1)}
			logger.Info("warm up", fields...)
			logger.Error("warm up", fields...)
			if n := steadyAllocs(100, func() {
				if d.shed != nil {
					d.wake() // keys counted, as under load
				}
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
	c := newDegradeControl(DegradeConfig{}.withDefaults())
	now := time.Now()
	step := func() {
		now = now.Add(adaptiveStep)
		c.mu.Lock()
		c.stepLocked(degradeObservation{now: now, limit: 1 << 20, entryBytes: 100})
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
