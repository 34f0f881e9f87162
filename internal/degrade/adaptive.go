package degrade

import (
	"math"
	"runtime"
	rtmetrics "runtime/metrics"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fluentcore/fluentcore/internal/shed"
	"go.uber.org/zap/zapcore"
)

// adaptiveHold is how long the adaptive kind shows the stream degraded after it last shed
// an entry, and how long the fill must stay under the low mark before it stops counting
// keys: admission itself reopens at the next step, this only keeps the state and its events
// from flapping step by step.
const adaptiveHold = time.Second

// AdaptiveFull is the fill up to which the adaptive kind admits a flood; the last 1/64 of
// the buffer is the margin the rare keys' entries find room in while the flood is thinned
// (a stream of 64 batches or more holds it in a reserved batch, no larger). It is small
// because a burst that ends leaves it unused: whatever it holds back is what the policy
// delivers less than no policy at all.
const AdaptiveFull = 1 - 1.0/64

// AdaptiveStep is the adaptive kind's step while it counts keys: a small fraction of the
// time a flood at full delivery rate takes to fill the default buffer, so that the budget
// follows the fill within a few milliseconds (bench/README.md, "Figures behind the doc
// comments").
const AdaptiveStep = 5 * time.Millisecond

// Adaptive is the adaptive kind: internal/shed's controller sheds only what would not fit
// (see its package doc for the rule), stepped by the clock (Step) and, while a flood keeps
// the clock off the CPU, by the logging calls themselves (Admit). Admit, the room's and the
// weights' methods, Yields and the gauges are safe for concurrent use; steps are serialised
// by mu (the clock and a caller may both try).
type Adaptive struct {
	shed       *shed.Shedder
	clock      zapcore.Clock      // the real time of a caller's step
	observe    func() Observation // what a caller's step reads
	lastStep   atomic.Int64       // unix nanos of the last step
	lastShed   atomic.Int64       // the clock's unix nanos when an entry was last marked shed
	lastShedAt atomic.Int64       // that entry's own time (zap's), for the cheap test in mark
	crowded    atomic.Bool        // at the last step, goroutines were waiting for a CPU

	mu       sync.Mutex
	runnable []rtmetrics.Sample // the scheduler's runnable goroutines, read each step
}

// NewAdaptive returns the adaptive kind with the low mark low (a fill share): a caller's
// step is due by the time of clock, and observes the stream through observe, which reads
// the stream's counts before the time it reports (Observation.Now: see shed.Observation).
func NewAdaptive(low float64, clock zapcore.Clock, observe func() Observation) *Adaptive {
	return &Adaptive{
		shed:     shed.New(shed.Config{Low: low, Full: AdaptiveFull, Calm: adaptiveHold}),
		clock:    clock,
		observe:  observe,
		runnable: []rtmetrics.Sample{{Name: "/sched/goroutines/runnable:goroutines"}},
	}
}

// Admit keeps an entry by the shedder's keep ratios and allowance. If a step is due by the
// entry's time, the caller then tries it (stepLate); a shed entry is marked, which keeps the
// stream degraded (Step).
func (a *Adaptive) Admit(level zapcore.Level, tag uint16, msg string, at int64) Verdict {
	kept := a.shed.Keep(int8(level), tag, msg)
	if at-a.lastStep.Load() >= int64(AdaptiveStep) {
		a.stepLate()
	}
	if kept {
		return Keep
	}
	a.mark(at)
	return Thinned
}

// stepLate lets a logging call step the shedder, if the step is due on the real clock (an
// entry's time may come from zap.WithClock) and nobody else is stepping. Callers step it as
// well as the clock because a flood of them can keep the clock's goroutine off the CPU for
// longer than the buffer lasts; a caller that logs is running. Only the controller moves
// there: the degraded state and its events stay on the clock, or on the first shed. The
// clock is read only by the caller that holds the lock: while a step is under way, every
// caller finds one due by its entry's time, and all of them would read the clock for each
// entry until the step ends.
func (a *Adaptive) stepLate() {
	if !a.mu.TryLock() {
		return
	}
	if a.clock.Now().UnixNano()-a.lastStep.Load() >= int64(AdaptiveStep) {
		a.stepLocked(a.observe())
	}
	a.mu.Unlock()
}

