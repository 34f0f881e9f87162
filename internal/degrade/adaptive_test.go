package degrade

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
)

// clockAt is a zapcore.Clock stopped at now, which the test moves (one goroutine); reads
// counts the calls to Now.
type clockAt struct {
	now   time.Time
	reads int
}

func (c *clockAt) Now() time.Time                         { c.reads++; return c.now }
func (c *clockAt) NewTicker(d time.Duration) *time.Ticker { return time.NewTicker(d) }

// calm is an observation of an empty megabyte buffer at now.
func calm(now time.Time) Observation {
	return Observation{Now: now, Limit: 1 << 20, Room: 1 << 20, EntryBytes: 100}
}

// A logging call steps the controller only when the real clock says a step is due: an
// entry's time may come from zap.WithClock, and a clock an hour ahead would otherwise step
// it on every call and leave it an hour in the future for the sink's clock.
func TestCallerStepsOnTheRealClock(t *testing.T) {
	now := time.Now()
	clock := &clockAt{now: now.Add(time.Millisecond)}
	var observed []time.Time
	a := NewAdaptive(0.25, clock, func() Observation {
		at := clock.Now()
		observed = append(observed, at)
		return calm(at)
	})
	a.Step(func() Observation { return calm(now) })
	a.Admit(zapcore.InfoLevel, 0, "m", now.Add(time.Hour).UnixNano())
	if len(observed) != 0 || a.lastStep.Load() != now.UnixNano() {
		t.Fatalf("an entry an hour ahead stepped the controller 1 ms after its last step on the real clock: %v", observed)
	}
	clock.now = now.Add(AdaptiveStep)
	a.Admit(zapcore.InfoLevel, 0, "m", now.Add(time.Hour).UnixNano())
	if len(observed) != 1 || !observed[0].Equal(now.Add(AdaptiveStep)) {
		t.Fatalf("one AdaptiveStep later on the real clock: observed at %v", observed)
	}
	if got := a.lastStep.Load(); got != now.Add(AdaptiveStep).UnixNano() {
		t.Errorf("lastStep %d, want the step's time", got)
	}
	a.Admit(zapcore.InfoLevel, 0, "m", now.UnixNano()) // an entry's time not due: no step
	if len(observed) != 1 {
		t.Fatalf("an entry whose time is not due stepped the controller: %v", observed)
	}
}

// The clock's step reads the stream under the lock a caller's step takes: a caller whose
// entry finds a step due while the clock reads does not step in between, so that the steps
// take their observations in the order they were read (what only grows in them, Delivered,
// never goes back). Nor does it read the clock: while a step is under way, every caller
// finds one due, and a flood of them reading the time would cost each entry a clock read.
func TestCallerDoesNotStepWhileTheClockReads(t *testing.T) {
	now := time.Now()
	clock := &clockAt{now: now}
	var callers, reads int
	a := NewAdaptive(0.25, clock, func() Observation {
		callers++
		return calm(clock.Now())
	})
	a.Step(func() Observation { return calm(now) })
	a.Step(func() Observation {
		clock.now = now.Add(2 * AdaptiveStep)
		before := clock.reads
		a.Admit(zapcore.InfoLevel, 0, "m", clock.now.UnixNano()) // a step is due by its time
		reads = clock.reads - before
		return calm(clock.now)
	})
	if callers != 0 {
		t.Fatalf("a caller stepped %d times while the clock read the stream", callers)
	}
	if reads != 0 {
		t.Fatalf("a caller read the clock %d times while the clock's step was under way", reads)
	}
	if got := a.lastStep.Load(); got != now.Add(2*AdaptiveStep).UnixNano() {
		t.Errorf("lastStep %d; want the clock's step's time", got)
	}
}

// Shed callers yield only while goroutines wait for a CPU: the step reads the scheduler's
// runnable goroutines.
func TestShedCallersYieldOnlyWhenCrowded(t *testing.T) {
	now := time.Now()
	a := NewAdaptive(0.25, &clockAt{now: now}, func() Observation { return calm(now) })
	step := func() {
		now = now.Add(AdaptiveStep)
		a.Step(func() Observation { return calm(now) })
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
	for step(); !a.Yields() && time.Now().Before(deadline); step() {
		runtime.Gosched()
	}
	stop.Store(true)
	wg.Wait()
	if !a.Yields() {
		t.Fatal("4 spinning goroutines a CPU, and shed callers would not yield")
	}
	for step(); a.Yields() && time.Now().Before(deadline); step() {
		time.Sleep(time.Millisecond) // other tests' goroutines may still be finishing
	}
	if a.Yields() {
		t.Fatal("nothing waits for a CPU, and shed callers would still yield")
	}
}
