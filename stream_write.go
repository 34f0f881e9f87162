package fluentcore

// The write path: a caller's entry is encoded into the open batch of a shard under the
// shard's lock. Contract with the ring (stream_batches.go): takeFor for a batch, seal for a
// full one; nothing here waits on I/O except an err entry's bounded wait for a free batch.
// An entry that passes its budget (msgpenc's Appender) gives the shard up at once: the
// encoder reports it to the shard (OverBudget), which releases itself; the entry is then
// dropped, or cut down to size without the lock and copied into a batch.

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fluentcore/fluentcore/internal/ring"
	"go.uber.org/zap/zapcore"
)

// shard is one open batch and the encoder that writes into it. A writer takes shard 0 when
// it is free and another at random when it is not (lockShard), so many goroutines rarely
// meet on one lock, and one goroutine's entries stay in sealing order (the receiver's
// order too while the stream sends on one connection).
type shard struct {
	mu        sync.Mutex
	enc       *msgpEncoder
	cur       *ring.Batch // nil until a writer takes a batch from the free list
	entries   atomic.Uint64
	truncated atomic.Uint64 // err entries delivered cut down to Transport.MaxEntryBytes
	// tagOverflow counts the entries whose logger's tag name was past MaxTags.
	tagOverflow atomic.Uint64
	sinkHolds   atomic.Int32  // lockForSink callers holding or waiting for mu
	sinkLocks   atomic.Uint32 // lockForSink calls so far
	takes       atomic.Uint64 // batches taken from the free list into the shard (usage)
	dropped     [numDropReasons]atomic.Uint64
	_           [64]byte // keep neighbouring shards off this cache line
}

// lockForSink locks the shard for the sink's own short work (a flush, a read of the open
// batch's size), marked so that a writer finding the lock taken waits for it rather than
// move to another shard, which would reorder its entries (see lockShard).
// The mark is set before the lock is taken and cleared after it is released, so that no
// writer ever finds the lock taken by the sink unmarked.
func (sh *shard) lockForSink() {
	sh.sinkHolds.Add(1)
	sh.sinkLocks.Add(1)
	sh.mu.Lock()
}

func (sh *shard) unlockForSink() {
	sh.mu.Unlock()
	sh.sinkHolds.Add(-1)
}

// OverBudget is the shard's answer to its encoder's report (msgpenc.Owner) that the entry
// it is encoding for the shard's writer passed its budget: the shard is released at once.
// The report comes from within the encoder, while the writer's marshalers may still walk
// on, so that the writers behind this one need not wait for that walk, which may be long
// (a marshaler's million fields) and which touches nothing of the shard's.
func (sh *shard) OverBudget() { sh.release() }

// release gives the shard up, unlocked, while its encoder is still in an entry that passed
// its budget (OverBudget, or appendLocked): the shard gets a new encoder, and the old one
// stays with its writer, whose marshalers may go on calling it, and never touches the
// shard or its batch again. What the old encoder kept is let go with it.
func (sh *shard) release() {
	sh.enc = sh.enc.fork()
	sh.mu.Unlock()
}

// writeStatus is what one attempt to append an entry under a shard's lock ended with.
type writeStatus uint8

const (
	written      writeStatus = iota // the entry is in a batch (or counted as dropped)
	needBatch                       // no free batch; the caller decides to drop or wait
	streamClosed                    // the stream is closed
	overBudget                      // the entry passed its budget; the shard is released
)

// write appends one entry to the stream. Info entries that find no free batch are dropped
// (queue_full); err entries wait up to Err.MaxWait for one and are spilled after that. While
// every connection fails, the wait lasts only until the sender has moved the queued batches
// to the spill. While the sender is stuck in one attempt (stuckSince), failing or not, no
// wait goes past Err.MaxWait from the attempt's start: once it has lasted that long, an
// entry that finds no room is spilled without waiting.
//
// An entry is the caller's ctx, ent and fields, and once it has been cut down to size
// without a lock, cut, its bytes (which the write path then copies). They travel as
// separate arguments, not in a struct: escape analysis does not tell a struct's fields
// apart, and the entry must not move to the heap: a logging call allocates nothing.
func (s *stream) write(ctx *encodedContext, tag tagRef, ent *zapcore.Entry, fields []zapcore.Field) {
	s.writeIn(s.lockShard(tag.idx), ctx, tag, ent, fields)
}

