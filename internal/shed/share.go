package shed

import (
	"math"
	"slices"
)

// This file is how a step shares its budget and its delivery over the keys it counted
// (s.keys): the keep ratios, and the flood marks.

// A key is rare in a step if it offered one entry, or no more than rareRate a second over
// the step or the time since it was last offered (at most quietAfter), whichever is longer.
const rareRate = 200

// budget is how many entries a step may admit: what the sender takes in a step, by the
// higher of Capacity × dt and what it took in the last step (got), plus the room up to
// Full, which past Full is negative; at least none. Everything within it would have found
// room. What the sender took counts when it is more than Capacity says: a socket that takes
// a burst at once frees the room at once, and the allowance, not the ratios, decides how
// much of it is used. The room's overshoot past Full comes off, so that a Capacity
// measured too high (the receiver just slowed down) is corrected by the fill within a step,
// in the margin, before the buffer overflows.
func budget(capacity, dt float64, got uint64, room float64) float64 {
	return max(0, max(capacity*dt, float64(got))+room)
}

// delivery is what the flood marks are shared from, entries a step: the lower of what the
// sender took in the last step (got) and Capacity × dt. Either alone misleads: the
// estimate lags a receiver that slows down (it is smoothed), and a flood under a stale
// estimate would count as within its share and eat the margin; a step's take is bursty (a
// socket that takes a batch at once), and a flood under one large take would too. At least
// a floor: the margin spread over the steps it must last (roomySteps), so that a step in
// which the sender took nothing (a full socket, a first connection, an ack awaited) does
// not make a steady Warn or a rare message a flood; but once measured, the floor is never
// more than the sender has been taking: against a slow receiver the margin alone can be
// several times its rate, and a flood under it would count as within its share and take the
// margin whole. What the sender has been taking is Capacity's recent peak, not Capacity:
// the first delivery after a pause or an outage is measured over all of it, and a floor
// that followed Capacity down would make a steady Warn a flood as the sender catches up.
func (s *Shedder) delivery(got uint64, dt, margin float64) float64 {
	d, floor := float64(got), margin/roomySteps
	if c := s.Capacity(); c > 0 {
		d = min(d, c*dt)
		floor = min(floor, s.capacityPeak*dt)
	}
	return max(d, floor)
}

// markFloods marks each offered key that a fair share of delivery (entries a step) alone
// would thin, and unmarks the others.
func (s *Shedder) markFloods(offered uint64, delivery, dt float64) {
	if float64(offered) <= delivery {
		for _, k := range s.keys {
			s.markFlood(k.slot, one)
		}
		return
	}
	s.share(delivery, dt, s.markFlood)
}

// markFlood marks a key over its share (r < one) as a flood at once, and unmarks it only
// once it has stayed within its share for quietAfter: a flood whose callers were off the
// CPU for a step offers little in it, and unmarked then it would take the margin whole in
// the next. A key over the floor alone (a step in which the sender took nothing) is held
// too (bench/README.md, "A flood's mark held only from a step with a delivery").
func (s *Shedder) markFlood(slot int, r uint32) {
	fl := &s.slots[slot].flood
	at := s.stepAt.UnixNano()
	if r < one {
		s.floodAt[slot] = at
		if !fl.Load() {
			fl.Store(true)
		}
		return
	}
	if fl.Load() && at-s.floodAt[slot] >= int64(quietAfter) {
		fl.Store(false)
	}
}

// thin sets a key's keep ratio from the step's budget, but never thins a key that is not a
// flood: a step that saw no delivery with the buffer past Full has no budget at all, yet
// such a key's entries (a steady Warn under an Info flood) are what the margin is for, and
// the allowance alone, the room actually left, may stop them.
func (s *Shedder) thin(slot int, r uint32) {
	if !s.slots[slot].flood.Load() {
		r = one
	}
	s.setRatio(slot, r)
}

func (s *Shedder) setRatio(slot int, r uint32) { s.slots[slot].ratio.Store(r) }

// admitAll sets every offered key's keep ratio to one.
func (s *Shedder) admitAll() {
	for _, k := range s.keys {
		s.setRatio(k.slot, one)
	}
	s.keepRatio.Store(math.Float64bits(1))
}

// share gives each offered key a keep ratio (to set) so that the keys' kept entries add up
// to budget: rare keys whole whatever the budget, then levels highest first, each whole
// while the budget lasts, and within the level that runs out, max-min fair; the levels
// below it get nothing but their rare keys.
func (s *Shedder) share(budget, dt float64, set func(slot int, r uint32)) {
	// A key's rate is taken over the time since it was last offered, not over the step
	// alone: a rare key whose callers fell behind (a ticker's two ticks at once) offers two
	// entries in one step, and a step's count would make it a flood, thinned, and its next
	// burst shed whole.
	isRare := func(k key) bool { return k.count == 1 || float64(k.count) <= rareRate*max(dt, k.span.Seconds()) }
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
	// Rare keys are kept whole whatever the budget: a step is milliseconds, so they are
	// rare indeed, and a budget shared out to the last entry would otherwise drop them
	// whenever the buffer is near full.
	remaining := budget
	for _, k := range s.keys {
		if isRare(k) {
			remaining -= float64(k.count)
		}
	}
	remaining = max(0, remaining)
	for start := 0; start < len(s.keys); {
		end := start
		var sum uint64
		for end < len(s.keys) && s.keys[end].level == s.keys[start].level {
			sum += s.keys[end].count
			end++
		}
		level := s.keys[start:end]
		for len(level) > 0 && isRare(level[0]) { // sorted by count: first
			set(level[0].slot, one)
			sum -= level[0].count
			level = level[1:]
		}
		if float64(sum) <= remaining {
			for _, k := range level {
				set(k.slot, one)
			}
			remaining -= float64(sum)
			start = end
			continue
		}
		// Water filling: ascending counts, each key keeps all it offered while that is
		// no more than an equal share of what remains; the rest keep the equal share.
		for i, k := range level {
			rest := float64(len(level) - i)
			if float64(k.count)*rest <= remaining {
				set(k.slot, one)
				remaining -= float64(k.count)
				continue
			}
			share := remaining / rest
			for _, k := range level[i:] {
				set(k.slot, ratioOf(share/float64(k.count)))
			}
			break
		}
		for _, k := range s.keys[end:] {
			r := uint32(0) // lower levels wait until this one is whole
			if isRare(k) {
				r = one
			}
			set(k.slot, r)
		}
		break
	}
}

// ratioOf is a share of a key's entries (at most 1) as a keep ratio.
func ratioOf(r float64) uint32 {
	if r >= 1 {
		return one
	}
	return uint32(r * one)
}
