package fluentcore

// DegradeAdaptive, the default: internal/shed's controller sheds only what would not fit
// (see its package doc for the rule), stepped by the sink's clock and, while a flood keeps
// the clock off the CPU, by the logging calls themselves.

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

// adaptiveRule is the shedRule of DegradeAdaptive. admit, weight and the gauges are safe
// for concurrent use; steps are serialised by mu (the clock and a caller may both try).
type adaptiveRule struct {
	shed       *shed.Shedder
	lastStep   atomic.Int64 // unix nanos of the last step
	lastShed   atomic.Int64 // the clock's unix nanos when an entry was last marked shed
	lastShedAt atomic.Int64 // that entry's own time (zap's), for the cheap test in shedAt
	crowded    atomic.Bool  // at the last step, goroutines were waiting for a CPU

	mu       sync.Mutex
	runnable []rtmetrics.Sample // the scheduler's runnable goroutines, read each step
}

// adaptiveHold is how long DegradeAdaptive shows the stream degraded after it last shed an
// entry, and how long the fill must stay under the low mark before it stops counting keys:
// admission itself reopens at the next step, this only keeps the state and its events from
// flapping step by step.
const adaptiveHold = time.Second

// adaptiveFull is the fill up to which DegradeAdaptive admits a flood; the last 1/64 of the
// buffer is the margin the rare keys' entries find room in while the flood is thinned (a
// stream of 64 batches or more holds it in a reserved batch, stream.reserve, no larger).
// It is small because a burst that ends leaves it unused: whatever it holds back is what
// the policy delivers less than no policy at all.
const adaptiveFull = 1 - 1.0/64

// adaptiveStep is the shedder's step while it counts keys: a small fraction of the time a
// flood at full delivery rate takes to fill the default buffer, so that the budget follows
// the fill within a few milliseconds (bench/README.md, "Figures behind the doc comments").
const adaptiveStep = 5 * time.Millisecond

func newAdaptiveRule(cfg DegradeConfig) *adaptiveRule {
	return &adaptiveRule{
		shed:     shed.New(shed.Config{Low: cfg.LowWatermark, Full: adaptiveFull, Calm: adaptiveHold}),
		runnable: []rtmetrics.Sample{{Name: "/sched/goroutines/runnable:goroutines"}},
	}
}

// observe steps the shedder on the clock. The stream shows degraded while an entry has been
// shed within adaptiveHold.
func (r *adaptiveRule) observe(o degradeObservation) (degraded, checking bool) {
	r.mu.Lock()
	r.stepLocked(o)
	r.mu.Unlock()
	return o.now.UnixNano()-r.lastShed.Load() < int64(adaptiveHold), r.shed.Counting()
}

// stepDue reports whether the next step is due at now (unix nanos), a cheap test on an
// entry's time that beginStep confirms on the real clock.
func (r *adaptiveRule) stepDue(now int64) bool { return now-r.lastStep.Load() >= int64(adaptiveStep) }

// beginStep lets a logging call step the shedder: it reports whether the step is due on the
// real clock (an entry's time may come from zap.WithClock) and nobody else is stepping,
// and then holds r.mu until endStep. Callers step it as well as the clock because a flood
// of them can keep the clock's goroutine off the CPU for longer than the buffer lasts; a
// caller that logs is running. Only the controller moves there: the degraded state and its
// events stay on the clock, or on the first shed.
func (r *adaptiveRule) beginStep(now time.Time) bool {
	if !r.mu.TryLock() {
		return false
	}
	if now.UnixNano()-r.lastStep.Load() < int64(adaptiveStep) {
		r.mu.Unlock()
		return false
	}
	return true
}

// endStep steps the shedder with o and releases r.mu.
func (r *adaptiveRule) endStep(o degradeObservation) {
	r.stepLocked(o)
	r.mu.Unlock()
}

