// Package shed decides which entries a stream keeps when its callers offer more than its
// sender can deliver: the adaptive degrade policy. It imports no other fluentcore package
// (see ARCHITECTURE.md).
//
// The controller is a budget refilled at the measured delivery rate, scaled by how full
// the buffer is. While the buffer holds a backlog the sender is busy all the time, so what
// it delivers is what the pipeline can carry; measured per delivery (over the span since
// the one before) and smoothed, that is Capacity. Under the target fill everything is
// admitted: the buffer is there to absorb the unevenness of delivery, and a load under
// capacity never fills it that far. Over the target, each step's budget is Capacity ×
// step × g(fill), with g 1 at the target and 0 at Full, and never more than the buffer has
// room for: admission follows delivery, less the excess that pushed the fill up, so the
// fill settles near the target, the sender never starves and the buffer does not
// overflow. A proportional rule on the fill, on top of the measured rate, rather than
// AIMD: the budget starts right, not after a sawtooth of losses, and the fill term only
// corrects the error of the measurement (TestConvergesToACapacityStep).
//
// The budget is shared out fairly (max-min, "water filling") over keys, a key being a
// message at a level, counted per step in a fixed table: a rare key (seen once in the
// step, or at no more than rareRate a second) is kept whole whatever the budget, the keys
// offering less than an equal share are kept whole, and the rest are thinned to the same
// number each, so the most frequent keys lose the most. Levels are served in order,
// highest first: Warn is thinned only once Info and Debug have nothing left, and Info only
// after Debug.
// Honeycomb's dynsampler-go gives each key a rate from its share of past traffic, for a
// fixed goal rate; here the goal is the measured capacity, moved every step, and a key's
// rate follows it.
//
// Which entries of a thinned key are kept is systematic, not random: with keep ratio r
// the n-th entry is kept when ⌊n·r⌋ moves, so exactly the ratio is kept, spread evenly,
// with no random number on the caller's path. Keep is one atomic load while the buffer is
// calm (under half the low mark, or under the low mark for Calm), and a hash of the
// message, an atomic add and two loads otherwise.
//
// The budget is set once a step, and a flood that grows within a step can outrun it. So
// the caller also says when its buffer is down to a last reserve (tight): then only a
// key's first entry in the step is kept, and what room is left goes to rare keys, not to
// the flood (TestReserveKeepsRareKeysWhenStepsLag).
package shed

import (
	"math"
	"slices"
	"sync/atomic"
	"time"
)

// Slots is the size of the key table. Keys that hash alike share a slot, and are then
// thinned as one key.
const Slots = 4096

// one is a keep ratio of 1 in the table's fixed point.
const one = 1 << 16

// A key is rare in a step if it offered one entry, or no more than rareRate a second.
const rareRate = 200

// minStep is the shortest step counted on its own; quietAfter how long a key must offer
// nothing before its keep ratio is reset to 1.
const (
	minStep    = 2 * time.Millisecond
	quietAfter = 100 * time.Millisecond
)

// Config sets the controller's marks, as shares of the buffer budget (0..1).
type Config struct {
	// Low is the fill under which the stream is calm: keys are counted from half of it
	// on, and no longer once the fill has stayed at or under it for Calm.
	Low    float64
	Target float64 // everything is admitted up to it, and the fill is held near it; above Low, below Full
	// Full is the fill at which the budget is 0: a stream's buffer is in batches, and
	// the last one is rarely filled to the brim, so it is full before 1.
	Full float64
	// Calm is how long the buffer must stay at or below Low, connected, before keys stop
	// being counted (Keep is one atomic load again).
	Calm time.Duration
}

// Shedder is one stream's adaptive admission. Keep and Weight are safe for concurrent use
// and allocation-free; Step must be called from one goroutine at a time.
type Shedder struct {
	cfg      Config
	counting atomic.Bool
	slots    [Slots]slot

	// Read concurrently, written by Step.
	capacity  atomic.Uint64 // float64 bits: entries/s
	keepRatio atomic.Uint64 // float64 bits: kept/offered over the last step
	shedding  atomic.Bool   // the last step thinned some key

	// Step's own.
	last          time.Time
	lastDelivered uint64
	lastProgress  time.Time // the last step in which the sender delivered, or had no backlog
	hadBacklog    bool      // the fill was over Low at the last step
	calmSince     time.Time
	seen          [Slots]int64 // unix nanos of the last step each slot was offered anything
	keys          []key        // scratch: the keys offered in the last step
}

