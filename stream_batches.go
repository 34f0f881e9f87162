package fluentcore

// The batches and their ring: free list -> a shard's open batch -> sealed, in order, into
// the queue -> a sender -> finish, back to the free list. Sealing numbers each batch; finish
// marks its positions done (internal/order), which is what Sync waits for. compact packs the
// queue while a sender cannot deliver.

import (
	"time"

	"github.com/fluentcore/fluentcore/internal/ring"
	"github.com/tinylib/msgp/msgp"
	"go.uber.org/zap/zapcore"
)

// takeFor takes a free batch for ent's shard sh (an entry of tag), whose lock the caller
// holds and into which it puts the batch, or returns nil. While the policy reserves,
// the last s.reserve free batches go only to an entry the policy keeps whole, and are marked
// reserved: a flood the policy thins then finds the buffer full while the keys it keeps
// whole (rare ones, Warn under an Info flood) still have a batch, however the flood's
// batches were sealed.
//
// A batch a flooding tag could not have taken (atTagFloor) is reserved the same way when an
// entry of that tag the policy keeps whole takes it: else the flood would fill it next.
func (s *stream) takeFor(sh *shard, ent *zapcore.Entry, tag uint16) *ring.Batch {
	reserved := false
	if s.policy.reserves() {
		if n := s.reserve - int(s.reservedOpen.Load()); n > 0 && len(s.free) <= n || s.atTagFloor(tag) {
			if !s.policy.keepsWhole(ent.Level, tag, ent.Message) {
				return nil
			}
			reserved = true
		}
	}
	b := s.takeFree()
	if b == nil {
		return nil
	}
	sh.takes.Add(1)
	if reserved {
		b.Reserved = true
		s.reservedOpen.Add(1)
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
		if sp := s.takeFree(); sp != nil {
			b.RegroupInto(sp)
			s.free <- sp // cannot block: sp came from free
		} else {
			b.RegroupInPlace()
		}
	}
	b.Group()
}

func (s *stream) takeFree() *ring.Batch {
	select {
	case b := <-s.free:
		return b
	default:
		return nil
	}
}

// seal queues a batch for the sender. Callers hold the lock of the shard the batch came
// from; the queue has room for every batch, so this never blocks.
func (s *stream) seal(b *ring.Batch) {
	s.unreserve(b)
	s.queuedBytes.Add(int64(len(b.Buf)))
	s.queuedBatches.Add(1)
	s.sealMu.Lock()
	s.sealed++
	b.First, b.Last = s.sealed, s.sealed
	s.queue <- b
	s.sealMu.Unlock()
	// The queue alone, since seal runs under a shard's lock: enough for the policy to wake
	// the clock early, which then reads the whole fill share.
	if s.policy.wakes(float64(s.queuedBytes.Load()) / float64(s.capacity())) {
		s.policy.wakeWith(s.takenSoFar())
	}
}

// takenSoFar is usage's taken read without the shards' locks, for a writer that holds one:
// good but for the entries being written at the moment.
func (s *stream) takenSoFar() uint64 {
	var n uint64
	for i := range s.shards {
		taken, _ := s.shards[i].counts()
		n += taken
	}
	return n
}

// counts reads the shard's entries taken in (every entry its writers counted less those
// Check shed before the write, countDrop) and held (less every drop). The drops are read
// before the entries, each of which is counted before its drop: an entry is never held
// and dropped at once, though taken may read one high.
func (sh *shard) counts() (taken, held uint64) {
	checked := sh.dropped[dropSampled].Load() + sh.dropped[dropDegraded].Load()
	var all uint64
	for r := range sh.dropped {
		all += sh.dropped[r].Load()
	}
	n := sh.entries.Load()
	return n - checked, n - all
}

// unreserve counts a reserved batch out of the open ones (sealed, or given back).
func (s *stream) unreserve(b *ring.Batch) {
	if b.Reserved {
		b.Reserved = false
		s.reservedOpen.Add(-1)
	}
}