// writeIn is write into shard i, which lockShard picked and locked for the writer.
func (s *stream) writeIn(i int, ctx *encodedContext, tag tagRef, ent *zapcore.Entry, fields []zapcore.Field) {
	sh := &s.shards[i]
	s.countEntry(sh, tag)
	var cut []byte
	var deadline time.Time
	for {
		status, enc := s.tryWriteLocked(sh, tag.idx, ctx, ent, fields, cut)
		if status == needBatch && tag.idx == 0 {
			// No free batch: the rest of the budget is in the other shards' open batches, so
			// what is buffered, not how it is split into batches, decides when the stream is
			// full (the degrade policy's room counts on it). A logger tag's entries are only
			// ever in its home shard: no other shard holds a batch they may go into, and
			// trying every shard's lock at each drop would slow every tag's writers.
			status, enc = s.writeElsewhere(i, tag.idx, ctx, ent, fields, cut)
		}
		switch status {
		case written:
			s.policy.written()
			return
		case overBudget:
			var again bool
			if cut, again = s.cutOversized(sh, tag.idx, enc, ctx, ent, fields); !again {
				return
			}
			i = s.lockShard(tag.idx)
			sh = &s.shards[i]
		case streamClosed:
			s.lose(sh, dropClosed, tag.idx, ctx, ent, fields, cut)
			return
		case needBatch:
			maxWait := s.over.roomWait()
			if maxWait <= 0 {
				s.lose(sh, dropQueueFull, tag.idx, ctx, ent, fields, cut)
				if tag.idx != 0 {
					// A logger tag's writers have one shard and no other batch to go to
					// (writeElsewhere): one that drops for want of a batch yields the
					// processor, so that writers dropping flat out leave the sender, which
					// frees batches, a CPU. Never a wait on I/O.
					runtime.Gosched()
				}
				return
			}
			var again bool
			if deadline, again = s.waitForRoom(sh, tag.idx, ctx, ent, fields, cut, maxWait, deadline); !again {
				return
			}
			sh.mu.Lock()
		}
	}
}

// countEntry counts an entry in: in its shard, as past Tags.Max if its logger's tag is, and
// in its logger tag's counts.
func (s *stream) countEntry(sh *shard, tag tagRef) {
	sh.entries.Add(1)
	if tag.over {
		sh.tagOverflow.Add(1)
	}
	if c := s.tagCounts(tag.idx); c != nil {
		c.entries[s.id].Add(1)
	}
}

// cutOversized decides what becomes of an entry that passed its budget (overBudget): with
// no lock held, and enc, which gave its shard up, this writer's alone. A stream that does
// not cut oversized entries drops it as too large; otherwise it is cut down to size, and
// cutOversized returns the cut and true for the caller to write it, unless it cannot be
// encoded (dropped) or its head alone is too large (lost as far as cut), which return false.
func (s *stream) cutOversized(sh *shard, tag uint16, enc *msgpEncoder, ctx *encodedContext, ent *zapcore.Entry, fields []zapcore.Field) ([]byte, bool) {
	if !s.over.cutsOversized() {
		s.discard(enc, ent, tag)
		s.lost(ent, tag)
		sh.dropped[dropTooLarge].Add(1)
		s.droppedTag(tag, 1)
		sh.mu.Lock()
		s.giveBackEmptyReserve(sh)
		sh.mu.Unlock()
		return nil, false
	}
	cut, fits := enc.cutShort(ctx, ent, fields, s.entryCap)
	if cut == nil {
		sh.dropped[dropEncodeError].Add(1)
		s.droppedTag(tag, 1)
		return nil, false
	}
	if !fits {
		// Its head alone is too large: it is lost (spilled) as far as cut.
		s.lose(sh, dropTooLarge, tag, ctx, ent, fields, cut)
		return nil, false
	}
	return cut, true
}

