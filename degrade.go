package fluentcore

import (
	"fmt"
	"math"
	"runtime"
	rtmetrics "runtime/metrics"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fluentcore/fluentcore/internal/shed"
	"go.uber.org/zap/zapcore"
)

// DegradePolicy says how the info stream sheds entries under backpressure. The err
// stream never degrades.
type DegradePolicy int

const (
	// DegradeAdaptive admits info entries at the rate the stream delivers them and sheds
	// only the excess: up to the middle of the watermarks (0.5 of the buffer budget by
	// default) everything is admitted; above it a budget refilled at the measured delivery
	// rate, scaled to hold the buffer there, is shared out over message and level keys,
	// rare messages kept whole, the most frequent thinned hardest, Debug before Info
	// before Warn (internal/shed has the controller); the last eighth of the buffer's
	// batches is kept for rare messages. Admission is back to 100 % within a
	// few milliseconds once the offered load is under capacity. During an outage nothing
	// is thinned: the buffer holds what it can and the rest is dropped as queue_full. It is
	// the default because it was the only policy that delivered at least as much as
	// DegradeOff flat out, at every number of goroutines measured, and lost nothing under
	// steady loads below capacity (bench/README.md, "Degrade policies").
	DegradeAdaptive DegradePolicy = iota
	// DegradeSample keeps the first Degrade.SampleFirst entries per message per
	// Degrade.SampleInterval and then one in Degrade.SampleThereafter, like zap's sampler,
	// while the stream is degraded (from HighWatermark until it has stayed under
	// LowWatermark for Hold).
	DegradeSample
	// DegradeKeepWarn keeps Warn entries and drops Debug and Info while degraded.
	DegradeKeepWarn
	// DegradeDropAll drops every info-stream entry while degraded.
	DegradeDropAll
	// DegradeOff never degrades: info entries are only dropped when the buffers are full.
	DegradeOff
)

// String returns the policy's name.
func (p DegradePolicy) String() string {
	switch p {
	case DegradeAdaptive:
		return "adaptive"
	case DegradeSample:
		return "sample"
	case DegradeKeepWarn:
		return "keep_warn"
	case DegradeDropAll:
		return "drop_all"
	case DegradeOff:
		return "off"
	}
	return "unknown"
}

// UnmarshalText reads a policy from its name ("adaptive", "sample", "keep_warn",
// "drop_all", "off"), for configuration files and the environment. An unknown name is an
// error.
func (p *DegradePolicy) UnmarshalText(b []byte) error {
	for q := DegradeAdaptive; q <= DegradeOff; q++ {
		if q.String() == string(b) {
			*p = q
			return nil
		}
	}
	return fmt.Errorf("unknown degrade policy %q (want adaptive, sample, keep_warn, drop_all or off)", b)
}

