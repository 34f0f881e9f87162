package stream

// The write path: a caller's entry is encoded into the open batch of a shard under the
// shard's lock. Contract with the ring (batches.go): takeFor for a batch, seal for a
// full one; nothing here waits on I/O except an err entry's bounded wait for a free batch.
// An entry that passes its budget (msgpenc's Appender) gives the shard up at once: the
// encoder reports it to the shard (OverBudget), which releases itself; the entry is then
// dropped, or cut down to size without the lock and copied into a batch.

import (
	"runtime"
	"time"

	"github.com/fluentcore/fluentcore/internal/outcome"
	"github.com/fluentcore/fluentcore/internal/ring"
	"github.com/fluentcore/fluentcore/internal/tagtable"
	"github.com/fluentcore/fluentcore/internal/zapenc"
	"go.uber.org/zap/zapcore"
)

// writeStatus is what one attempt to append an entry under a shard's lock ended with.
type writeStatus uint8

const (
	written      writeStatus = iota // the entry is in a batch (or counted as dropped)
	needBatch                       // no free batch; the caller decides to drop or wait
	streamClosed                    // the stream is closed
	overBudget                      // the entry passed its budget; the shard is released
	batchReady                      // the shard's open batch takes the entry (batchFor)
)

// Write appends one entry to the stream. Info entries that find no free batch are dropped
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
func (s *Stream) Write(ctx *zapenc.Context, tag tagtable.Ref, ent *zapcore.Entry, fields []zapcore.Field) {
	i := s.shards.lock(tag.Idx)
	sh := &s.shards.all[i]
	s.Counts.entry(sh, tag)
	var cut []byte
	var deadline time.Time
	yielded := false
	for {
		status, enc := s.batchFor(sh, tag.Idx, ent), (*zapenc.Encoder)(nil)
		if status == batchReady {
			status, enc = s.appendLocked(sh, tag.Idx, ctx, ent, fields, cut, true)
		}
		if status != overBudget { // else the entry released the shard, with the encoder that holds it
			sh.mu.Unlock()
		}
		if status == needBatch && tag.Idx == 0 {
			// No free batch: the rest of the budget is in the other shards' open batches, so
			// what is buffered, not how it is split into batches, decides when the stream is
			// full (the degrade policy's room counts on it). A logger tag's entries are only
			// ever in its home shard: no other shard holds a batch they may go into, and
			// trying every shard's lock at each drop would slow every tag's writers.
			status, enc = s.writeElsewhere(i, tag.Idx, ctx, ent, fields, cut)
		}
		switch status {
		case written:
			s.policy.Written()
			return
		case overBudget:
			var again bool
			if cut, again = s.cutOversized(sh, tag.Idx, enc, ctx, ent, fields); !again {
				return
			}
			i = s.shards.lock(tag.Idx)
			sh = &s.shards.all[i]
		case streamClosed:
			s.lose(sh, outcome.Closed, tag.Idx, ctx, ent, fields, cut)
			return
		case needBatch:
			maxWait := s.over.roomWait()
			if maxWait <= 0 && !yielded && !s.Senders.Failing() {
				// Before it drops, a writer yields the processor once and tries again:
				// writers finding the buffer full flat out must leave the senders, which
				// free batches, their share of the CPU, however few there are. Not while
				// every connection fails: no sender frees a batch then, and the yield
				// would only cost the caller. Never a wait on I/O.
				yielded = true
				runtime.Gosched()
				i = s.shards.lock(tag.Idx)
				sh = &s.shards.all[i]
				continue
			}
			if maxWait <= 0 {
				s.lose(sh, outcome.QueueFull, tag.Idx, ctx, ent, fields, cut)
				return
			}
			var again bool
			if deadline, again = s.waitForRoom(sh, tag.Idx, ctx, ent, fields, cut, maxWait, deadline); !again {
				return
			}
			sh.mu.Lock()
		}
	}
}