// Step steps the shedder on the clock, reading the stream under the lock that a caller's
// step takes too (stepLate), so that the two step observations in the order they read
// them. The stream shows degraded while an entry has been shed within adaptiveHold, and
// Check asks Admit while the shedder counts keys.
func (a *Adaptive) Step(read func() Observation) State {
	a.mu.Lock()
	o := read()
	a.stepLocked(o)
	a.mu.Unlock()
	return State{Now: o.Now, Degraded: o.Now.UnixNano()-a.lastShed.Load() < int64(adaptiveHold), Checking: a.shed.Counting()}
}

// stepLocked steps the shedder; a.mu is held.
func (a *Adaptive) stepLocked(o Observation) {
	a.lastStep.Store(o.Now.UnixNano())
	margin := max((1-AdaptiveFull)*float64(o.Limit), float64(o.Reserved)) // the reserve is the margin
	room := math.MaxFloat64                                               // until an entry's size is known, in entries
	if o.EntryBytes > 0 {
		room = (float64(o.Room) - margin) / o.EntryBytes
	}
	a.shed.Step(shed.Observation{
		Now: o.Now, Fill: float64(o.Buffered) / float64(o.Limit), Delivered: o.Delivered,
		Connected: o.DisconnectedFor == 0, Room: room, Margin: margin / max(o.EntryBytes, 1),
		Written: o.Written,
	})
	// One counter read, no allocation: cheap enough for every step.
	rtmetrics.Read(a.runnable)
	v := a.runnable[0].Value
	a.crowded.Store(v.Kind() != rtmetrics.KindUint64 || // not measured: yield, to be safe
		v.Uint64() >= uint64(runtime.GOMAXPROCS(0)))
}

// mark notes that an entry logged at at (its time, unix nanos) was shed, which keeps the
// stream degraded. The mark is the clock's time, read and stored only when the last one is
// a millisecond older by the entries' times: many callers shedding at once would otherwise
// each read the clock and write one cache line.
func (a *Adaptive) mark(at int64) {
	if d := at - a.lastShedAt.Load(); d > int64(time.Millisecond) || d < 0 {
		a.lastShedAt.Store(at)
		a.lastShed.Store(a.clock.Now().UnixNano())
	}
}

// Yields reports whether a caller whose entry was shed should yield the processor: at the
// last step there were at least as many goroutines waiting for a CPU as there are CPUs.
// Then callers logging flat out, each through a Check that costs almost nothing once it
// sheds, would keep the sender off the CPU, and a yield after each shed gives the sender
// its turn. With a CPU to spare the yield would only cost the caller, so it is left out
// then (bench/README.md, "Figures behind the doc comments").
func (a *Adaptive) Yields() bool { return a.crowded.Load() }

// Wake makes the shedder count keys at once, before the clock's next step: a sealed batch
// found the fill at CountsFrom, with taken entries taken in by the stream (the shedder's
// Written) so far.
func (a *Adaptive) Wake(taken uint64) { a.shed.Wake(taken) }

// CountsFrom is the fill from which keys are counted (shed.Shedder.CountsFrom).
func (a *Adaptive) CountsFrom() float64 { return a.shed.CountsFrom() }

// Counting reports whether the shedder counts keys: the clock then steps it every
// AdaptiveStep rather than at its usual pace. While it counts, what Admit keeps fits the
// room left.
func (a *Adaptive) Counting() bool { return a.shed.Counting() }

// Freed tells the shedder that entries left the buffer: its allowance grows by them.
func (a *Adaptive) Freed(entries int) { a.shed.Freed(entries) }

// KeepsWhole reports whether a key is one the shedder neither thins nor counts as a flood.
func (a *Adaptive) KeepsWhole(level zapcore.Level, tag uint16, msg string) bool {
	return a.shed.Whole(int8(level), tag, msg)
}

// Weight is the weight of a kept entry: how many entries of its key it stands for.
func (a *Adaptive) Weight(level zapcore.Level, tag uint16, msg string) uint32 {
	return a.shed.Weight(int8(level), tag, msg)
}

// Unweigh gives back the weight of an entry that was weighed and then not kept after all
// (it did not fit), so that the next kept entry of its key carries it.
func (a *Adaptive) Unweigh(level zapcore.Level, tag uint16, msg string, w uint32) {
	a.shed.Unweigh(int8(level), tag, msg, w)
}

// Gauges are the share of the offered entries the last step let through, and the delivery
// rate measured while the buffer held a backlog (entries a second).
func (a *Adaptive) Gauges() (admitRatio, capacity float64) {
	return a.shed.KeepRatio(), a.shed.Capacity()
}
