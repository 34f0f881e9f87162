package fluentcore

// The switching kinds of degrade policy (DegradeSample, DegradeKeepWarn, DegradeDropAll, and
// DegradeOff, which never switches): a state machine on the buffer's fill enters and leaves
// the degraded state, and while degraded Check drops by the policy.

import (
	"sync/atomic"
	"time"

	"github.com/fluentcore/fluentcore/internal/shed"
	"go.uber.org/zap/zapcore"
)

// switchRule is the shedRule of the switching policies. observe is called by one goroutine
// at a time (the sink's clock); admit is safe for concurrent use.
type switchRule struct {
	sm      degrader
	sampler *sampler
}

func newSwitchRule(cfg DegradeConfig) *switchRule {
	return &switchRule{sm: degrader{cfg: cfg}, sampler: newSampler(cfg.SampleInterval, cfg.SampleFirst, cfg.SampleThereafter)}
}

// observe runs the state machine: Check consults the policy exactly while degraded.
func (r *switchRule) observe(o degradeObservation) (degraded, checking bool) {
	r.sm.observe(o.now, float64(o.buffered)/float64(o.limit), o.disconnectedFor)
	return r.sm.degraded, r.sm.degraded
}

func (r *switchRule) admit(level zapcore.Level, _ uint16, msg string, at int64) (bool, dropReason) {
	switch r.sm.cfg.Policy {
	case DegradeDropAll:
		return false, dropDegraded
	case DegradeKeepWarn:
		if level >= zapcore.WarnLevel {
			return true, 0
		}
		return false, dropDegraded
	case DegradeSample:
		if r.sampler.keep(at, msg) {
			return true, 0
		}
		return false, dropSampled
	}
	return true, 0
}

// The switching policies step only on the sink's clock, weigh nothing and measure nothing.
func (*switchRule) stepDue(int64) bool                            { return false }
func (*switchRule) beginStep(time.Time) bool                      { return false }
func (*switchRule) endStep(degradeObservation)                    {}
func (*switchRule) wake(uint64) bool                              { return false }
func (*switchRule) fast() bool                                    { return false }
func (*switchRule) yields() bool                                  { return false }
func (*switchRule) weight(zapcore.Level, uint16, string) uint32   { return 1 }
func (*switchRule) freed(int)                                     {}
func (*switchRule) keepsWhole(zapcore.Level, uint16, string) bool { return true }
func (*switchRule) countsRoom() bool                              { return false }
func (*switchRule) unweigh(zapcore.Level, uint16, string, uint32) {}
func (*switchRule) gauges() (admitRatio, capacity float64)        { return 1, 0 }
func (r *switchRule) kickAt() float64                             { return r.sm.cfg.HighWatermark }

// shedAt: the state machine alone enters the degraded state, before Check consults it.
func (*switchRule) shedAt(int64, zapcore.Clock) bool { return false }

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