// cutOversized decides what becomes of an entry that passed its budget (overBudget): with
// no lock held, and enc, which gave its shard up, this writer's alone. A stream that does
// not cut oversized entries drops it as too large; otherwise it is cut down to size, and
// cutOversized returns the cut and true for the caller to write it, unless it cannot be
// encoded (dropped) or its head alone is too large (lost as far as cut), which return false.
func (s *Stream) cutOversized(sh *shard, tag uint16, enc *zapenc.Encoder, ctx *zapenc.Context, ent *zapcore.Entry, fields []zapcore.Field) ([]byte, bool) {
	if !s.over.cutsOversized() {
		s.weights.discard(enc, ent, tag)
		s.weights.lost(ent, tag)
		s.Counts.dropped(sh, outcome.TooLarge, tag)
		sh.mu.Lock()
		s.giveBackEmptyReserve(sh)
		sh.mu.Unlock()
		return nil, false
	}
	cut, fits := enc.CutShort(ctx, ent, fields, s.entryCap)
	if cut == nil {
		s.Counts.dropped(sh, outcome.EncodeError, tag)
		return nil, false
	}
	if !fits {
		// Its head alone is too large: it is lost (spilled) as far as cut.
		s.lose(sh, outcome.TooLarge, tag, ctx, ent, fields, cut)
		return nil, false
	}
	return cut, true
}

// waitForRoom decides how long an entry that found no free batch waits for one, for a
// stream whose policy waits up to maxWait (roomWait), and waits (no lock held). deadline is
// the entry's, zero at its first wait: the end of every later wait. It returns the deadline
// and true once a batch is in the shard, for the caller to write again; false once the
// entry is lost (spilled) because the deadline passed.
func (s *Stream) waitForRoom(sh *shard, tag uint16, ctx *zapenc.Context, ent *zapcore.Entry, fields []zapcore.Field, cut []byte, maxWait time.Duration, deadline time.Time) (time.Time, bool) {
	if deadline.IsZero() {
		now := s.clock.Now()
		deadline = now.Add(maxWait)
		if at := s.Senders.stuckSince(); at != 0 {
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
				s.lose(sh, outcome.QueueFull, tag, ctx, ent, fields, cut)
				return deadline, false
			}
		}
		s.Counts.Waits.Add(1)
	}
	if s.Senders.Failing() {
		// The sender packs the queued batches, or moves them to the spill, at once:
		// the wait below ends as soon as that frees a batch, and order is kept.
		s.over.noRoom()
	}
	if !s.waitForBatch(sh, deadline) {
		s.Counts.WaitsOut.Add(1)
		s.lose(sh, outcome.QueueFull, tag, ctx, ent, fields, cut)
		return deadline, false
	}
	return deadline, true
}

// lose accounts for an entry the stream cannot carry: spilled, or dropped for why.
func (s *Stream) lose(sh *shard, why outcome.Reason, tag uint16, ctx *zapenc.Context, ent *zapcore.Entry, fields []zapcore.Field, cut []byte) {
	if s.over.spillEntry(sh, tag, ctx, *ent, fields, cut) {
		return
	}
	s.weights.lost(ent, tag) // its weight passes to its key's next kept entry
	s.Counts.dropped(sh, why, tag)
}

// batchFor readies the shard's open batch for the entry, of tag: a free batch if the shard
// has none, and first the open batch sealed if it takes no more of its tag. It reports
// batchReady once sh.cur takes the entry (its tag's floor claimed), else why not. The
// caller holds the shard's lock.
func (s *Stream) batchFor(sh *shard, tag uint16, ent *zapcore.Entry) writeStatus {
	if s.Closed.Load() {
		return streamClosed
	}
	if b := sh.cur; b != nil && b.N > 0 && b.Tag != tag && !s.mayTake(ent, tag) {
		// A tag at its floor takes no room of the batch another tag opened either: that
		// may be the last batch a rare tag found (see mayTake).
		return needBatch
	}
	if b := sh.cur; b != nil && !b.Accepts(tag) {
		// The shard's batch has no room for one more run or tag: it is sealed as it is.
		if b.N > 0 {
			s.seal(s.shards.close(sh))
		}
	}
	if sh.cur == nil {
		if !s.mayTake(ent, tag) {
			return needBatch
		}
		b := s.takeFor(sh, ent, tag)
		if b == nil {
			return needBatch
		}
		s.shards.open(sh, b)
	} else if sh.cur.Reserved && !s.policy.KeepsWhole(ent.Level, tag, ent.Message) {
		// The shard holds the reserve, which this entry may not fill: once the buffer has
		// room again, the reserve is sealed with what it holds and the shard moves on.
		if !s.mayTake(ent, tag) {
			return needBatch
		}
		nb := s.takeFor(sh, ent, tag)
		if nb == nil {
			return needBatch
		}
		if sh.cur.N > 0 {
			s.seal(s.shards.close(sh))
		} else {
			s.giveBackEmptyReserve(sh)
		}
		s.shards.open(sh, nb)
	}
	s.floors.claim(sh.cur, tag)
	return batchReady
}