type slot struct {
	total atomic.Uint64 // entries offered, ever: the systematic sampler's phase
	base  atomic.Uint64 // total at the last step
	ratio atomic.Uint32 // keep ratio, one = keep all
	level atomic.Int32  // the level of the key last counted here
	shed  atomic.Uint64 // entries shed since one of the slot's was last weighed (Weight)
}

type key struct {
	slot  int
	level int32
	count uint64
}

// New returns a Shedder that admits everything until Step sees a backlog.
func New(cfg Config) *Shedder {
	s := &Shedder{cfg: cfg, keys: make([]key, 0, Slots)}
	for i := range s.slots {
		s.slots[i].ratio.Store(one)
	}
	s.keepRatio.Store(math.Float64bits(1))
	return s
}

// Keep reports whether an entry of msg at level is kept. Higher levels are kept first.
// tight says the buffer is down to its reserve: then a key's second and later entries in
// the step are not kept, whatever its keep ratio.
func (s *Shedder) Keep(level int8, msg string, tight bool) bool {
	if !s.counting.Load() {
		return true
	}
	sl := &s.slots[slotOf(level, msg)]
	n := sl.total.Add(1)
	if sl.level.Load() != int32(level) {
		sl.level.Store(int32(level))
	}
	if tight && n-sl.base.Load() > 1 {
		sl.shed.Add(1)
		return false
	}
	r := uint64(sl.ratio.Load())
	if r >= one || (n*r)>>16 != ((n-1)*r)>>16 {
		return true
	}
	sl.shed.Add(1)
	return false
}

// Weight is how many entries of msg at level a kept entry stands for: itself, and the
// entries of its key shed since the key's last weighed entry, which it takes over. So the
// weights of what is kept add up to what was offered, whatever the keep ratio did between
// two kept entries (a step's new ratio, a tight buffer's reserve); only the entries shed
// after the last kept one are not counted yet. Keys that share a slot share that count.
// Call it once per kept entry.
func (s *Shedder) Weight(level int8, msg string) uint32 {
	sl := &s.slots[slotOf(level, msg)]
	if sl.shed.Load() == 0 { // kept whole: no write to the slot
		return 1
	}
	return uint32(min(1+sl.shed.Swap(0), math.MaxUint32))
}

// CountsFrom is the fill from which keys are counted: half the low mark, so that the
// counts are there when the fill reaches it (a flood crosses the rest within a step).
// Whoever wakes the shedder (Wake) on a fill uses it too.
func (s *Shedder) CountsFrom() float64 { return s.cfg.Low / 2 }

// Counting reports whether Keep is counting keys (the buffer has been above the low mark
// recently): the caller then calls Keep; otherwise it may skip it.
func (s *Shedder) Counting() bool { return s.counting.Load() }

// Shedding reports whether the last step thinned any key.
func (s *Shedder) Shedding() bool { return s.shedding.Load() }

// Capacity is the delivery rate measured while the buffer held a backlog, in entries per
// second, smoothed; 0 until measured.
func (s *Shedder) Capacity() float64 { return math.Float64frombits(s.capacity.Load()) }

// KeepRatio is the share of the entries offered in the last step that the budget let
// through (1 when nothing was thinned).
func (s *Shedder) KeepRatio() float64 { return math.Float64frombits(s.keepRatio.Load()) }

// capacityTau smooths the measured delivery rate. Delivery comes in bursts: a batch holds
// hundreds of entries, and without acks a write completes when the kernel takes it, so
// against a slow receiver the socket buffers (megabytes on loopback) fill at once and then
// take nothing until the receiver has freed half of them, for a second or more. Each
// delivery is measured over the span since the one before, and the spans are averaged
// with this time constant. A wrong estimate costs fill, not loss: the fill term of the
// budget corrects it, and at a full buffer the budget is 0 whatever the estimate.
const capacityTau = 500 * time.Millisecond

// Observation is what Step reads from the stream.
type Observation struct {
	Now       time.Time
	Fill      float64 // share of the buffer budget in use
	Room      float64 // entries the buffer can still take before Config.Full
	Delivered uint64  // entries the sender has delivered so far
	Connected bool    // the sender is delivering: false while its sends fail (an outage)
}