// MarshalText writes the policy's name.
func (p DegradePolicy) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// DegradeConfig tunes how the info stream sheds entries under backpressure. The zero value
// gives the documented defaults.
//
// DegradeAdaptive (the default) admits everything up to the middle of the two watermarks
// and holds the buffer fill there, counts keys from half of LowWatermark on (and stops
// after a second under it), and, with WeightKey, marks what it kept. The other policies
// switch a degraded state: the stream enters it when the share of its buffer budget in
// use (bytes buffered / Info.BufferBytes) reaches HighWatermark, or, if DisconnectedAfter
// is set, when its sender has been disconnected that long; it leaves only after the share
// has stayed at or below LowWatermark, connected, for Hold. The gap between the watermarks
// and the hold time keep it from flapping.
type DegradeConfig struct {
	// Policy is how entries are shed. Default DegradeAdaptive.
	Policy DegradePolicy `json:"policy,omitempty" yaml:"policy,omitempty"`
	// HighWatermark is the fill share (0..1] that enters degraded. Default 0.75.
	HighWatermark float64 `json:"high_watermark,omitempty" yaml:"high_watermark,omitempty"`
	// LowWatermark is the fill share [0..HighWatermark) to get back under. Default 0.25.
	LowWatermark float64 `json:"low_watermark,omitempty" yaml:"low_watermark,omitempty"`
	// Hold is how long the stream must stay calm before leaving degraded. Default 5s.
	Hold time.Duration `json:"hold,omitempty" yaml:"hold,omitempty"`
	// DisconnectedAfter, if set, is how long the sender may be disconnected before the
	// stream degrades, whatever its buffer holds. Default 0: off. An outage alone then
	// sheds nothing the budget can still hold (it was 2s before the budget was counted in
	// bytes; at 2k entries/s that dropped entries with the buffer under 10 % full).
	DisconnectedAfter time.Duration `json:"disconnected_after,omitempty" yaml:"disconnected_after,omitempty"`
	// SampleInterval, SampleFirst and SampleThereafter tune DegradeSample.
	// Defaults 1s, 10 and 100.
	SampleInterval   time.Duration `json:"sample_interval,omitempty" yaml:"sample_interval,omitempty"`
	SampleFirst      int           `json:"sample_first,omitempty" yaml:"sample_first,omitempty"`
	SampleThereafter int           `json:"sample_thereafter,omitempty" yaml:"sample_thereafter,omitempty"`
	// WeightKey, if set, is a record key that DegradeAdaptive adds to every info entry:
	// how many entries of its message and level it stands for, itself and those shed since
	// the last one kept (1 while they are kept whole, about N while 1 in N is kept), so that
	// the receiving side can sum the weights to count what was logged (all but what was shed
	// after a key's last kept entry, and what was dropped for other reasons). Default ""
	// (off). It should not be a key the entries carry. Other policies ignore it.
	WeightKey string `json:"weight_key,omitempty" yaml:"weight_key,omitempty"`
}

// withDefaults returns c with every unset field at its default; resolve applies it once and
// the rest of the core reads the result.
func (c DegradeConfig) withDefaults() DegradeConfig {
	if c.HighWatermark <= 0 {
		c.HighWatermark = 0.75
	}
	if c.LowWatermark <= 0 {
		c.LowWatermark = 0.25
	}
	if c.Hold <= 0 {
		c.Hold = 5 * time.Second
	}
	if c.SampleInterval <= 0 {
		c.SampleInterval = time.Second
	}
	if c.SampleFirst <= 0 {
		c.SampleFirst = 10
	}
	if c.SampleThereafter <= 0 {
		c.SampleThereafter = 100
	}
	return c
}

// degrader is the degrade state machine: pure logic, time passed in, not safe for
// concurrent use (degradeControl serialises it).
type degrader struct {
	cfg       DegradeConfig
	degraded  bool
	calmSince time.Time // when the stream last became calm while degraded; zero if not calm
}

// observe feeds one observation — the share of the buffer budget in use and how long the
// sender has been disconnected (0 when connected) — and reports whether the state changed.
func (d *degrader) observe(now time.Time, fill float64, disconnectedFor time.Duration) bool {
	if d.cfg.Policy == DegradeOff {
		return false
	}
	if !d.degraded {
		if fill >= d.cfg.HighWatermark || (d.cfg.DisconnectedAfter > 0 && disconnectedFor >= d.cfg.DisconnectedAfter) {
			d.degraded = true
			d.calmSince = time.Time{}
			return true
		}
		return false
	}
	if fill > d.cfg.LowWatermark || disconnectedFor > 0 {
		d.calmSince = time.Time{}
		return false
	}
	if d.calmSince.IsZero() {
		d.calmSince = now
	}
	if now.Sub(d.calmSince) >= d.cfg.Hold {
		d.degraded = false
		d.calmSince = time.Time{}
		return true
	}
	return false
}

// sampleSlots is the number of per-message counters; messages that hash alike share one,
// which only makes sampling a little stricter for them.
const sampleSlots = 1024

// sampler keeps the first n entries per message per interval and then one in m. Time is
// passed in; safe for concurrent use (lock-free counters).
type sampler struct {
	interval   int64
	first      uint64
	thereafter uint64
	slots      [sampleSlots]sampleSlot
}

