package stream

// The stream's side of its ring (internal/ring.Ring, which holds the batches, their order
// and what Sync waits for): which free batch an entry may take (takeFor), sealing with the
// policy's wake, a batch's frames put together (regroup), what a finished batch gives back
// to the policy and the tags (finished), what the stream holds (Usage), and the batches
// never delivered (Abandon).

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
func (s *Stream) takeFor(sh *shard, ent *zapcore.Entry, tag uint16) *ring.Batch {
	reserved := false
	if s.policy.Reserves() {
		if s.Reserve.due() || s.floors.at(tag) {
			if !s.policy.KeepsWhole(ent.Level, tag, ent.Message) {
				return nil
			}
			reserved = true
		}
	}
	b := s.Ring.Take(nil)
	if b == nil {
		return nil
	}
	sh.takes.Add(1)
	if reserved {
		s.Reserve.hold(b)
	}
	return b
}

// regroup makes each tag's runs in b one, so that b is sent as one frame per tag: through
// a free buffer, if one is at hand, which it holds for the moment of a copy; else in b's
// own buffer. The sender calls it before b's first frame (the spill and shutdown too);
// then b is grouped.
func (s *Stream) regroup(b *ring.Batch) {
	if b.Grouped {
		return
	}
	if b.Interleaved() {
		if sp := s.Ring.Take(nil); sp != nil {
			b.RegroupInto(sp)
			s.Ring.Put(sp)
		} else {
			b.RegroupInPlace()
		}
	}
	b.Group()
}

// seal queues a batch for the sender (ring.Ring.Seal). Callers hold the lock of the shard
// the batch came from; it never blocks.
func (s *Stream) seal(b *ring.Batch) {
	s.Reserve.unreserve(b)
	s.Ring.Seal(b)
	// The queue alone, since seal runs under a shard's lock: enough for the policy to wake
	// the clock early, which then reads the whole fill share.
	if queued, capacity := s.Ring.Bytes(); s.policy.Wakes(float64(queued) / float64(capacity)) {
		s.policy.WakeWith(s.shards.taken())
	}
}

// Flush seals every shard's non-empty open batch.
func (s *Stream) Flush() {
	for i := range s.shards.all {
		sh := &s.shards.all[i]
		sh.lockForSink()
		if b := sh.cur; b != nil && b.N > 0 {
			s.seal(s.shards.close(sh))
		}
		sh.unlockForSink()
	}
}

// Buffered is the size of the entries the stream holds: in the queue, and in the open
// batches, read under each shard's lock (so never from a goroutine that holds one). The
// writers pay nothing for it; a scrape and the clock's observation pay a short wait.
func (s *Stream) Buffered() int64 { return s.Usage().Buffered }

// Usage is what a stream holds (Stream.Usage).
type Usage struct {
	Buffered, Room int64  // bytes held, and bytes the batches can still take
	Taken, Held    uint64 // entries the writers took in, and of them those not dropped
}

// Usage reads what the stream holds. Buffered is the bytes in the queue and in the open
// batches. Room is the bytes the free batches and the open batches can still take before
// they are sealed (the rest of a batch is slack for the entry that crosses the mark, not
// room): with the batches split over shards the stream is full before Buffered reaches
// capacity, and Room says when. Taken is every entry the writers counted less what Check
// shed before the write (Counts.Drop); Held is those less every other drop too (before
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
// after the entry (Counts.Drop), each one per writer.
func (s *Stream) Usage() Usage {
	var u Usage
	u.Buffered, _ = s.Ring.Bytes() // first: a batch sealed meanwhile is counted once at most
	back := s.Reserve.given.Load()
	var takesAtRead uint64
	for i := range s.shards.all {
		sh := &s.shards.all[i]
		sh.lockForSink()
		takesAtRead += sh.takes.Load()
		if sh.cur != nil {
			u.Buffered += int64(len(sh.cur.Buf))
			u.Room += int64(max(0, s.sealAt-len(sh.cur.Buf)))
		}
		taken, held := sh.counts()
		sh.unlockForSink()
		u.Taken += taken
		u.Held += held
	}
	var takes uint64
	for i := range s.shards.all {
		takes += s.shards.all[i].takes.Load()
	}
	free := s.Ring.Free() - int(s.Reserve.given.Load()-back) + int(takes-takesAtRead)
	u.Room += int64(max(0, free) * s.sealAt)
	return u
}

// Capacity is the stream's buffer budget in bytes: all its batch buffers.
func (s *Stream) Capacity() int64 {
	_, c := s.Ring.Bytes()
	return c
}

// finished is told by the ring of a batch the sender is done with (delivered, spilled or
// dropped), before it is free: its entries leave the policy's count, and the batch its
// tag's.
func (s *Stream) finished(b *ring.Batch) {
	s.policy.Freed(b.N)
	s.floors.unclaim(b)
}

// Abandon accounts for a batch that was never delivered: spilled, or counted as dropped at
// shutdown, as the policy says. Only once the stream's senders have stopped.
func (s *Stream) Abandon(b *ring.Batch) {
	if s.over.spillBatch(b) {
		return
	}
	s.regroup(b)
	for i := range b.Runs {
		if !b.Sent[i] {
			tag, _, n := b.Frame(i)
			s.shards.all[0].dropped[outcome.Shutdown].Add(uint64(n))
			s.Counts.droppedTag(tag, n)
		}
	}
	s.Ring.Finish(b)
}