// waitForRoom decides how long an entry that found no free batch waits for one, for a
// stream whose policy waits up to maxWait (roomWait), and waits (no lock held). deadline is
// the entry's, zero at its first wait: the end of every later wait. It returns the deadline
// and true once a batch is in the shard, for the caller to write again; false once the
// entry is lost (spilled) because the deadline passed.
func (s *stream) waitForRoom(sh *shard, tag uint16, ctx *encodedContext, ent *zapcore.Entry, fields []zapcore.Field, cut []byte, maxWait time.Duration, deadline time.Time) (time.Time, bool) {
	if deadline.IsZero() {
		now := s.clock.Now()
		deadline = now.Add(maxWait)
		if at := s.senders.stuckSince(); at != 0 {
			// The sender has been in one attempt since at (a dial, a write, an ack
			// that does not come), which may last its whole timeout: it frees no
			// batch before then. No caller waits past at + maxWait, so the waits of
			// a stall add up to maxWait at most; after it the entry is lost (spilled)
			// at once. The pending batches follow once the stall has lasted
			// Spill.After (errSpill.stuck).
			if end := time.Unix(0, at).Add(maxWait); end.Before(deadline) {
				deadline = end
			}
			if !now.Before(deadline) {
				s.lose(sh, dropQueueFull, tag, ctx, ent, fields, cut)
				return deadline, false
			}
		}
		s.waits.Add(1)
	}
	if s.senders.failing() {
		// The sender packs the queued batches, or moves them to the spill, at once:
		// the wait below ends as soon as that frees a batch, and order is kept.
		s.over.noRoom()
	}
	if !s.waitForBatch(sh, deadline) {
		s.waitsOut.Add(1)
		s.lose(sh, dropQueueFull, tag, ctx, ent, fields, cut)
		return deadline, false
	}
	return deadline, true
}

// lose accounts for an entry the stream cannot carry: spilled, or dropped for why.
func (s *stream) lose(sh *shard, why dropReason, tag uint16, ctx *encodedContext, ent *zapcore.Entry, fields []zapcore.Field, cut []byte) {
	if s.over.spillEntry(sh, tag, ctx, *ent, fields, cut) {
		return
	}
	s.lost(ent, tag) // its weight passes to its key's next kept entry
	sh.dropped[why].Add(1)
	s.droppedTag(tag, 1)
}

// lockShard locks a shard for a writer and returns its index. While the stream is calm,
// shard 0: a writer that is alone (the usual case at a modest rate) always writes there,
// and the entries of one goroutine keep their order in the stream, since batches are
// sealed in order and one shard's batch is in order (a random shard, even uncontended,
// would interleave consecutive calls' entries by a batch). A flush or a scrape holding
// shard 0 (lockForSink) is waited for, for the same reason. The first writer to find
// shard 0 taken by another writer marks the stream contended, and until the next flush
// tick writers pick a shard at random, as many goroutines logging at once need: writers
// that all tried shard 0 first would queue on its lock and keep the sender from a CPU.
// The order of concurrent calls is not defined anyway, though a
// goroutine that moves shards may see its entries reordered within a flush. The entries of
// a logger tag (tag, not 0) always go to the tag's own shard (homeShard), so they keep
// their order whatever the contention, and tags rarely share a batch's runs; the stream's
// own tag picks among its own shards (ownShards).
func (s *stream) lockShard(tag uint16) int {
	if tag != 0 {
		i := s.homeShard(tag)
		s.shards[i].mu.Lock()
		return i
	}
	if !s.contended.Load() {
		sh := &s.shards[0]
		// Read before the TryLock: if it fails because the sink holds the lock, the sink
		// was holding or waiting already, or has locked since. Looking only after the
		// failure could miss a flush that is over by then.
		locks, holding := sh.sinkLocks.Load(), sh.sinkHolds.Load() > 0
		if sh.mu.TryLock() {
			return 0
		}
		if len(s.shards) == 1 || holding || sh.sinkLocks.Load() != locks {
			sh.mu.Lock()
			return 0
		}
		s.contended.Store(true)
	}
	i := rand.N(s.ownShards())
	s.shards[i].mu.Lock()
	return i
}

// tryWriteLocked encodes the entry into the shard's open batch, taking a free batch if the
// shard has none. The caller holds the shard's lock; tryWriteLocked releases it (or the
// entry did: overBudget, with the encoder that holds it).
func (s *stream) tryWriteLocked(sh *shard, tag uint16, ctx *encodedContext, ent *zapcore.Entry, fields []zapcore.Field, cut []byte) (writeStatus, *msgpEncoder) {
	status, enc := s.tryAppendLocked(sh, tag, ctx, ent, fields, cut)
	if status != overBudget {
		sh.mu.Unlock()
	}
	return status, enc
}