type sampleSlot struct {
	windowEnd atomic.Int64 // unix nanos at which the current window ends
	count     atomic.Uint64
}

func newSampler(interval time.Duration, first, thereafter int) *sampler {
	return &sampler{interval: int64(interval), first: uint64(first), thereafter: uint64(thereafter)}
}

// keep reports whether an entry with message msg, logged at now (unix nanos), is kept.
func (s *sampler) keep(now int64, msg string) bool {
	slot := &s.slots[shed.Hash(0, msg)%sampleSlots]
	if end := slot.windowEnd.Load(); now >= end {
		// A new window: one caller wins the reset, the others count in it.
		if slot.windowEnd.CompareAndSwap(end, now+s.interval) {
			slot.count.Store(1)
			return true
		}
	}
	n := slot.count.Add(1)
	if n <= s.first {
		return true
	}
	return (n-s.first)%s.thereafter == 0
}

// infoPolicy is the info stream's: an entry that cannot be buffered is dropped and
// counted by reason, and under backpressure Check sheds entries before they are encoded.
type infoPolicy struct {
	degrade *degradeControl
	kick    chan struct{} // wakes the clock when the fill reaches the high watermark
}

// newInfoPolicy returns the info stream's policy under cfg.
func newInfoPolicy(cfg DegradeConfig) *infoPolicy {
	return &infoPolicy{degrade: newDegradeControl(cfg), kick: make(chan struct{}, 1)}
}

func (*infoPolicy) written()                             {}
func (*infoPolicy) roomWait() time.Duration              { return 0 } // a full info stream drops: queue_full
func (*infoPolicy) noRoom()                              {}
func (*infoPolicy) cutsOversized() bool                  { return false } // too_large
func (*infoPolicy) losesToSpill() bool                   { return false } // dropped, counted by reason
func (*infoPolicy) replaying() bool                      { return false }
func (*infoPolicy) sealsWhileFailing(time.Duration) bool { return false }

// spillDue is never: info batches wait out an outage in the buffer, whose budget the
// policy spends on entries, and are dropped only when it is full.
func (*infoPolicy) spillDue(time.Time, time.Time) (bool, time.Duration) {
	return false, time.Duration(math.MaxInt64)
}

func (*infoPolicy) signals() (wake, spillKick <-chan struct{}, evacuate <-chan chan struct{}) {
	return nil, nil, nil
}

// sealed wakes the clock early once the queue alone passes the degrade policy's high
// watermark, so that it reads the whole fill at once rather than at its next tick.
func (p *infoPolicy) sealed(queuedShare float64) {
	if p.degrade.overHigh(queuedShare) {
		p.degrade.wake()
		select {
		case p.kick <- struct{}{}:
		default:
		}
	}
}

func (p *infoPolicy) report(st *StreamStats) {
	st.Degraded = p.degrade.active.Load()
	st.DegradeTransitions = p.degrade.transitions.Load()
	st.KeepRatio, st.Capacity = p.degrade.keepRatio(), p.degrade.capacity()
}

// degradeControl wraps the info stream's policy: the state machine, or the adaptive
// shedder. The sink's clock goroutine feeds observations; Core.Check reads whether to ask
// admit with one atomic load.
type degradeControl struct {
	checking    atomic.Bool // Check must ask admit: degraded, or (adaptive) counting keys
	active      atomic.Bool // degraded, as Stats and the metrics show it
	transitions atomic.Uint64
	sampler     *sampler
	shed        *shed.Shedder // DegradeAdaptive only
	kickAt      float64       // a fill share that wakes the clock at once, read without the lock
	lastStep    atomic.Int64  // unix nanos of the adaptive shedder's last step
	crowded     atomic.Bool   // adaptive: at the last step, goroutines were waiting for a CPU

	mu       sync.Mutex
	sm       degrader
	lastShed time.Time          // adaptive: the last observation that thinned a key
	runnable []rtmetrics.Sample // adaptive: the scheduler's runnable goroutines, read each step
}