// Step moves the controller to o.Now.
func (s *Shedder) Step(o Observation) {
	now := o.Now
	dt := now.Sub(s.last).Seconds()
	first := s.last.IsZero()
	if !first && dt < minStep.Seconds() {
		return // too short to count on: the next step takes it in
	}
	s.last = now
	got := o.Delivered - s.lastDelivered
	s.lastDelivered = o.Delivered
	if first || dt <= 0 {
		return
	}
	backlog := o.Fill > s.cfg.Low
	if s.lastProgress.IsZero() {
		s.lastProgress = now
	}
	if got > 0 && s.hadBacklog && o.Connected {
		// The sender had work since it last delivered: what it delivered over that span
		// is what it can. (Per delivery, not per step: a step sees a whole batch or none.)
		since := now.Sub(s.lastProgress).Seconds()
		rate := float64(got) / since
		c := s.Capacity()
		if c == 0 {
			c = rate
		} else {
			c += (1 - math.Exp(-since/capacityTau.Seconds())) * (rate - c)
		}
		s.capacity.Store(math.Float64bits(c))
	}
	if got > 0 || !backlog {
		s.lastProgress = now
	}
	s.hadBacklog = backlog

	if !s.counting.Load() {
		if o.Fill > s.CountsFrom() {
			s.startCounting()
		}
		return
	}
	offered := s.gather()

	switch {
	case !backlog:
		// Under the low mark: admit all, and stop counting once it has been calm a while.
		s.admitAll()
		if s.calmSince.IsZero() {
			s.calmSince = now
		}
		if now.Sub(s.calmSince) >= s.cfg.Calm {
			s.counting.Store(false)
		}
		return
	case !o.Connected:
		// An outage: nothing drains, so a budget from the delivery rate would shed
		// everything the buffer could still hold. Admit; what does not fit is counted
		// where it is dropped.
		s.admitAll()
		s.calmSince = time.Time{}
		return
	}
	s.calmSince = time.Time{}
	if o.Fill <= s.cfg.Target {
		// Under the target the buffer is doing its job, absorbing the unevenness of
		// delivery (without acks a slow receiver takes whole socket buffers, then nothing
		// for a while): a load under capacity is admitted whole, however it comes.
		s.admitAll()
		return
	}
	var budget float64
	if c := s.Capacity(); c > 0 {
		// What the sender takes this step, scaled by the fill, and never more than the
		// buffer can hold on top of that.
		budget = min(c*dt*s.gain(o.Fill), c*dt+max(0, o.Room))
	} else {
		// Nothing measured yet (the connection is still being made, or its first batch is
		// on its way): the room left up to Full, and no more.
		budget = max(0, o.Room)
	}
	if float64(offered) <= budget {
		s.admitAll()
		return
	}
	kept := s.share(budget, dt)
	s.keepRatio.Store(math.Float64bits(kept / float64(offered)))
	s.shedding.Store(true)
}

// gain is g(fill) above the target: 1 there, 0 at Full, linear in between.
func (s *Shedder) gain(fill float64) float64 {
	t, full := s.cfg.Target, s.cfg.Full
	return min(1, max(0, (full-fill)/(full-t)))
}

func (s *Shedder) startCounting() {
	s.calmSince = time.Time{}
	s.counting.Store(true)
}

// Wake makes Keep count keys from now on, before the next Step: for a stream whose fill
// has just jumped, so that the step that sees it has counts to share the budget by. Safe
// for concurrent use. (No snapshot is needed: while Keep does not count, the totals do not
// move, so the next Step counts from the last one.)
func (s *Shedder) Wake() { s.counting.Store(true) }

// gather collects the keys offered since the last step into s.keys and returns how many
// entries they offered.
func (s *Shedder) gather() uint64 {
	s.keys = s.keys[:0]
	var offered uint64
	for i := range s.slots {
		sl := &s.slots[i]
		t := sl.total.Load()
		c := t - sl.base.Load()
		if c == 0 {
			// A key that has been quiet for a while comes back whole. Not after one quiet
			// step: its callers may only have been off the CPU.
			if sl.ratio.Load() != one && s.last.UnixNano()-s.seen[i] >= int64(quietAfter) {
				sl.ratio.Store(one)
			}
			continue
		}
		sl.base.Store(t)
		s.seen[i] = s.last.UnixNano()
		s.keys = append(s.keys, key{slot: i, level: sl.level.Load(), count: c})
		offered += c
	}
	return offered
}