func (s *stream) tryAppendLocked(sh *shard, tag uint16, ctx *encodedContext, ent *zapcore.Entry, fields []zapcore.Field, cut []byte) (writeStatus, *msgpEncoder) {
	if s.closed.Load() {
		return streamClosed, nil
	}
	if b := sh.cur; b != nil && b.N > 0 && b.Tag != tag && !s.mayTake(ent, tag) {
		// A tag at its floor takes no room of the batch another tag opened either: that
		// may be the last batch a rare tag found (see mayTake).
		return needBatch, nil
	}
	if b := sh.cur; b != nil && !b.Accepts(tag) {
		// The shard's batch has no room for one more run or tag: it is sealed as it is.
		if b.N > 0 {
			sh.cur = nil
			s.seal(b)
		}
	}
	if sh.cur == nil {
		if !s.mayTake(ent, tag) {
			return needBatch, nil
		}
		if sh.cur = s.takeFor(sh, ent, tag); sh.cur == nil {
			return needBatch, nil
		}
	} else if sh.cur.Reserved && !s.policy.keepsWhole(ent.Level, tag, ent.Message) {
		// The shard holds the reserve, which this entry may not fill: once the buffer has
		// room again, the reserve is sealed with what it holds and the shard moves on.
		if !s.mayTake(ent, tag) {
			return needBatch, nil
		}
		nb := s.takeFor(sh, ent, tag)
		if nb == nil {
			return needBatch, nil
		}
		if sh.cur.N > 0 {
			s.seal(sh.cur)
		} else {
			s.giveBackEmptyReserve(sh)
		}
		sh.cur = nb
	}
	s.claim(sh.cur, tag)
	return s.appendLocked(sh, tag, ctx, ent, fields, cut, true)
}

// dropUnwritten drops an entry of tag appendLocked encoded into sh's open batch (cut back
// to where the entry began) and could not keep: counted for why, its weight passed on, and
// the batch given back if it was a reserve taken for this entry.
func (s *stream) dropUnwritten(sh *shard, tag uint16, enc *msgpEncoder, ent *zapcore.Entry, why dropReason) {
	s.discard(enc, ent, tag)
	s.lost(ent, tag)
	sh.dropped[why].Add(1)
	s.droppedTag(tag, 1)
	enc.trim()
	s.giveBackEmptyReserve(sh)
}

// giveBackEmptyReserve returns sh's open batch to the free list if it is a reserved one
// that holds nothing: the entry it was taken for was dropped (too large, or not encodable),
// and left open it would hold the reserve until a writer came back to sh, which for a
// rarely used logger tag's shard may be never. The caller holds sh's lock.
func (s *stream) giveBackEmptyReserve(sh *shard) {
	if b := sh.cur; b != nil && b.Reserved && b.N == 0 {
		sh.cur = nil
		s.unreserve(b)
		s.unclaim(b)
		s.givenBack.Add(1) // before it is free: usage must not count it twice
		s.ring.Put(b)
	}
}

// writeElsewhere tries the open batches of the shards other than shard i: the slow path of
// a stream without a free batch. It skips a shard whose lock is taken, unless the policy
// has admitted the entry against the room left (roomAdmitted): a shard's lock is held for
// one entry's encoding, and such an entry is owed the room it was counted into.
func (s *stream) writeElsewhere(i int, tag uint16, ctx *encodedContext, ent *zapcore.Entry, fields []zapcore.Field, cut []byte) (writeStatus, *msgpEncoder) {
	wait := s.policy.roomAdmitted()
	for pass := 0; pass < 2; pass++ {
		for k := 1; k < len(s.shards); k++ {
			o := &s.shards[(i+k)%len(s.shards)]
			if pass == 0 && !o.mu.TryLock() {
				continue
			}
			if pass == 1 {
				o.mu.Lock()
			}
			status, enc := needBatch, (*msgpEncoder)(nil)
			if o.cur != nil && o.cur.Accepts(tag) && (o.cur.Tag == tag || s.mayTake(ent, tag)) && !s.closed.Load() && (!o.cur.Reserved || s.policy.keepsWhole(ent.Level, tag, ent.Message)) {
				status, enc = s.appendLocked(o, tag, ctx, ent, fields, cut, false)
			}
			if status != overBudget {
				o.mu.Unlock()
			}
			if status != needBatch {
				return status, enc
			}
		}
		if !wait {
			break
		}
	}
	return needBatch, nil
}