// adaptiveHold is how long DegradeAdaptive shows the stream degraded after it last thinned
// a key, and how long the fill must stay under the low mark before it stops counting keys:
// admission itself reopens at the next step, this only keeps the state and its events
// from flapping step by step.
const adaptiveHold = time.Second

// newDegradeControl returns the control for cfg, whose every field is set (withDefaults).
func newDegradeControl(cfg DegradeConfig) *degradeControl {
	c := &degradeControl{
		sm:      degrader{cfg: cfg},
		sampler: newSampler(cfg.SampleInterval, cfg.SampleFirst, cfg.SampleThereafter),
		kickAt:  cfg.HighWatermark,
	}
	if cfg.Policy == DegradeAdaptive {
		c.shed = shed.New(shed.Config{
			Low:    cfg.LowWatermark,
			Target: min((cfg.LowWatermark+cfg.HighWatermark)/2, (cfg.LowWatermark+adaptiveFull)/2),
			Full:   adaptiveFull,
			Calm:   adaptiveHold,
		})
		c.kickAt = c.shed.CountsFrom()
		c.runnable = []rtmetrics.Sample{{Name: "/sched/goroutines/runnable:goroutines"}}
	}
	return c
}

// overHigh reports whether a fill share calls for an observation now: Check does not
// consult the policy yet and the fill has reached the mark where it should.
func (c *degradeControl) overHigh(fill float64) bool {
	return fill >= c.kickAt && !c.checking.Load()
}

// degradeObservation is what the clock tells the info stream's policy.
type degradeObservation struct {
	now             time.Time
	buffered, limit int64         // bytes buffered, and the buffer budget
	disconnectedFor time.Duration // how long sends have been failing; 0 when they succeed
	delivered       uint64        // entries delivered so far
	entryBytes      float64       // the size of an entry, on average
}

// adaptiveFull is the fill at which DegradeAdaptive admits nothing but rare keys. The rest
// is headroom: for the step it takes the controller to see the fill, and for the rare
// keys, which must find room (with batch buffers a stream is full before 1 anyway).
const adaptiveFull = 0.8

// observe feeds one observation. It returns whether the degraded state changed, and the
// new state.
func (c *degradeControl) observe(o degradeObservation) (changed, degraded bool) {
	now, fill, disconnectedFor := o.now, float64(o.buffered)/float64(o.limit), o.disconnectedFor
	c.mu.Lock()
	if c.shed != nil {
		c.stepLocked(o)
		degraded = !c.lastShed.IsZero() && now.Sub(c.lastShed) < adaptiveHold
		changed = degraded != c.sm.degraded
		c.sm.degraded = degraded
	} else {
		changed = c.sm.observe(now, fill, disconnectedFor)
		degraded = c.sm.degraded
		if changed {
			c.checking.Store(degraded)
		}
	}
	c.mu.Unlock()
	if changed {
		c.active.Store(degraded)
		c.transitions.Add(1)
	}
	return changed, degraded
}

// stepDue reports whether the adaptive shedder's next step is due at now (unix nanos): a
// cheap test on an entry's time, which a caller confirms on the real clock (beginStep).
func (c *degradeControl) stepDue(now int64) bool {
	return c.shed != nil && now-c.lastStep.Load() >= int64(adaptiveStep)
}

// beginStep lets a logging call step the adaptive shedder: it reports whether the step is
// due on the real clock (an entry's time may come from zap.WithClock) and nobody else is
// stepping, and then holds c.mu until endStep. Callers step it as well as the clock because
// a flood of them can keep the clock's goroutine off the CPU for tens of milliseconds (1024
// goroutines on 2 cores: gaps of 30–300 ms), longer than the buffer lasts; a caller that
// logs is running. Only the controller moves there: the degraded state and its events stay
// on the clock.
func (c *degradeControl) beginStep(now time.Time) bool {
	if !c.mu.TryLock() {
		return false
	}
	if now.UnixNano()-c.lastStep.Load() < int64(adaptiveStep) {
		c.mu.Unlock()
		return false
	}
	return true
}

