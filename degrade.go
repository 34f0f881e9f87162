package fluentcore

import (
	"fmt"
	"github.com/fluentcore/fluentcore/internal/stream"
	"time"

	"github.com/fluentcore/fluentcore/internal/degrade"
	"github.com/fluentcore/fluentcore/internal/outcome"
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
	// controller and its reasons, internal/degrade its wiring.
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
	// Policy is how entries are shed. Default DegradeAdaptive. An unknown policy is a
	// Validate error.
	Policy DegradePolicy `json:"policy,omitempty" yaml:"policy,omitempty"`
	// HighWatermark is the fill share (0..1] that enters degraded (the switching policies).
	// Default 0.75. Over 1, or not above LowWatermark, is a Validate error.
	HighWatermark float64 `json:"high_watermark,omitempty" yaml:"high_watermark,omitempty"`
	// LowWatermark is the fill share [0..HighWatermark) to get back under. Default 0.25.
	// Negative is a Validate error.
	LowWatermark float64 `json:"low_watermark,omitempty" yaml:"low_watermark,omitempty"`
	// Hold is how long the stream must stay calm before leaving degraded. Default 5s.
	// Under MinInterval is a Validate error and means the default; over MaxInterval, a
	// Validate error and means MaxInterval.
	Hold time.Duration `json:"hold,omitempty" yaml:"hold,omitempty"`
	// DisconnectedAfter, if set, is how long the sender may be disconnected before the
	// stream degrades, whatever its buffer holds (the switching policies). Default 0: off,
	// so that an outage alone sheds nothing the budget can still hold. Outside
	// [MinInterval, MaxInterval], a Validate error, as Hold.
	DisconnectedAfter time.Duration `json:"disconnected_after,omitempty" yaml:"disconnected_after,omitempty"`
	// SampleInterval is DegradeSample's window: SampleFirst entries per message in each.
	// Default 1s. Outside [MinInterval, MaxInterval], a Validate error, as Hold.
	SampleInterval time.Duration `json:"sample_interval,omitempty" yaml:"sample_interval,omitempty"`
	// SampleFirst is how many entries per message DegradeSample keeps in each
	// SampleInterval. Default 10. Negative, or 0 set in a file, is an error.
	SampleFirst int `json:"sample_first,omitempty" yaml:"sample_first,omitempty"`
	// SampleThereafter is DegradeSample's 1 in N kept past SampleFirst. Default 100.
	// Negative is a Validate error.
	SampleThereafter int `json:"sample_thereafter,omitempty" yaml:"sample_thereafter,omitempty"`
	// WeightKey, if set, is a record key that DegradeAdaptive adds to every info entry: how
	// many entries of its message and level it stands for (itself, and those shed or
	// dropped since the last one kept), so that the receiving side can sum the weights to
	// count what was logged (docs/configuration.md, "Degrade"). Default "" (off). It should
	// not be a key the entries carry. Other policies ignore it.
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
// It is the write path's admission and the clock's controller of one kind of policy
// (internal/degrade), and the Gate that shows their state.
type infoPolicy struct {
	gate       *degrade.Gate
	admission  degrade.Admission
	controller degrade.Controller
	// adaptive is DegradeAdaptive's admission and controller, which also counts the room
	// left, weighs entries and has shed callers yield; nil under the switching kinds,
	// which do none of that.
	adaptive *degrade.Adaptive
	clock    zapcore.Clock              // the time of a transition on a shed entry
	read     func() degrade.Observation // the stream, as its steps read it
	kickAt   float64                    // a fill share that wakes the clock at once, read without a lock
	kick     chan struct{}              // wakes the clock when the fill reaches kickAt
}

var _ stream.Policy = (*infoPolicy)(nil)

// newInfoPolicy returns the info stream's policy under cfg, whose every field is set
// (withDefaults). observe reads the stream for each step, of the clock (step) and of a
// logging call that finds the clock late (DegradeAdaptive: due on clock); onChange, if not nil, reports
// each transition, before any entry is counted as shed in the new state.
func newInfoPolicy(cfg DegradeConfig, clock zapcore.Clock, observe func() degrade.Observation,
	onChange func(now time.Time, degraded bool)) *infoPolicy {
	p := &infoPolicy{gate: degrade.NewGate(onChange), clock: clock, read: observe, kick: make(chan struct{}, 1)}
	if cfg.Policy == DegradeAdaptive {
		p.adaptive = degrade.NewAdaptive(cfg.LowWatermark, clock, observe)
		p.admission, p.controller, p.kickAt = p.adaptive, p.adaptive, p.adaptive.CountsFrom()
		return p
	}
	sw := degrade.NewSwitch(degrade.SwitchConfig{
		Kind: switchKinds[cfg.Policy], High: cfg.HighWatermark, Low: cfg.LowWatermark, Hold: cfg.Hold,
		DisconnectedAfter: cfg.DisconnectedAfter, SampleInterval: cfg.SampleInterval,
		SampleFirst: cfg.SampleFirst, SampleThereafter: cfg.SampleThereafter,
	})
	p.admission, p.controller, p.kickAt = sw, sw, cfg.HighWatermark
	return p
}

// switchKinds are the switching policies' kinds in internal/degrade.
var switchKinds = [...]degrade.Kind{
	DegradeSample: degrade.Sample, DegradeKeepWarn: degrade.KeepWarn, DegradeDropAll: degrade.DropAll, DegradeOff: degrade.Off,
}

// shedReasons are the drop reasons of admission's verdicts.
var shedReasons = [...]outcome.Reason{degrade.Dropped: outcome.Degraded, degrade.Sampled: outcome.Sampled, degrade.Thinned: outcome.Sampled}

// checking reports whether Check must ask the sink's admit (sink.consults): one atomic load.
func (p *infoPolicy) checking() bool { return p.gate.Checking() }

// shed has the stream shown degraded, as the verdict v (not Keep) says, before the entry is
// counted, and returns the reason it is counted under.
func (p *infoPolicy) shed(v degrade.Verdict) outcome.Reason {
	p.gate.Shed(v, p.clock)
	return shedReasons[v]
}

// yields reports whether a caller whose entry was shed should yield the processor
// (degrade.Adaptive.Yields).
func (p *infoPolicy) yields() bool { return p.adaptive != nil && p.adaptive.Yields() }

// step steps the policy's kind on the clock, which reads the stream through read, and moves
// the degraded state.
func (p *infoPolicy) step() {
	st := p.controller.Step(p.read)
	p.gate.Apply(st.Now, st)
}

// stepEvery is how often the clock should observe: every degrade.AdaptiveStep while the
// adaptive shedder counts keys, else every slow.
func (p *infoPolicy) stepEvery(slow time.Duration) time.Duration {
	if p.adaptive != nil && p.adaptive.Counting() {
		return degrade.AdaptiveStep
	}
	return slow
}

// weight is the Degrade.WeightKey value of a kept entry (DegradeAdaptive only); unweigh
// gives back the weight of an entry that was weighed and then not kept after all.
func (p *infoPolicy) weight(level zapcore.Level, tag uint16, msg string) uint32 {
	return p.adaptive.Weight(level, tag, msg)
}

func (p *infoPolicy) unweigh(level zapcore.Level, tag uint16, msg string, w uint32) {
	p.adaptive.Unweigh(level, tag, msg, w)
}

func (*infoPolicy) Written() {}

func (p *infoPolicy) Freed(n int) {
	if p.adaptive != nil {
		p.adaptive.Freed(n)
	}
}

// Reserves while the shedder counts keys against the room left (the adaptive policy): the
// reserve is then the margin it keeps for the keys it keeps whole, in batches, not only in
// its count, which partly filled batches sealed between two steps can outrun.
func (p *infoPolicy) Reserves() bool { return p.adaptive != nil && p.gate.Checking() }

// KeepsWhole: a key the adaptive shedder neither thins nor counts as a flood; every key
// under the switching kinds.
func (p *infoPolicy) KeepsWhole(level zapcore.Level, tag uint16, msg string) bool {
	return p.adaptive == nil || p.adaptive.KeepsWhole(level, tag, msg)
}

// RoomAdmitted while the adaptive shedder counts keys: what it admits fits the room left.
func (p *infoPolicy) RoomAdmitted() bool { return p.Reserves() }

// Wakes once the queue alone passes kickAt while Check does not consult the policy yet;
// WakeWith then wakes the policy and the clock early, so that it reads the whole fill at
// once rather than at its next tick. taken is the entries the stream has taken in (for the
// adaptive shedder's count of what it admitted and the stream has not taken in yet).
func (p *infoPolicy) Wakes(queuedShare float64) bool {
	return queuedShare >= p.kickAt && !p.gate.Checking()
}

func (p *infoPolicy) WakeWith(taken uint64) {
	p.wake(taken)
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// wake makes Check consult the adaptive shedder at once, counting keys, rather than at the
// clock's next observation; the switching kinds wait for the clock.
func (p *infoPolicy) wake(taken uint64) {
	if p.adaptive != nil {
		p.adaptive.Wake(taken)
		p.gate.StartChecking()
	}
}

func (p *infoPolicy) Report(st *stream.Stats) {
	st.Degraded = p.gate.Degraded()
	st.DegradeTransitions = p.gate.Transitions()
	st.AdmitRatio, st.Capacity = 1, 0
	if p.adaptive != nil {
		st.AdmitRatio, st.Capacity = p.adaptive.Gauges()
	}
}