// appendLocked encodes the entry, of tag, into sh.cur (not nil, and it accepts tag), under
// sh's lock, within the stream's first budget; an entry cut down to size already (cut) is
// copied. An entry that does not fit seals the batch and moves to a free one if own, or
// leaves the batch as it is and reports needBatch if not (a batch borrowed by
// writeElsewhere). An entry that passes its
// budget, or that capEntry cannot cut, releases the shard and reports overBudget with the
// encoder that holds it.
func (s *stream) appendLocked(sh *shard, tag uint16, ctx *encodedContext, ent *zapcore.Entry, fields []zapcore.Field, cut []byte, own bool) (writeStatus, *msgpEncoder) {
	b := sh.cur
	start := len(b.Buf)
	enc := sh.enc
	truncated := cut != nil
	var out []byte
	if truncated {
		out = append(b.Buf, cut...)
	} else {
		var ok bool
		s.weighFor(enc, ent, tag)
		out, ok = encodeSafely(enc, b.Buf, ctx, ent, fields, s.firstPass, sh)
		if enc.Abandoned() {
			return overBudget, enc // the encoder told sh as it stopped: sh is released
		}
		if !ok {
			b.Buf = b.Buf[:start]
			s.dropUnwritten(sh, tag, enc, ent, dropEncodeError)
			return written, nil
		}
		if len(out)-start > s.entryCap {
			b.Buf = b.Buf[:start]
			if !s.over.cutsOversized() {
				s.dropUnwritten(sh, tag, enc, ent, dropTooLarge)
				return written, nil
			}
			// An err entry is delivered with its largest values truncated and marked (see
			// capEntry); out[start:] is still intact, and capped lives in the encoder.
			capped, ok := enc.capEntry(out[start:], s.entryCap)
			if !ok {
				// Too many values: it is cut short, encoded again, without the lock.
				sh.release()
				return overBudget, enc
			}
			out, truncated = append(b.Buf, capped...), true
		}
		enc.trim()
	}
	if cap(out) != cap(b.Buf) {
		// The entry did not fit and append moved everything to a new array.
		b.Buf = b.Buf[:start]
		if !own {
			if cut == nil {
				s.discard(enc, ent, tag)
			}
			return needBatch, nil
		}
		// Seal the batch as it was and copy the entry into a fresh one (rare: only entries
		// larger than the space sealAt leaves get here).
		sh.cur = nil
		s.seal(b)
		var nb *ring.Batch
		if s.mayTake(ent, tag) {
			nb = s.takeFor(sh, ent, tag)
		}
		if nb == nil {
			if cut == nil {
				s.discard(enc, ent, tag)
			}
			return needBatch, nil
		}
		s.claim(nb, tag)
		nb.Buf = append(nb.Buf, out[start:]...)
		nb.Added(tag, 0)
		sh.cur = nb
		b = nb
	} else {
		b.Buf = out
		b.Added(tag, start)
	}
	if b.N == 1 {
		b.Opened.Store(s.clock.Now().UnixNano()) // once per batch: OldestPending
	}
	if truncated {
		sh.truncated.Add(1)
	}
	if len(b.Buf) >= s.sealAt {
		sh.cur = nil
		s.seal(b)
	}
	return written, nil
}

// waitForBatch blocks (without any lock) until a batch is free or the deadline passes (on
// the stream's clock, whose ticker ends the wait), and installs the batch in the shard. It
// reports false on timeout.
func (s *stream) waitForBatch(sh *shard, deadline time.Time) bool {
	d := deadline.Sub(s.clock.Now())
	if d <= 0 {
		return false
	}
	t := s.clock.NewTicker(d) // the clock's: a test's clock decides when the wait ends
	defer t.Stop()
	b := s.ring.Take(t.C)
	if b == nil {
		return false
	}
	sh.mu.Lock()
	if sh.cur == nil {
		sh.cur = b // its tag is set by the writer that finds it (tryAppendLocked)
		sh.takes.Add(1)
	} else {
		s.ring.Put(b) // another writer refilled the shard meanwhile
	}
	sh.mu.Unlock()
	return true
}