// endStep steps the shedder with o and releases c.mu.
func (c *degradeControl) endStep(o degradeObservation) {
	c.stepLocked(o)
	c.mu.Unlock()
}

// stepLocked steps the adaptive shedder; c.mu is held.
func (c *degradeControl) stepLocked(o degradeObservation) {
	c.lastStep.Store(o.now.UnixNano())
	c.shed.Step(shed.Observation{
		Now: o.now, Fill: float64(o.buffered) / float64(o.limit), Delivered: o.delivered,
		Connected: o.disconnectedFor == 0,
		Room:      (adaptiveFull*float64(o.limit) - float64(o.buffered)) / o.entryBytes,
	})
	if c.shed.Shedding() {
		c.lastShed = o.now
	}
	c.checking.Store(c.shed.Counting())
	// One counter read, no allocation: cheap enough for every step.
	rtmetrics.Read(c.runnable)
	v := c.runnable[0].Value
	c.crowded.Store(v.Kind() != rtmetrics.KindUint64 || // not measured: yield, to be safe
		v.Uint64() >= uint64(runtime.GOMAXPROCS(0)))
}

// yields reports whether a caller whose entry was shed should yield the processor: at the
// last step there were at least as many goroutines waiting for a CPU as there are CPUs
// (measured by the adaptive policy only; the others never yield). Then callers logging
// flat out, each through a Check that costs almost nothing once it sheds, would keep the
// sender off the CPU, and a yield after each shed gives the sender its turn. With a CPU to
// spare the yield would only cost the caller, so it is left out then (bench/README.md,
// "Figures that used to stand in doc comments").
func (c *degradeControl) yields() bool { return c.crowded.Load() }

// wake makes Check consult the policy at once: a sealed batch found the fill at kickAt.
// The adaptive shedder starts counting keys right away, rather than at the clock's next
// observation.
func (c *degradeControl) wake() {
	if c.shed != nil {
		c.shed.Wake()
		c.checking.Store(true)
	}
}

// fast reports whether observations should come every adaptiveStep rather than at the
// clock's usual pace: the adaptive shedder is counting keys.
func (c *degradeControl) fast() bool { return c.shed != nil && c.shed.Counting() }

// adaptiveStep is the adaptive shedder's step while it counts keys: at the delivery rates
// of the benchmarks (1–2 M entries/s) an 8 MiB buffer fills in tens of milliseconds, so the
// budget must follow within a few.
const adaptiveStep = 5 * time.Millisecond

// admit decides, while checking, whether an info entry is kept; if not it gives the reason.
// tight says the stream is down to its reserve of free batches while connected (see
// stream.tight): the adaptive policy then keeps only each key's first entry in the step.
func (c *degradeControl) admit(ent *zapcore.Entry, tight bool) (bool, dropReason) {
	switch c.sm.cfg.Policy {
	case DegradeAdaptive:
		if c.shed.Keep(int8(ent.Level), ent.Message, tight) {
			return true, 0
		}
		return false, dropSampled
	case DegradeDropAll:
		return false, dropDegraded
	case DegradeKeepWarn:
		if ent.Level >= zapcore.WarnLevel {
			return true, 0
		}
		return false, dropDegraded
	case DegradeSample:
		if c.sampler.keep(ent.Time.UnixNano(), ent.Message) {
			return true, 0
		}
		return false, dropSampled
	}
	return true, 0
}

// weight is the WeightKey value of a kept info entry (adaptive only; 1 otherwise).
func (c *degradeControl) weight(ent zapcore.Entry) uint32 {
	if c.shed == nil {
		return 1
	}
	return c.shed.Weight(int8(ent.Level), ent.Message)
}

// capacity and keepRatio are the adaptive shedder's gauges (0 and 1 without it).
func (c *degradeControl) capacity() float64 {
	if c.shed == nil {
		return 0
	}
	return c.shed.Capacity()
}

func (c *degradeControl) keepRatio() float64 {
	if c.shed == nil {
		return 1
	}
	return c.shed.KeepRatio()
}
