package fluentcore

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap/zapcore"
)

// DegradePolicy says which info-stream entries are kept while the info stream is degraded.
// The err stream never degrades.
type DegradePolicy int

const (
	// DegradeSample keeps the first Degrade.SampleFirst entries per message per
	// Degrade.SampleInterval and then one in Degrade.SampleThereafter, like zap's sampler.
	// It is the default.
	DegradeSample DegradePolicy = iota
	// DegradeKeepWarn keeps Warn entries and drops Debug and Info.
	DegradeKeepWarn
	// DegradeDropAll drops every info-stream entry.
	DegradeDropAll
	// DegradeOff never degrades: info entries are only dropped when the buffers are full.
	DegradeOff
)

// String returns the policy's name.
func (p DegradePolicy) String() string {
	switch p {
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

// UnmarshalText reads a policy from its name ("sample", "keep_warn", "drop_all", "off"), for
// configuration files and the environment. An unknown name is an error.
func (p *DegradePolicy) UnmarshalText(b []byte) error {
	for q := DegradeSample; q <= DegradeOff; q++ {
		if q.String() == string(b) {
			*p = q
			return nil
		}
	}
	return fmt.Errorf("unknown degrade policy %q (want sample, keep_warn, drop_all or off)", b)
}

// MarshalText writes the policy's name.
func (p DegradePolicy) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// DegradeConfig tunes when the info stream degrades and what it keeps meanwhile. The zero
// value gives the documented defaults. The info stream enters the degraded state when the
// share of its buffer budget in use (bytes buffered / Info.BufferBytes) reaches
// HighWatermark, or, if DisconnectedAfter is set, when its sender has been disconnected that
// long; it leaves only after the share has stayed at or below
// LowWatermark, connected, for Hold. The gap between the watermarks and the hold time keep it
// from flapping.
type DegradeConfig struct {
	// Policy is what is kept while degraded. Default DegradeSample.
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
	slot := &s.slots[fnv32a(msg)%sampleSlots]
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

func fnv32a(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}

// infoPolicy is the info stream's: an entry that cannot be buffered is dropped and
// counted by reason, and under backpressure Check sheds entries before they are encoded.
type infoPolicy struct {
	degrade *degradeControl
	kick    chan struct{} // wakes the clock when the fill reaches the high watermark
}

// degradeControl wraps the state machine for the info stream: the sink's clock goroutine
// feeds observations; Core.Check reads the state with one atomic load.
type degradeControl struct {
	active      atomic.Bool
	transitions atomic.Uint64
	sampler     *sampler
	high        float64 // HighWatermark, read without the lock

	mu sync.Mutex
	sm degrader
}

// newDegradeControl returns the control for cfg, whose every field is set (withDefaults).
func newDegradeControl(cfg DegradeConfig) *degradeControl {
	return &degradeControl{
		sm:      degrader{cfg: cfg},
		sampler: newSampler(cfg.SampleInterval, cfg.SampleFirst, cfg.SampleThereafter),
		high:    cfg.HighWatermark,
	}
}

// overHigh reports whether a fill share calls for an observation now: the stream is not
// degraded and the fill has reached the high watermark.
func (c *degradeControl) overHigh(fill float64) bool {
	return fill >= c.high && !c.active.Load()
}

// observe updates the state; it returns whether it changed and the new state.
func (c *degradeControl) observe(now time.Time, fill float64, disconnectedFor time.Duration) (changed, degraded bool) {
	c.mu.Lock()
	changed = c.sm.observe(now, fill, disconnectedFor)
	degraded = c.sm.degraded
	c.mu.Unlock()
	if changed {
		c.active.Store(degraded)
		c.transitions.Add(1)
	}
	return changed, degraded
}

// admit decides, while degraded, whether an info entry is kept; if not it gives the reason.
func (c *degradeControl) admit(ent zapcore.Entry) (bool, dropReason) {
	switch c.sm.cfg.Policy {
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
