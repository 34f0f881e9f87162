package fluentcore

// The stream's side of its ring (internal/ring.Ring, which holds the batches, their order
// and what Sync waits for): which free batch an entry may take (takeFor), sealing with the
// policy's wake, a batch's frames put together (regroup), what a finished batch gives back
// to the policy and the tags (finished), what the stream holds (usage), and the batches
// never delivered (abandon).

import (
	"github.com/fluentcore/fluentcore/internal/outcome"
	"github.com/fluentcore/fluentcore/internal/ring"
	"go.uber.org/zap/zapcore"
)

// takeFor takes a free batch for ent's shard sh (an entry of tag), whose lock the caller
// holds and into which it puts the batch, or returns nil. While the policy reserves, the
// last free batches of the reserve go only to an entry the policy keeps whole, and are
// marked reserved (reserve.hold).
//
// A batch a flooding tag could not have taken (tagFloors.at) is reserved the same way when
// an entry of that tag the policy keeps whole takes it: else the flood would fill it next.
func (s *stream) takeFor(sh *shard, ent *zapcore.Entry, tag uint16) *ring.Batch {
	reserved := false
	if s.policy.reserves() {
		if s.reserve.due() || s.floors.at(tag) {
			if !s.policy.keepsWhole(ent.Level, tag, ent.Message) {
				return nil
			}
			reserved = true
		}
	}
	b := s.ring.Take(nil)
	if b == nil {
		return nil
	}
	sh.takes.Add(1)
	if reserved {
		s.reserve.hold(b)
	}
	return b
}

// regroup makes each tag's runs in b one, so that b is sent as one frame per tag: through
// a free buffer, if one is at hand, which it holds for the moment of a copy; else in b's
// own buffer. The sender calls it before b's first frame (the spill and shutdown too);
// then b is grouped.
func (s *stream) regroup(b *ring.Batch) {
	if b.Grouped {
		return
	}
	if b.Interleaved() {
		if sp := s.ring.Take(nil); sp != nil {
			b.RegroupInto(sp)
			s.ring.Put(sp)
		} else {
			b.RegroupInPlace()
		}
	}
	b.Group()
}

// seal queues a batch for the sender (ring.Ring.Seal). Callers hold the lock of the shard
// the batch came from; it never blocks.
func (s *stream) seal(b *ring.Batch) {
	s.reserve.unreserve(b)
	s.ring.Seal(b)
	// The queue alone, since seal runs under a shard's lock: enough for the policy to wake
	// the clock early, which then reads the whole fill share.
	if queued, capacity := s.ring.Bytes(); s.policy.wakes(float64(queued) / float64(capacity)) {
		s.policy.wakeWith(s.shards.taken())
	}
}

// flush seals every shard's non-empty open batch.
func (s *stream) flush() {
	for i := range s.shards.all {
		sh := &s.shards.all[i]
		sh.lockForSink()
		if b := sh.cur; b != nil && b.N > 0 {
			s.seal(s.shards.close(sh))
		}
		sh.unlockForSink()
	}
}

// buffered is the size of the entries the stream holds: in the queue, and in the open
// batches, read under each shard's lock (so never from a goroutine that holds one). The
// writers pay nothing for it; a scrape and the clock's observation pay a short wait.
func (s *stream) buffered() int64 { return s.usage().buffered }

// streamUsage is what a stream holds, read by usage.
type streamUsage struct {
	buffered, room int64  // bytes held, and bytes the batches can still take
	taken, held    uint64 // entries the writers took in, and of them those not dropped
}

// usage reads what the stream holds. buffered is the bytes in the queue and in the open
// batches. room is the bytes the free batches and the open batches can still take before
// they are sealed (the rest of a batch is slack for the entry that crosses the mark, not
// room): with the batches split over shards the stream is full before buffered reaches
// capacity, and room says when. taken is every entry the writers counted less what Check
// shed before the write (streamCounts.drop); held is those less every other drop too (before
// anything is delivered, what the batches hold).
//
// The degrade policy's allowance is the room less the entries it admitted that are not
// taken in yet, so room and taken must agree while writers go on: an entry counted as
// taken is out of the room, and one not counted yet is still in it. Hence the order of the
// reads, the one the ring's contract gives (ring.Ring: Bytes, the open batches, Free):
// each shard's open batch and its entry count together, under the shard's lock (its
// writers count and append under it), and the free list after every shard. With the free
// list read first, a batch taken meanwhile into a shard not read yet would count as room
// twice, with the entries written into it, and the allowance would let a flood into the
// margin kept for the keys kept whole. A batch taken from the free list into a shard read
// before is in neither place as read: each shard counts the batches it takes, and those
// taken after its read count as free (their entries are not taken yet, as far as the read
// goes), so that their room is not missing while their entries count against it.
// The takes are summed again before the free list is read, so that a batch taken after
// that is counted nowhere rather than twice; a batch that goes from a shard back to the
// free list during the read (an empty reserve given back) is not counted as free. What is
// left is on the safe side but for a few entries: one a writer counts in one shard and
// writes into another (writeElsewhere), and one that Check shed whose drop is counted just
// after the entry (streamCounts.drop), each one per writer.
func (s *stream) usage() streamUsage {
	var u streamUsage
	u.buffered, _ = s.ring.Bytes() // first: a batch sealed meanwhile is counted once at most
	back := s.reserve.given.Load()
	var takesAtRead uint64
	for i := range s.shards.all {
		sh := &s.shards.all[i]
		sh.lockForSink()
		takesAtRead += sh.takes.Load()
		if sh.cur != nil {
			u.buffered += int64(len(sh.cur.Buf))
			u.room += int64(max(0, s.sealAt-len(sh.cur.Buf)))
		}
		taken, held := sh.counts()
		sh.unlockForSink()
		u.taken += taken
		u.held += held
	}
	var takes uint64
	for i := range s.shards.all {
		takes += s.shards.all[i].takes.Load()
	}
	free := s.ring.Free() - int(s.reserve.given.Load()-back) + int(takes-takesAtRead)
	u.room += int64(max(0, free) * s.sealAt)
	return u
}

// capacity is the stream's buffer budget in bytes: all its batch buffers.
func (s *stream) capacity() int64 {
	_, c := s.ring.Bytes()
	return c
}

// finished is told by the ring of a batch the sender is done with (delivered, spilled or
// dropped), before it is free: its entries leave the policy's count, and the batch its
// tag's.
func (s *stream) finished(b *ring.Batch) {
	s.policy.freed(b.N)
	s.floors.unclaim(b)
}

// abandon accounts for a batch that was never delivered: spilled, or counted as dropped at
// shutdown, as the policy says.
func (s *stream) abandon(b *ring.Batch) {
	if s.over.spillBatch(b) {
		return
	}
	s.regroup(b)
	for i := range b.Runs {
		if !b.Sent[i] {
			tag, _, n := b.Frame(i)
			s.shards.all[0].dropped[outcome.Shutdown].Add(uint64(n))
			s.counts.droppedTag(tag, n)
		}
	}
	s.ring.Finish(b)
}