// flush seals every shard's non-empty open batch.
func (s *stream) flush() {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.lockForSink()
		if b := sh.cur; b != nil && b.N > 0 {
			sh.cur = nil
			s.seal(b)
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
// shed before the write (countDrop); held is those less every other drop too (before
// anything is delivered, what the batches hold).
//
// The degrade policy's allowance is the room less the entries it admitted that are not
// taken in yet, so room and taken must agree while writers go on: an entry counted as
// taken is out of the room, and one not counted yet is still in it. Hence the order of the
// reads: each shard's open batch and its entry count together, under the shard's lock (its
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
// after the entry (countDrop), each one per writer.
func (s *stream) usage() streamUsage {
	var u streamUsage
	u.buffered = s.queuedBytes.Load() // first: a batch sealed meanwhile is counted once at most
	back := s.givenBack.Load()
	var takesAtRead uint64
	for i := range s.shards {
		sh := &s.shards[i]
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
	for i := range s.shards {
		takes += s.shards[i].takes.Load()
	}
	free := len(s.free) - int(s.givenBack.Load()-back) + int(takes-takesAtRead)
	u.room += int64(max(0, free) * s.sealAt)
	return u
}

// capacity is the stream's buffer budget in bytes: all its batch buffers.
func (s *stream) capacity() int64 { return int64(s.nbatches * s.batchCap) }

func (s *stream) lastSealed() uint64 {
	s.sealMu.Lock()
	defer s.sealMu.Unlock()
	return s.sealed
}

// waitDone waits until the sender has finished with every batch up to seq.
func (s *stream) waitDone(seq uint64, deadline <-chan time.Time) bool {
	for {
		s.doneMu.Lock()
		done, ch := s.done.Upto(), s.progress
		s.watched = true
		s.doneMu.Unlock()
		if done >= seq {
			return true
		}
		select {
		case <-ch:
		case <-deadline:
			return false
		}
	}
}

// finish returns a batch the sender is done with (delivered, spilled or dropped) to the
// free list.
func (s *stream) finish(b *ring.Batch) {
	s.queuedBytes.Add(-int64(len(b.Buf)))
	s.queuedBatches.Add(-1)
	first, last := b.First, b.Last
	s.policy.freed(b.N)
	s.unclaim(b)
	b.Reset()
	s.free <- b
	s.doneMu.Lock()
	s.done.Mark(first, last)
	if s.watched {
		// Only then: a channel per batch would make the sender allocate, and an allocating
		// sender is made to assist the garbage collector (even parked) under a log flood.
		close(s.progress)
		s.progress = make(chan struct{})
		s.watched = false
	}
	s.doneMu.Unlock()
}

// takeHeld takes the oldest batch compact left in held, or returns nil.
func (s *stream) takeHeld() *ring.Batch {
	if s.heldN.Load() == 0 {
		return nil
	}
	s.heldMu.Lock()
	defer s.heldMu.Unlock()
	if len(s.held) == 0 {
		return nil
	}
	b := s.held[0]
	s.held = s.held[:copy(s.held, s.held[1:])]
	s.heldN.Store(int64(len(s.held)))
	return b
}

// compact packs the batches queued behind b, the newest one the sender holds and cannot
// deliver, into as few buffers as they fit in, and frees the others: batches sealed partly
// filled (by the flush tick before the sender saw the receiver fail) would otherwise hold
// the rest of their buffers through the outage. Order is kept: the entries after b
// move forward in sealing order; the batches that still hold entries wait in held. A batch
// is merged whole only into the one sealed right before it (its positions then follow
// dst's), so that finishing dst finishes exactly the positions it holds; other senders may
// hold the batches in between.
func (s *stream) compact(b *ring.Batch) {
	s.heldMu.Lock()
	defer s.heldMu.Unlock()
	defer func() { s.heldN.Store(int64(len(s.held))) }()
take:
	for len(s.held) < cap(s.held) {
		select {
		case nb := <-s.queue:
			s.held = append(s.held, nb)
		default:
			break take
		}
	}
	dst, kept := b, s.held[:0]
	for _, src := range s.held {
		if src.First != dst.Last+1 { // another sender holds what lies between
			kept = append(kept, src)
			dst = src
			continue
		}
		if len(dst.Buf)+len(src.Buf) <= cap(dst.Buf) && dst.TakesRuns(src) { // all of it fits
			dst.AppendBatch(src)
			dst.Last = src.Last // dst's delivery now finishes src's entries too
			dst.OpenedBy(src)
			s.unclaim(src)
			src.Reset()
			s.queuedBatches.Add(-1) // its bytes are dst's now
			s.free <- src
			continue
		}
		s.moveEntries(dst, src)
		kept = append(kept, src)
		dst = src
	}
	s.held = kept
}

// moveEntries moves the leading entries of nb that fit into b's free room to the end of b,
// if nb's entries are of one tag and b has room for their run.
func (s *stream) moveEntries(b, nb *ring.Batch) {
	if len(nb.Runs) > 1 || nb.N == 0 || !b.Accepts(nb.Tag) {
		return
	}
	moved, k := 0, 0
	for rest := nb.Buf; len(rest) > 0; k++ {
		after, err := msgp.Skip(rest) // one entry: [EventTime, record]
		size := len(rest) - len(after)
		if err != nil || len(b.Buf)+moved+size > cap(b.Buf) {
			break
		}
		moved, rest = moved+size, after
	}
	if moved == len(nb.Buf) {
		return // all of nb: only a merge (compact) may take it whole, and empty it
	}
	if moved > 0 {
		b.OpenedBy(nb)
		b.EnsureRuns(len(b.Buf))
		off := len(b.Buf)
		b.Buf = append(b.Buf, nb.Buf[:moved]...)
		b.Extend(nb.Tag, off+moved, k)
		b.N += k
		nb.Buf = nb.Buf[:copy(nb.Buf, nb.Buf[moved:])]
		nb.N -= k
		if len(nb.Runs) == 1 {
			nb.Runs[0].End -= uint32(moved)
			nb.Runs[0].N -= uint32(k)
		}
	}
}

// abandon accounts for a batch that was never delivered: spilled, or counted as dropped at
// shutdown, as the policy says.
func (s *stream) abandon(b *ring.Batch) {
	if s.policy.losesToSpill() {
		s.spillSealed(b)
		return
	}
	s.regroup(b)
	for i := range b.Runs {
		if !b.Sent[i] {
			tag, _, n := b.Frame(i)
			s.shards[0].dropped[dropShutdown].Add(uint64(n))
			s.droppedTag(tag, n)
		}
	}
	s.finish(b)
}
