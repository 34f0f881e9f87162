package stream

// What the write path asks besides the ring: its policy (Admission), and which free batch
// a writer may take: the logger tags' floors (tagFloors) and the reserve kept for the
// entries the policy keeps whole (reserve). Stream.takeFor asks all three.

import (
	"sync/atomic"

	"github.com/fluentcore/fluentcore/internal/ring"
	"github.com/fluentcore/fluentcore/internal/tagtable"
	"go.uber.org/zap/zapcore"
)

// Admission is what the write path tells a stream's policy and asks it: the info stream's
// (the root's infoPolicy, degrade.go) counts what it admitted against the room left, keeps a reserve
// for the keys it keeps whole and wakes the clock early as the queue fills; the err
// stream's (ErrPolicy, err_policy.go) keeps every entry whole, reserves nothing and wakes
// its sender at each write. It is told what happened and answers; it never reaches back
// into the stream.
type Admission interface {
	// Written is told of each entry put in a batch, and Freed of the entries of each batch
	// that leaves the buffer (delivered, spilled or dropped).
	Written()
	Freed(entries int)
	// RoomAdmitted reports whether the entries the stream gets now were admitted against
	// the room it has left: then a writer that finds no free batch waits for the other
	// shards' locks rather than skip them (writeElsewhere).
	RoomAdmitted() bool
	// Wakes reports whether a batch sealed with this share of the budget queued wakes the
	// policy: the stream then calls WakeWith with the entries it has taken in so far.
	Wakes(queuedShare float64) bool
	WakeWith(taken uint64)
	// Reserves reports whether the stream's reserve of free batches (reserve) goes only to
	// entries KeepsWhole reports true for (see takeFor): room that a flood the policy thins
	// cannot fill.
	Reserves() bool
	KeepsWhole(level zapcore.Level, tag uint16, msg string) bool
}

// tagFloors counts the batches each logger tag holds and keeps the last free ones from a
// tag that holds two or more. A batch counts in the batches of the tag whose writer opened
// it (claim), whatever tags it holds later, until it is finished or merged into another
// (unclaim); light counts the tags that hold exactly one. While the core has logger tags, a
// tag that holds two or more takes none of the last floor() free batches: one per light
// tag, from nb/8 to nb/4. So a flooding tag, whose shard would take every batch the sender
// frees, leaves those batches to the rare tags that fill theirs at the same moment: a rare
// tag is not left without a batch while the sender frees them one by one. Safe for
// concurrent use; claim's caller holds the batch (its shard's lock).
type tagFloors struct {
	tags   *tagtable.Table
	ring   *ring.Ring
	held   []atomic.Int32 // by tag index, 0 to tags.Max()
	light  atomic.Int32
	bounds [2]int // nb/8 and nb/4
}

// newTagFloors makes the floors of the tags of tags over the batches of r.
func newTagFloors(tags *tagtable.Table, r *ring.Ring) *tagFloors {
	nb := len(r.Batches())
	return &tagFloors{tags: tags, ring: r, held: make([]atomic.Int32, tags.Max()+1), bounds: [2]int{nb / 8, nb / 4}}
}

// at reports whether tag holds two batches or more while the free ones are down to the
// floor: it may take no more, except for entries the policy keeps whole (stream.mayTake).
func (f *tagFloors) at(tag uint16) bool {
	return f.tags.InUse() && f.held[tag].Load() >= 2 && f.ring.Free() <= f.floor()
}

// floor is how many of the free batches a tag that holds two or more may not take, while
// the core has logger tags; 0 otherwise.
func (f *tagFloors) floor() int {
	if !f.tags.InUse() {
		return 0
	}
	return max(f.bounds[0], min(int(f.light.Load()), f.bounds[1]))
}

// add adds d (1 or -1) to the batches tag holds, and keeps light.
func (f *tagFloors) add(tag uint16, d int32) {
	switch n := f.held[tag].Add(d); {
	case n == 1:
		f.light.Add(1) // from 0 or from 2
	case d > 0 && n == 2, d < 0 && n == 0:
		f.light.Add(-1)
	}
}

// claim makes b a batch of tag, counted in tag's batches, if it is empty. The caller holds
// b (its shard's lock).
func (f *tagFloors) claim(b *ring.Batch, tag uint16) {
	if b.Claimed && b.Tag == tag || b.N > 0 {
		return
	}
	f.unclaim(b)
	b.Tag, b.Claimed = tag, true
	f.add(tag, 1)
}

// unclaim takes b out of its tag's batches: it is finished, or merged into another.
func (f *tagFloors) unclaim(b *ring.Batch) {
	if b.Claimed {
		f.add(b.Tag, -1)
	}
	b.Claimed = false
}

// reserve is the free batches kept, while the policy reserves (Admission.Reserves), for the
// entries it keeps whole: a flood the policy thins then finds the buffer full while the
// keys it keeps whole (rare ones, Warn under an Info flood) still have a batch, however the
// flood's batches were sealed. A batch taken from it is marked reserved (ring.Batch.Reserved)
// and counted open until it is sealed or given back (unreserve); given is the empty ones
// given back from a shard to the free list, which usage reads so as not to count a batch
// twice. Safe for concurrent use; a batch's mark is changed by whoever holds it.
type reserve struct {
	ring  *ring.Ring
	admit Admission
	n     int   // batches kept: reserveOf the stream's
	bytes int64 // their room: n batches up to sealAt
	open  atomic.Int32
	given atomic.Uint64
}

// reserveFrom is the fewest batches a stream must have to keep one of them in reserve: then
// it holds no more than 1/64 of the budget, the margin the adaptive policy keeps in its
// count anyway. A larger reserve is room that the end of every burst leaves unused, which
// the default would then deliver less than DegradeOff.
const reserveFrom = 64

func reserveOf(nbatches int) int {
	if nbatches >= reserveFrom {
		return 1
	}
	return 0
}

// newReserve makes the reserve of the batches of r, sealed at sealAt, for admit.
func newReserve(r *ring.Ring, admit Admission, sealAt int) *reserve {
	n := reserveOf(len(r.Batches()))
	return &reserve{ring: r, admit: admit, n: n, bytes: int64(n * sealAt)}
}

// due reports whether the free batches are down to the reserve, less its batches open now:
// the next one taken is a reserved one.
func (rs *reserve) due() bool {
	n := rs.n - int(rs.open.Load())
	return n > 0 && rs.ring.Free() <= n
}

// hold marks b, just taken, as reserved.
func (rs *reserve) hold(b *ring.Batch) {
	b.Reserved = true
	rs.open.Add(1)
}

// unreserve counts a reserved batch out of the open ones (sealed, or given back).
func (rs *reserve) unreserve(b *ring.Batch) {
	if b.Reserved {
		b.Reserved = false
		rs.open.Add(-1)
	}
}

// Room is the room of the batches held in reserve now, which a flood the policy thins
// cannot take; the shedder's margin is this. Not the logger tags' floor (tagFloors),
// though a flooding tag cannot take it either: the floor is kept from one tag for the
// others, and counted as margin it would lower the step's budget for every tag, thinning
// the other tags' entries too. The flood's entries past the floor are dropped as
// queue_full instead.
func (rs *reserve) Room() int64 {
	if rs.n == 0 || !rs.admit.Reserves() {
		return 0
	}
	return rs.bytes
}