func (s *Shedder) admitAll() {
	for _, k := range s.keys {
		s.slots[k.slot].ratio.Store(one)
	}
	s.keepRatio.Store(math.Float64bits(1))
	s.shedding.Store(false)
}

// share sets each offered key's keep ratio so that the keys' kept entries add up to
// budget: levels highest first, and within the level that runs out, max-min fair. It
// returns the entries kept.
func (s *Shedder) share(budget, dt float64) float64 {
	rare := func(k key) bool { return k.count == 1 || float64(k.count) <= rareRate*dt }
	slices.SortFunc(s.keys, func(a, b key) int {
		if a.level != b.level {
			return int(b.level - a.level) // higher levels first
		}
		switch {
		case a.count < b.count:
			return -1
		case a.count > b.count:
			return 1
		}
		return a.slot - b.slot
	})
	// Rare keys (see rareRate) are kept whole whatever the budget:
	// a step is milliseconds, so they are rare indeed, and a budget shared out to the
	// last entry would otherwise drop them whenever the buffer is near full.
	left, kept := budget, 0.0
	for _, k := range s.keys {
		if rare(k) {
			left -= float64(k.count)
			kept += float64(k.count)
		}
	}
	left = max(0, left)
	for start := 0; start < len(s.keys); {
		end := start
		var sum uint64
		for end < len(s.keys) && s.keys[end].level == s.keys[start].level {
			sum += s.keys[end].count
			end++
		}
		level := s.keys[start:end]
		for len(level) > 0 && rare(level[0]) { // sorted by count: first
			s.slots[level[0].slot].ratio.Store(one)
			sum -= level[0].count
			level = level[1:]
		}
		if float64(sum) <= left {
			for _, k := range level {
				s.slots[k.slot].ratio.Store(one)
			}
			left -= float64(sum)
			kept += float64(sum)
			start = end
			continue
		}
		// Water filling: ascending counts, each key keeps all it offered while that is
		// no more than an equal share of what is left; the rest keep the equal share.
		for i, k := range level {
			rest := float64(len(level) - i)
			if float64(k.count)*rest <= left {
				s.slots[k.slot].ratio.Store(one)
				left -= float64(k.count)
				kept += float64(k.count)
				continue
			}
			share := left / rest
			for _, k := range level[i:] {
				s.slots[k.slot].ratio.Store(ratioOf(share / float64(k.count)))
				kept += share
			}
			break
		}
		for _, k := range s.keys[end:] {
			r := uint32(0) // lower levels wait until this one is whole
			if rare(k) {
				r = one
			}
			s.slots[k.slot].ratio.Store(r)
		}
		break
	}
	return kept
}

func ratioOf(r float64) uint32 {
	if r >= 1 {
		return one
	}
	return uint32(r * one)
}

// slotOf hashes a key (the level and the message) to its slot.
func slotOf(level int8, msg string) uint32 { return uint32(Hash(level, msg) % Slots) }

// Hash hashes a message at a level: eight bytes of the message at a time, multiplied and
// folded, then mixed once more (splitmix64's finisher). It is on the caller's path, for
// this package and for DegradeSample, so it reads words, not bytes (bench/README.md,
// "Figures that used to stand in doc comments", compares it with FNV-1a). Safe for
// concurrent use; it never fails.
func Hash(level int8, msg string) uint64 {
	const m = 0x9E3779B97F4A7C15
	h := (uint64(uint8(level)) + 1) * m
	for len(msg) >= 8 {
		// The compiler makes this one 8-byte load.
		w := uint64(msg[0]) | uint64(msg[1])<<8 | uint64(msg[2])<<16 | uint64(msg[3])<<24 |
			uint64(msg[4])<<32 | uint64(msg[5])<<40 | uint64(msg[6])<<48 | uint64(msg[7])<<56
		h = (h ^ w) * m
		h ^= h >> 32
		msg = msg[8:]
	}
	for i := 0; i < len(msg); i++ {
		h = (h ^ uint64(msg[i])) * m
	}
	h ^= h >> 29
	h *= 0xBF58476D1CE4E5B9
	h ^= h >> 32
	return h
}
