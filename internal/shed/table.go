package shed

import (
	"sync/atomic"
	"time"
)

// Slots is the size of the key table. Keys that hash alike share a slot, and are then
// thinned as one key.
const Slots = 4096

// one is a keep ratio of 1 in the table's fixed point.
const one = 1 << 16

// slot is one key's line in the table. Keep writes offered, level, shed, unweighed, leased
// and spent; Step writes offeredAtStep, ratio, flood and recent, and ends the lease (leased).
type slot struct {
	offered       atomic.Uint64 // entries offered, ever: the systematic sampler's phase
	offeredAtStep atomic.Uint64 // offered as the last step read it: offered - offeredAtStep is the step's count so far
	ratio         atomic.Uint32 // keep ratio, one = keep all
	level         atomic.Int32  // the level of the key last offered here
	unweighed     atomic.Uint64 // entries shed since one of the slot's was last weighed (Weight)
	shed          atomic.Uint64 // entries shed, ever; incremented only after offered, for the same entry
	leased        atomic.Uint64 // offered up to which the key's lease of the allowance covers its entries (take); offered at each step that reads the slot
	spent         atomic.Int64  // the allowance the key's entries have taken, ever, net of what they gave back (take); at most Shedder.spent's share
	recent        atomic.Uint32 // entries offered in a step lately, at most math.MaxUint32 (countOffers, firstFew)
	flood         atomic.Bool   // the key is a flood (markFlood): kept out of the margin
}

// key is an offered key as a step counts it.
type key struct {
	slot  int
	level int32
	count uint64        // entries offered since the last step
	span  time.Duration // since the slot was last offered anything, at most quietAfter
}

// slotOf hashes a key (the level, the tag and the message) to its slot. Tag 0 adds nothing
// to the hash: a stream without tags keys by level and message alone.
func slotOf(level int8, tag uint16, msg string) uint32 {
	h := Hash(level, msg)
	if tag != 0 {
		h ^= (uint64(tag) * 0x9E3779B97F4A7C15) >> 7
	}
	return uint32(h % Slots)
}

// Hash hashes a message at a level: eight bytes of the message at a time, multiplied and
// folded, the last one to eight bytes as one more word (the message's last eight bytes,
// overlapping those read, when it has eight), then mixed once more (splitmix64's
// finisher); the length goes in first, so that messages that differ only by trailing zero
// bytes differ. It is on the caller's path, for this package and for DegradeSample, so it
// reads words, not bytes (bench/README.md, "Figures behind the doc comments"). Safe for
// concurrent use; it never fails.
func Hash(level int8, msg string) uint64 {
	const m = 0x9E3779B97F4A7C15
	h := (uint64(uint8(level))+1)*m ^ uint64(len(msg))
	s := msg
	for len(s) > 8 {
		h = (h ^ word(s)) * m
		h ^= h >> 32
		s = s[8:]
	}
	var w uint64
	if len(msg) >= 8 {
		w = word(msg[len(msg)-8:])
	} else {
		for i := 0; i < len(s); i++ {
			w |= uint64(s[i]) << (8 * i)
		}
	}
	h = (h ^ w) * m
	h ^= h >> 29
	h *= 0xBF58476D1CE4E5B9
	h ^= h >> 32
	return h
}

// word is the first eight bytes of s (at least eight) as a little-endian word; the
// compiler makes it one load.
func word(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// slotSet has a bit per slot, for the callers to set and a step to take: Shedder.touched.
type slotSet [Slots / 64]atomic.Uint64

// mark sets slot i's bit. The bit is read first: while it is set, as it is for every entry
// of a key but its first in a step, the line it shares with 63 other slots is only read.
func (b *slotSet) mark(i uint32) {
	w, bit := &b[i/64], uint64(1)<<(i%64)
	if w.Load()&bit == 0 {
		w.Or(bit)
	}
}

// atRest reports whether a slot's state is what a key offered nothing for a while has: no
// recent count, a ratio of one and no flood mark (countOffers moves each there once the
// key is quiet). A step reads a slot that is not at rest though nothing was offered to it.
func (sl *slot) atRest() bool {
	return sl.recent.Load() == 0 && sl.ratio.Load() == one && !sl.flood.Load()
}
