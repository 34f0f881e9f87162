package fluentcore

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap/zapcore"
)

// DegradePolicy says how the info stream sheds entries under backpressure. The err
// stream never degrades.
type DegradePolicy int

const (
	// DegradeAdaptive sheds an info entry only when, had it been admitted, it or a later
	// entry would not have found room in the buffer, and then fairly. The buffer absorbs
	// bursts to the end: while it has room, everything is admitted, at any rate, and an
	// allowance of what fits (the room left, and what the sender frees) stops exactly
	// what would overflow. Once it is full, what the sender delivers is shared out over
	// message and level keys: rare messages kept whole, the most frequent thinned hardest,
	// Debug before Info before Warn; the last 1/64 of the buffer (a batch of it, with 64
	// batches or more) is kept for the keys that are not flooding. Before the sender has
	// delivered anything, nothing is thinned by rate. During an outage nothing is shed: the
	// buffer holds what it can and the rest is dropped as queue_full. internal/shed has the
	// controller and its reasons.
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
// DegradeAdaptive (the default) counts keys from half of LowWatermark on (and stops after a
// second under it), measures the delivery rate while the fill is above LowWatermark, and,
// with WeightKey, marks what it kept; it needs no other setting. The other policies switch
// a degraded state: the stream enters it when the share of its buffer budget in use (bytes
// buffered / Info.BufferBytes) reaches HighWatermark, or, if DisconnectedAfter is set, when
// its sender has been disconnected that long; it leaves only after the share has stayed at
// or below LowWatermark, connected, for Hold. The gap between the watermarks and the hold
// time keep it from flapping.
type DegradeConfig struct {
	// Policy is how entries are shed. Default DegradeAdaptive.
	Policy DegradePolicy `json:"policy,omitempty" yaml:"policy,omitempty"`
	// HighWatermark is the fill share (0..1] that enters degraded (the switching policies).
	// Default 0.75.
	HighWatermark float64 `json:"high_watermark,omitempty" yaml:"high_watermark,omitempty"`
	// LowWatermark is the fill share [0..HighWatermark) to get back under. Default 0.25.
	LowWatermark float64 `json:"low_watermark,omitempty" yaml:"low_watermark,omitempty"`
	// Hold is how long the stream must stay calm before leaving degraded. Default 5s; at
	// least MinInterval.
	Hold time.Duration `json:"hold,omitempty" yaml:"hold,omitempty"`
	// DisconnectedAfter, if set, is how long the sender may be disconnected before the
	// stream degrades, whatever its buffer holds (the switching policies). Default 0: off,
	// so that an outage alone sheds nothing the budget can still hold. If set, at least
	// MinInterval.
	DisconnectedAfter time.Duration `json:"disconnected_after,omitempty" yaml:"disconnected_after,omitempty"`
	// SampleInterval, SampleFirst and SampleThereafter tune DegradeSample.
	// Defaults 1s, 10 and 100; SampleInterval at least MinInterval.
	SampleInterval   time.Duration `json:"sample_interval,omitempty" yaml:"sample_interval,omitempty"`
	SampleFirst      int           `json:"sample_first,omitempty" yaml:"sample_first,omitempty"`
	SampleThereafter int           `json:"sample_thereafter,omitempty" yaml:"sample_thereafter,omitempty"`
	// WeightKey, if set, is a record key that DegradeAdaptive adds to every info entry:
	// how many entries of its message and level it stands for — itself, and those shed or
	// dropped (queue_full, too_large) since the last one kept (1 while they are kept whole,
	// about N while 1 in N is kept) — so that the receiving side can sum the weights to
	// count what was logged (all but what was lost after a key's last kept entry). Default
	// "" (off). It should not be a key the entries carry. Other policies ignore it.
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

// infoPolicy is the info stream's: an entry that cannot be buffered is dropped and
// counted by reason, and under backpressure Check sheds entries before they are encoded.
type infoPolicy struct {
	degrade *degradeControl
	kick    chan struct{} // wakes the clock when the fill reaches the high watermark
}

// newInfoPolicy returns the info stream's policy under cfg.
func newInfoPolicy(cfg DegradeConfig, onChange func(now time.Time, degraded bool)) *infoPolicy {
	return &infoPolicy{degrade: newDegradeControl(cfg, onChange), kick: make(chan struct{}, 1)}
}

func (*infoPolicy) written()                {}
func (p *infoPolicy) freed(n int)           { p.degrade.rule.freed(n) }
func (*infoPolicy) roomWait() time.Duration { return 0 } // a full info stream drops: queue_full
func (*infoPolicy) noRoom()                 {}

// reserves while the shedder counts keys against the room left (the adaptive policy): the
// reserve is then the margin it keeps for the keys it keeps whole, in batches, not only in
// its count, which partly filled batches sealed between two steps can outrun.
func (p *infoPolicy) reserves() bool {
	return p.degrade.checking.Load() && p.degrade.rule.countsRoom()
}

func (p *infoPolicy) keepsWhole(level zapcore.Level, tag uint16, msg string) bool {
	return p.degrade.rule.keepsWhole(level, tag, msg)
}
func (p *infoPolicy) roomAdmitted() bool {
	return p.degrade.checking.Load() && p.degrade.rule.countsRoom()
}
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

// wakes once the queue alone passes the degrade policy's high watermark; wakeWith then
// wakes the policy and the clock early, so that it reads the whole fill at once rather
// than at its next tick. taken is the entries the stream has taken in (for the adaptive
// shedder's count of what it admitted and the stream has not taken in yet).
func (p *infoPolicy) wakes(queuedShare float64) bool { return p.degrade.overHigh(queuedShare) }

func (p *infoPolicy) wakeWith(taken uint64) {
	p.degrade.wake(taken)
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

func (p *infoPolicy) report(st *StreamStats) {
	st.Degraded = p.degrade.active.Load()
	st.DegradeTransitions = p.degrade.transitions.Load()
	st.AdmitRatio, st.Capacity = p.degrade.rule.gauges()
}

// shedRule is one kind of degrade policy: the switching kinds (degrade_switch.go) or the
// adaptive shedder (degrade_adaptive.go). admit, stepDue, shedAt, weight, unweigh, yields
// and gauges are on the caller's path and safe for concurrent use; observe is called by
// the sink's clock, one call at a time.
type shedRule interface {
	// observe feeds the clock's observation and says whether the stream is degraded and
	// whether Check must consult admit.
	observe(o degradeObservation) (degraded, checking bool)
	// admit decides whether an entry (its level, tag index, message and time in unix nanos)
	// is kept, and if not why. Not the entry's pointer: through an interface it would
	// escape, and every logging call would allocate.
	admit(level zapcore.Level, tag uint16, msg string, at int64) (bool, dropReason)
	// stepDue reports (on an entry's time, unix nanos) that a caller should try a step:
	// beginStep, and if it reports true, endStep with an observation.
	stepDue(at int64) bool
	beginStep(now time.Time) bool
	endStep(o degradeObservation)
	// shedAt notes an entry shed (logged at at, unix nanos) and reports whether the stream
	// must then enter the degraded state before the entry is counted.
	shedAt(at int64, clock zapcore.Clock) bool
	// wake reports whether Check must consult admit at once: the fill reached kickAt, with
	// taken entries taken in by the stream so far.
	wake(taken uint64) bool
	kickAt() float64
	fast() bool   // the clock should observe every adaptiveStep
	yields() bool // a caller whose entry was shed should yield the processor
	weight(level zapcore.Level, tag uint16, msg string) uint32
	unweigh(level zapcore.Level, tag uint16, msg string, w uint32)
	freed(entries int)                                           // entries left the buffer
	countsRoom() bool                                            // admit keeps what fits in the room left (the adaptive shedder)
	keepsWhole(level zapcore.Level, tag uint16, msg string) bool // not thinned, not over its fair share
	gauges() (admitRatio, capacity float64)
}

// degradeControl is the info stream's degrade state, whichever the kind of policy: whether
// Check must consult the rule (one atomic load on the caller's path), the degraded state as
// Stats and the metrics show it, and its events.
type degradeControl struct {
	checking    atomic.Bool // Check must ask admit
	active      atomic.Bool // degraded
	settled     atomic.Bool // active, once its event has been delivered
	transitions atomic.Uint64
	rule        shedRule
	kickAt      float64 // a fill share that wakes the clock at once, read without a lock

	stateMu  sync.Mutex                         // serialises the state's transitions and their events
	onChange func(now time.Time, degraded bool) // reports a transition (OnEvent); nil for none
}

// newDegradeControl returns the control for cfg, whose every field is set (withDefaults).
// onChange, if not nil, is called on each transition, before any entry is counted as shed
// in the new state.
func newDegradeControl(cfg DegradeConfig, onChange func(now time.Time, degraded bool)) *degradeControl {
	c := &degradeControl{onChange: onChange}
	if cfg.Policy == DegradeAdaptive {
		c.rule = newAdaptiveRule(cfg)
	} else {
		c.rule = newSwitchRule(cfg)
	}
	c.kickAt = c.rule.kickAt()
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
	room            int64         // bytes the stream's batches can still take
	reserved        int64         // of them, the bytes held in reserve for keys kept whole
	disconnectedFor time.Duration // how long sends have been failing; 0 when they succeed
	delivered       uint64        // entries delivered so far
	written         uint64        // entries the stream's writers have taken in so far
	entryBytes      float64       // the size of an entry, on average
}

// observe feeds one observation from the clock and moves the degraded state.
func (c *degradeControl) observe(o degradeObservation) {
	degraded, checking := c.rule.observe(o)
	if degraded {
		// Entered before Check may drop anything in it.
		c.setState(o.now, true)
		c.checking.Store(checking)
		return
	}
	c.checking.Store(checking)
	c.setState(o.now, false)
}

// setState moves the degraded state and reports the transition, if it is one. active is
// stored before the event (OnEvent sees the state it reports), settled after it: a caller
// that sheds waits on stateMu until the event has been delivered.
func (c *degradeControl) setState(now time.Time, degraded bool) {
	if c.settled.Load() == degraded && c.active.Load() == degraded {
		return
	}
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	if c.active.Load() != degraded {
		c.active.Store(degraded)
		c.transitions.Add(1)
		if c.onChange != nil {
			c.onChange(now, degraded)
		}
	}
	c.settled.Store(degraded)
}

// shed is called for an entry admit did not keep (logged at at, unix nanos), before it is
// counted: the state the metrics and OnEvent show is degraded by then, whichever path shed
// it. The clock is read only when the state or its mark moves, not for every shed entry.
func (c *degradeControl) shed(at int64, clock zapcore.Clock) {
	if c.rule.shedAt(at, clock) && !c.settled.Load() {
		c.setState(clock.Now(), true)
	}
}

// wake makes Check consult the policy at once, if the rule wants it: a sealed batch found
// the fill at kickAt, and the adaptive shedder starts counting keys right away rather than
// at the clock's next observation.
func (c *degradeControl) wake(taken uint64) {
	if c.rule.wake(taken) {
		c.checking.Store(true)
	}
}
