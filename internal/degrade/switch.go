package degrade

import (
	"sync/atomic"
	"time"

	"github.com/fluentcore/fluentcore/internal/shed"
	"go.uber.org/zap/zapcore"
)

// Kind is a switching kind of policy: what Admit drops while the stream is degraded.
type Kind uint8

const (
	// Off never degrades: Admit keeps everything.
	Off Kind = iota
	// Sample keeps the first SampleFirst entries per message per SampleInterval, then one
	// in SampleThereafter.
	Sample
	// KeepWarn keeps Warn and above, drops Debug and Info.
	KeepWarn
	// DropAll drops every entry.
	DropAll
)

// SwitchConfig sets a switching kind: every field set.
type SwitchConfig struct {
	Kind Kind
	// High is the fill share that enters the degraded state; Low the share to stay at or
	// under, connected, for Hold before it is left.
	High, Low float64
	Hold      time.Duration
	// DisconnectedAfter, if not 0, is how long the sender may be disconnected before the
	// stream degrades, whatever its fill.
	DisconnectedAfter time.Duration
	// SampleInterval, SampleFirst and SampleThereafter tune Sample.
	SampleInterval                time.Duration
	SampleFirst, SampleThereafter int
}

// Switch is the switching kinds: a state machine on the fill enters and leaves the degraded
// state, and while degraded Check asks Admit, which drops by the kind. Step is called by one
// goroutine at a time; Admit is safe for concurrent use.
type Switch struct {
	sm      degrader
	sampler *sampler
}

// NewSwitch returns the switching kind cfg sets, not degraded.
func NewSwitch(cfg SwitchConfig) *Switch {
	return &Switch{sm: degrader{cfg: cfg}, sampler: newSampler(cfg.SampleInterval, cfg.SampleFirst, cfg.SampleThereafter)}
}

// Step runs the state machine: Check asks Admit exactly while degraded.
func (s *Switch) Step(read func() Observation) State {
	o := read()
	s.sm.observe(o.Now, float64(o.Buffered)/float64(o.Limit), o.DisconnectedFor)
	return State{Now: o.Now, Degraded: s.sm.degraded, Checking: s.sm.degraded}
}

// Admit drops by the kind; Check asks it only while degraded.
func (s *Switch) Admit(level zapcore.Level, _ uint16, msg string, at int64) Verdict {
	switch s.sm.cfg.Kind {
	case DropAll:
		return Dropped
	case KeepWarn:
		if level >= zapcore.WarnLevel {
			return Keep
		}
		return Dropped
	case Sample:
		if s.sampler.keep(at, msg) {
			return Keep
		}
		return Sampled
	}
	return Keep
}

// degrader is the degrade state machine: pure logic, time passed in, not safe for
// concurrent use (the clock steps it).
type degrader struct {
	cfg       SwitchConfig
	degraded  bool
	calmSince time.Time // when the stream last became calm while degraded; zero if not calm
}

// observe feeds one observation — the share of the buffer budget in use and how long the
// sender has been disconnected (0 when connected) — and reports whether the state changed.
func (d *degrader) observe(now time.Time, fill float64, disconnectedFor time.Duration) bool {
	if d.cfg.Kind == Off {
		return false
	}
	if !d.degraded {
		if fill >= d.cfg.High || (d.cfg.DisconnectedAfter > 0 && disconnectedFor >= d.cfg.DisconnectedAfter) {
			d.degraded = true
			d.calmSince = time.Time{}
			return true
		}
		return false
	}
	if fill > d.cfg.Low || disconnectedFor > 0 {
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