// stepLocked steps the shedder; r.mu is held.
func (r *adaptiveRule) stepLocked(o degradeObservation) {
	r.lastStep.Store(o.now.UnixNano())
	margin := max((1-adaptiveFull)*float64(o.limit), float64(o.reserved)) // the reserve is the margin
	room := math.MaxFloat64                                               // until an entry's size is known, in entries
	if o.entryBytes > 0 {
		room = (float64(o.room) - margin) / o.entryBytes
	}
	r.shed.Step(shed.Observation{
		Now: o.now, Fill: float64(o.buffered) / float64(o.limit), Delivered: o.delivered,
		Connected: o.disconnectedFor == 0, Room: room, Margin: margin / max(o.entryBytes, 1),
		Written: o.written,
	})
	// One counter read, no allocation: cheap enough for every step.
	rtmetrics.Read(r.runnable)
	v := r.runnable[0].Value
	r.crowded.Store(v.Kind() != rtmetrics.KindUint64 || // not measured: yield, to be safe
		v.Uint64() >= uint64(runtime.GOMAXPROCS(0)))
}

// admit keeps an entry by the shedder's keep ratios and allowance.
func (r *adaptiveRule) admit(level zapcore.Level, tag uint16, msg string, _ int64) (bool, dropReason) {
	if r.shed.KeepTag(int8(level), tag, msg) {
		return true, 0
	}
	return false, dropSampled
}

// shedAt marks that an entry logged at at (its time, unix nanos) was shed, which keeps the
// stream degraded, and says that the stream must be degraded before it is counted. The
// mark is the clock's time, read and stored only when the last one is a millisecond older
// by the entries' times: many callers shedding at once would otherwise each read the clock
// and write one cache line.
func (r *adaptiveRule) shedAt(at int64, clock zapcore.Clock) (enters bool) {
	if d := at - r.lastShedAt.Load(); d > int64(time.Millisecond) || d < 0 {
		r.lastShedAt.Store(at)
		r.lastShed.Store(clock.Now().UnixNano())
	}
	return true
}

// yields reports whether a caller whose entry was shed should yield the processor: at the
// last step there were at least as many goroutines waiting for a CPU as there are CPUs.
// Then callers logging flat out, each through a Check that costs almost nothing once it
// sheds, would keep the sender off the CPU, and a yield after each shed gives the sender
// its turn. With a CPU to spare the yield would only cost the caller, so it is left out
// then (bench/README.md, "Figures behind the doc comments").
func (r *adaptiveRule) yields() bool { return r.crowded.Load() }

// wake makes the shedder count keys at once: a sealed batch found the fill at kickAt, with
// taken entries taken in by the stream (the shedder's Written) so far.
func (r *adaptiveRule) wake(taken uint64) bool { r.shed.Wake(taken); return true }

// fast reports whether the clock should step every adaptiveStep rather than at its usual
// pace: the shedder is counting keys.
func (r *adaptiveRule) fast() bool { return r.shed.Counting() }

// weight is the WeightKey value of a kept entry; unweigh gives back the weight of an entry
// that was weighed and then not kept after all (it did not fit), so that the next kept
// entry of its key carries it.
func (r *adaptiveRule) weight(level zapcore.Level, tag uint16, msg string) uint32 {
	return r.shed.WeightTag(int8(level), tag, msg)
}

func (r *adaptiveRule) unweigh(level zapcore.Level, tag uint16, msg string, w uint32) {
	r.shed.UnweighTag(int8(level), tag, msg, w)
}

func (r *adaptiveRule) gauges() (admitRatio, capacity float64) {
	return r.shed.KeepRatio(), r.shed.Capacity()
}

// kickAt is the fill from which keys are counted (shed.CountsFrom).
func (r *adaptiveRule) kickAt() float64 { return r.shed.CountsFrom() }

// freed tells the shedder that entries left the buffer: its allowance grows by them.
func (r *adaptiveRule) freed(n int) { r.shed.Freed(n) }

// countsRoom: while it counts keys, what the shedder admits fits the room left.
func (*adaptiveRule) countsRoom() bool { return true }

// keepsWhole: a key the shedder neither thins nor counts as a flood.
func (r *adaptiveRule) keepsWhole(level zapcore.Level, tag uint16, msg string) bool {
	return r.shed.WholeTag(int8(level), tag, msg)
}