// dropUnwritten drops an entry of tag appendLocked encoded into sh's open batch (cut back
// to where the entry began) and could not keep: counted for why, its weight passed on, and
// the batch given back if it was a reserve taken for this entry.
func (s *Stream) dropUnwritten(sh *shard, tag uint16, enc *zapenc.Encoder, ent *zapcore.Entry, why outcome.Reason) {
	s.weights.discard(enc, ent, tag)
	s.weights.lost(ent, tag)
	s.Counts.dropped(sh, why, tag)
	enc.Trim()
	s.giveBackEmptyReserve(sh)
}

// giveBackEmptyReserve returns sh's open batch to the free list if it is a reserved one
// that holds nothing: the entry it was taken for was dropped (too large, or not encodable),
// and left open it would hold the reserve until a writer came back to sh, which for a
// rarely used logger tag's shard may be never. The caller holds sh's lock.
func (s *Stream) giveBackEmptyReserve(sh *shard) {
	if b := sh.cur; b != nil && b.Reserved && b.N == 0 {
		s.shards.close(sh)
		s.Reserve.unreserve(b)
		s.floors.unclaim(b)
		s.Reserve.given.Add(1) // before it is free: usage must not count it twice
		s.Ring.Put(b)
	}
}

// writeElsewhere tries the open batches of the shards other than shard i: the slow path of
// a stream without a free batch. It skips a shard whose lock is taken, unless the policy
// has admitted the entry against the room left (RoomAdmitted): a shard's lock is held for
// one entry's encoding, and such an entry is owed the room it was counted into. While no
// shard holds an open batch (shards.opened), as when the receiver is gone and every batch
// is queued, it touches no shard at all: a full stream makes a call cheaper, not dearer.
func (s *Stream) writeElsewhere(i int, tag uint16, ctx *zapenc.Context, ent *zapcore.Entry, fields []zapcore.Field, cut []byte) (writeStatus, *zapenc.Encoder) {
	if s.shards.opened.Load() == 0 {
		return needBatch, nil
	}
	wait := s.policy.RoomAdmitted()
	for pass := 0; pass < 2; pass++ {
		for k := 1; k < len(s.shards.all); k++ {
			o := &s.shards.all[(i+k)%len(s.shards.all)]
			if pass == 0 && !o.mu.TryLock() {
				continue
			}
			if pass == 1 {
				o.mu.Lock()
			}
			status, enc := needBatch, (*zapenc.Encoder)(nil)
			if o.cur != nil && o.cur.Accepts(tag) && (o.cur.Tag == tag || s.mayTake(ent, tag)) && !s.Closed.Load() && (!o.cur.Reserved || s.policy.KeepsWhole(ent.Level, tag, ent.Message)) {
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
// budget, or that Cap cannot cut, releases the shard and reports overBudget with the
// encoder that holds it.
func (s *Stream) appendLocked(sh *shard, tag uint16, ctx *zapenc.Context, ent *zapcore.Entry, fields []zapcore.Field, cut []byte, own bool) (writeStatus, *zapenc.Encoder) {
	b := sh.cur
	start := len(b.Buf)
	enc := sh.enc
	truncated := cut != nil
	var out []byte
	if truncated {
		out = append(b.Buf, cut...)
	} else {
		var ok bool
		s.weights.give(enc, ent, tag)
		out, ok = enc.Encode(b.Buf, ctx, ent, fields, s.firstPass, sh)
		if enc.Abandoned() {
			return overBudget, enc // the encoder told sh as it stopped: sh is released
		}
		if !ok {
			b.Buf = b.Buf[:start]
			s.dropUnwritten(sh, tag, enc, ent, outcome.EncodeError)
			return written, nil
		}
		if len(out)-start > s.entryCap {
			b.Buf = b.Buf[:start]
			if !s.over.cutsOversized() {
				s.dropUnwritten(sh, tag, enc, ent, outcome.TooLarge)
				return written, nil
			}
			// An err entry is delivered with its largest values truncated and marked (see
			// Cap); out[start:] is still intact, and capped lives in the encoder.
			capped, ok := enc.Cap(out[start:], s.entryCap)
			if !ok {
				// Too many values: it is cut short, encoded again, without the lock.
				sh.release()
				return overBudget, enc
			}
			out, truncated = append(b.Buf, capped...), true
		}
		enc.Trim()
	}
	if cap(out) != cap(b.Buf) {
		// The entry did not fit and append moved everything to a new array.
		b.Buf = b.Buf[:start]
		if !own {
			if cut == nil {
				s.weights.discard(enc, ent, tag)
			}
			return needBatch, nil
		}
		// Seal the batch as it was and copy the entry into a fresh one (rare: only entries
		// larger than the space sealAt leaves get here).
		s.seal(s.shards.close(sh))
		var nb *ring.Batch
		if s.mayTake(ent, tag) {
			nb = s.takeFor(sh, ent, tag)
		}
		if nb == nil {
			if cut == nil {
				s.weights.discard(enc, ent, tag)
			}
			return needBatch, nil
		}
		s.floors.claim(nb, tag)
		nb.Buf = append(nb.Buf, out[start:]...)
		nb.Added(tag, 0)
		s.shards.open(sh, nb)
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
		s.seal(s.shards.close(sh))
	}
	return written, nil
}

// waitForBatch blocks (without any lock) until a batch is free or the deadline passes (on
// the stream's clock, whose ticker ends the wait), and installs the batch in the shard. It
// reports false on timeout.
func (s *Stream) waitForBatch(sh *shard, deadline time.Time) bool {
	d := deadline.Sub(s.clock.Now())
	if d <= 0 {
		return false
	}
	t := s.clock.NewTicker(d) // the clock's: a test's clock decides when the wait ends
	defer t.Stop()
	b := s.Ring.Take(t.C)
	if b == nil {
		return false
	}
	sh.mu.Lock()
	if sh.cur == nil {
		s.shards.open(sh, b) // its tag is set by the writer that finds it (batchFor)
		sh.takes.Add(1)
	} else {
		s.Ring.Put(b) // another writer refilled the shard meanwhile
	}
	sh.mu.Unlock()
	return true
}

// weights are the sample weights of the entries a stream encodes (Degrade.WeightKey, on the
// info stream): weigh weighs an entry before it is encoded, and unweigh gives an entry's
// weight back to its key; both nil without. The weights of the entries kept add up to what
// was logged: an entry's weight stands for those its key shed before it, and one the stream
// does not keep passes its weight on to its key's next.
type weights struct {
	weigh   func(level zapcore.Level, tag uint16, msg string) uint32
	unweigh func(level zapcore.Level, tag uint16, msg string, w uint32)
}

// give gives enc the weight of the entry of tag it is about to encode. The level and
// message are passed, not the entry: handing its pointer to a function value would move
// every entry to the heap, and a logging call allocates nothing.
func (w *weights) give(enc *zapenc.Encoder, ent *zapcore.Entry, tag uint16) {
	if w.weigh != nil {
		enc.Weight = w.weigh(ent.Level, tag, ent.Message)
	}
}

// discard gives back the weight enc wrote for the entry of tag it just encoded, which the
// stream does not keep after all (it did not fit, or failed to encode): the entries its
// weight stood for besides itself pass back to its key, so that the next kept entry
// carries them and the weights still add up to what was logged.
func (w *weights) discard(enc *zapenc.Encoder, ent *zapcore.Entry, tag uint16) {
	if enc.Weight > 1 {
		w.unweigh(ent.Level, tag, ent.Message, enc.Weight-1)
	}
	enc.Weight = 0
}

// lost passes an entry of tag Check kept, which the stream then dropped, to its key's next
// weight.
func (w *weights) lost(ent *zapcore.Entry, tag uint16) {
	if w.unweigh != nil {
		w.unweigh(ent.Level, tag, ent.Message, 1)
	}
}
