package shed

import "math"

// This file is the callers' side: what the stream asks for each entry (Keep, Whole,
// Weight, Unweigh) and tells as it goes (Freed, Wake). All of it is safe for concurrent
// use, allocation-free, and writes only the entry's own slot, the shared allowance, and
// the slot's bit in Shedder.touched once a step.

// firstFew is how many entries a key kept whole passes in a step once the allowance is
// spent, or as many as it offered in a step lately (slot.recent), if more. A few, not one,
// so that a rare key whose steps come late (a flood keeping the clock and the callers that
// step off the CPU) still passes whole. Its recent count, so that a key kept whole passes
// whole through a step whose allowance was read short: the room is read while writers go
// on, and a batch on its way between the free list and a shard, or back, counts in it a
// step late. The keys kept whole share no more than what the sender delivers in a step
// between them (share), so what they pass this way the sender drains while it delivers;
// the flood is kept out of it.
const firstFew = 4

// leaseChunk is how many of a key's entries a lease of the allowance covers at a time,
// while that leaves the margin whole (take).
const leaseChunk = 32

// Keep reports whether an entry of msg at level, of logger tag tag (0: the stream's
// own), is kept. A key is a message at a level of a tag, so that a flood of one tag's
// message does not thin another tag's entries of the same message; higher levels are kept
// first. An entry is shed if its key's keep ratio leaves it out, or if the allowance has no room for
// it (fits). Call it once per entry the stream is offered, before the stream takes the
// entry in (Observation.Written counts it then). While keys are not counted it is one
// atomic load; otherwise a hash, an atomic add and a few loads (and an atomic or for a
// key's first entry since a step), and near a full buffer a read of the key's lease of the
// allowance, renewed once a chunk of entries (take).
func (s *Shedder) Keep(level int8, tag uint16, msg string) bool {
	if !s.counting.Load() {
		return true
	}
	i := slotOf(level, tag, msg)
	sl := &s.slots[i]
	n := sl.offered.Add(1)
	if sl.level.Load() != int32(level) {
		sl.level.Store(int32(level))
	}
	r := uint64(sl.ratio.Load())
	kept := !sampledOut(r, n) && (!s.allowance.limited() || s.fits(sl, r, n))
	if !kept {
		sl.shedOne()
	}
	s.touched.mark(i)
	return kept
}

// sampledOut reports whether a key's n-th entry is left out by its keep ratio r: exactly
// the ratio of its entries is kept, spread evenly, the n-th when ⌊n·r⌋ moves.
func sampledOut(r, n uint64) bool { return r < one && (n*r)>>16 == ((n-1)*r)>>16 }

// fits reports whether a limited allowance lets through the n-th entry of the key in sl,
// whose keep ratio is r (an unlimited one lets everything through). A key the step thins
// (r < one), or a flood, takes it down to the margin; the others take it down to nothing,
// and past that pass their first few entries since the step, or their recent count
// (firstFew); with no margin, every key does. So a flood that grows within a step, or a step that comes late, leaves the
// margin to the keys kept whole, rare keys among them.
func (s *Shedder) fits(sl *slot, r, n uint64) bool {
	var floor int64
	if r < one || sl.flood.Load() {
		floor = s.allowance.margin.Load()
	}
	return s.allowance.take(sl, n, r, floor) || (floor == 0 && n-sl.offeredAtStep.Load() <= max(firstFew, uint64(sl.recent.Load())))
}

// keptIn is how many of a key's entries after the end-th up to the last-th its keep ratio
// r keeps (see sampledOut).
func keptIn(end, last, r uint64) uint64 {
	if r >= one {
		return last - end
	}
	return (last*r)>>16 - (end*r)>>16
}

// shedOne counts an entry Keep shed: for its key's next weight, and for the step.
func (sl *slot) shedOne() {
	sl.unweighed.Add(1)
	sl.shed.Add(1)
}

// Whole reports whether msg at level is a key kept whole: not thinned by the last step,
// and not a flood, which is kept out of the margin. Every key is while keys are not
// counted. Safe for concurrent use; a hash and two loads.
func (s *Shedder) Whole(level int8, tag uint16, msg string) bool {
	if !s.counting.Load() {
		return true
	}
	sl := &s.slots[slotOf(level, tag, msg)]
	return sl.ratio.Load() == one && !sl.flood.Load()
}

// Weight is how many entries of msg at level a kept entry stands for: itself, and the
// entries of its key shed since the key's last weighed entry, which it takes over. So the
// weights of what is kept add up to what was offered, whatever the keep ratio did between
// two kept entries (a step's new ratio, a spent allowance); only the entries shed
// after the last kept one are not counted yet. Keys that share a slot share that count.
// Call it once per kept entry. Safe for concurrent use.
func (s *Shedder) Weight(level int8, tag uint16, msg string) uint32 {
	sl := &s.slots[slotOf(level, tag, msg)]
	if sl.unweighed.Load() == 0 { // kept whole: no write to the slot
		return 1
	}
	return uint32(min(1+sl.unweighed.Swap(0), math.MaxUint32))
}

// Unweigh gives back w entries of msg at level to its key: a weighed entry that was not
// kept after all (the stream had no room for it), which the next weighed entry then carries.
// Safe for concurrent use.
func (s *Shedder) Unweigh(level int8, tag uint16, msg string, w uint32) {
	s.slots[slotOf(level, tag, msg)].unweighed.Add(uint64(w))
}

// Freed adds n entries that have left the buffer to the allowance, unless it is unlimited.
// The stream calls it for every entry that leaves the buffer, before that entry's room can
// show in Observation.Room: the step that reads the room then counts it once (see Step).
// Safe for concurrent use.
func (s *Shedder) Freed(n int) { s.allowance.free(int64(n)) }

// Wake makes Keep count keys from now on, before the next step: for a stream whose fill
// has just jumped, so that the step that sees it has counts to share the budget by.
// written is the stream's Written at the wake (Observation.Written; a few low is safe):
// the next step counts what was taken in after it against what Keep counted. Safe for
// concurrent use. (No snapshot of the keys is needed: while Keep does not count, the
// counts do not move, so the next step counts from the last one.)
func (s *Shedder) Wake(written uint64) {
	if !s.counting.Load() {
		// The allowance of the last counting step is stale: none until the next step.
		s.allowance.unlimit()
		s.wokeWritten.Store(written)
		s.woke.Store(true) // before counting: a step that sees Keep counting sees this
		s.counting.Store(true)
	}
}
