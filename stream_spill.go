package fluentcore

// The err stream's spill: what cannot be delivered goes to the durable spill (SpillDir) or
// to ErrFallback, counted; with SpillDir the sender replays the spill before sending from
// memory again.

import (
	"context"
	"errors"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/fluentcore/fluentcore/internal/ring"
	"github.com/fluentcore/fluentcore/internal/spill"
	"go.uber.org/zap/zapcore"
)

// spillKicked reports whether, after a writer's kick (kickSpill) and a compact, the
// sender's batches go to the spill now rather than after SpillAfter: the buffers are still
// full while sends fail, or the durable spill holds frames, which makes it the queue.
func (s *stream) spillKicked() bool { return s.ring.Free() == 0 || s.errSpill.replaying() }

// spillFailed moves the err batches that could not be delivered to the spill. With
// SpillDir, snd's batches go to the durable spill, and run then replays from it. Without,
// everything held and queued goes to ErrFallback, and so does what is sealed while the
// backoff runs: the next batch sent is the next attempt, and while sends fail no err entry
// waits in memory for more than SpillAfter and a backoff wait. It reports false if ctx was
// cancelled.
func (s *stream) spillFailed(ctx context.Context, snd *sender) bool {
	if s.errSpill.disk != nil {
		s.spillOut(snd)
		return true
	}
	s.drainToSpill(snd)
	return s.spillWhileWaiting(ctx, snd, nextWait(snd.bo))
}

// sendFrame sends one frame of the spill's replay on snd's connection, waiting for its ack
// (no frame may be in flight), and counts it.
func (s *stream) sendFrame(ctx context.Context, snd *sender, tag string, entries []byte, n int) bool {
	start := s.clock.Now()
	size, fresh, err := snd.fwd.Send(ctx, tag, entries, n)
	if !s.countSend(snd, fresh, size, err) {
		return false
	}
	s.observeSend(start)
	return true
}

// spillEntry spills one err entry that could not be buffered — its bytes, cut, when it was
// cut down to size already — counts it (and on shard sh, its cut), and wakes the sender to
// move the queued batches to the durable spill too.
func (s *stream) spillEntry(sh *shard, tag uint16, ctx *encodedContext, ent *zapcore.Entry, fields []zapcore.Field, cut []byte) {
	var err error
	wasCut := cut != nil
	if wasCut {
		err = s.errSpill.appendBatch(s.tagOf(tag), cut, 1)
	} else {
		wasCut, err = s.errSpill.spillEntry(s.tagOf(tag), ctx, ent, fields)
	}
	if wasCut && err == nil {
		sh.truncated.Add(1)
	}
	s.countSpill(err, 1, tag)
	s.errSpill.kickSpill()
}

// evacuate, on the err sender, moves every entry not yet delivered — the open batches, the
// queue — to the spill (SpillDir, or ErrFallback), then closes done. It answers
// syncOrSpill: a DPanic, Panic or Fatal entry must not go down with the process.
// Frames in flight are not waited for: their connection is closed, and they are spilled
// with the rest (at least once: they may have arrived).
func (s *stream) evacuate(snd *sender, done chan struct{}) {
	snd.fwd.Reclaim()
	s.requeue(snd)
	s.flush()
	s.drainToSpill(snd)
	close(done)
}

// spillOut hands snd's unsent batches to the spill, oldest first.
func (s *stream) spillOut(snd *sender) {
	for _, b := range snd.out {
		s.spillSealed(b)
	}
	clear(snd.out)
	snd.out = snd.out[:0]
}

// spillSealed hands a sealed err batch's frames not delivered yet to the spill, one per
// tag, and frees it.
func (s *stream) spillSealed(b *ring.Batch) {
	s.regroup(b)
	for i := range b.Runs {
		if !b.Sent[i] {
			tag, entries, n := b.Frame(i)
			s.countSpill(s.errSpill.appendBatch(s.tagOf(tag), entries, n), n, tag)
		}
	}
	s.ring.Finish(b)
}

// countSpill counts n entries by what the spill said: spilled, or dropped with the reason
// (the spill chain has written them to ErrFallback where it could): never silently. tag is
// the entries' logger tag.
func (s *stream) countSpill(err error, n int, tag uint16) {
	if err != nil {
		s.counts.droppedTag(tag, n)
	}
	switch {
	case err == nil:
		s.counts.spilled.Add(uint64(n))
		if c := s.counts.tag(tag); c != nil {
			c.spilled[s.id].Add(uint64(n))
		}
	case errors.Is(err, spill.ErrFull):
		s.shards.all[0].dropped[dropSpillFull].Add(uint64(n))
	case errors.Is(err, errEncodePanic):
		s.shards.all[0].dropped[dropEncodeError].Add(uint64(n))
	default:
		s.shards.all[0].dropped[dropSpillFailed].Add(uint64(n))
	}
}

// replay is the err sender while the durable spill holds frames. The spill is then the
// queue: every sealed batch is appended to its tail (which frees the batch for writers at
// once) and frames are sent from its head, oldest first, so spilled entries arrive before
// newer ones, and newer ones wait behind them, never forever. A segment is deleted once all
// its frames are delivered (acknowledged, with RequireAck: send waits for the ack). A
// segment that cannot be read is retried like a failed send. It returns true once the spill
// is empty, false when ctx is cancelled.
func (s *stream) replay(ctx context.Context, snd *sender, bo backoff.BackOff) bool {
	bo.Reset()
	for {
		s.drainToSpill(snd)
		fr, ok, err := s.errSpill.disk.Head()
		if err == nil && !ok {
			return true
		}
		if err == nil && s.sendFrame(ctx, snd, fr.Tag, fr.Entries, fr.N) {
			s.replayed.Add(uint64(fr.N))
			s.errSpill.disk.Pop()
			bo.Reset()
			continue
		}
		if !s.spillWhileWaiting(ctx, snd, nextWait(bo)) {
			return false
		}
	}
}

// spillWhileWaiting waits d (false if ctx is cancelled first), moving batches to the spill
// as they are sealed.
func (s *stream) spillWhileWaiting(ctx context.Context, snd *sender, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case b := <-s.ring.Queue():
			s.spillSealed(b)
		case <-s.errSpill.spillKick:
		case done := <-s.errSpill.evacuate:
			s.evacuate(snd, done) // what was queued is in the durable spill already
		case <-t.C:
			return true
		case <-ctx.Done():
			return false
		}
	}
}

// stuckSpill is the err sender's care of a connection stuck in one attempt: a write that
// has not completed, or the oldest frame in flight not acked, with no frame taken since
// (forward.Status.StuckSince). Once that has lasted SpillAfter, the pending batches go to the
// spill (spillStuck), counted as spilled, and it reports spilled; a shorter stall spills
// nothing here, as its frames may still be acked (the writers spill their own entries
// once it has lasted ErrMaxWait and the buffers are full). Before that it returns the
// channel that fires when they are due; past it, with nothing left to move, past, and the
// frames in flight keep waiting for their acks (an ack that comes delivers a duplicate:
// StreamStats.Duplicated). On the info stream, or while no attempt is under way, it does
// nothing. Only the sender calls it.
func (s *stream) stuckSpill(snd *sender) (spilled bool, due <-chan time.Time, past bool) {
	if s.errSpill == nil {
		return false, nil, false
	}
	at := snd.fwd.Status().StuckSince()
	if at == 0 {
		return false, nil, false
	}
	if left := time.Unix(0, at).Add(s.errSpill.spillAfter).Sub(s.clock.Now()); left > 0 {
		if snd.stuckT == nil {
			snd.stuckT = time.NewTimer(left)
		} else {
			snd.stuckT.Reset(left) // since Go 1.23 a Reset timer never delivers a stale value
		}
		return false, snd.stuckT.C, false
	}
	if !snd.fwd.Window().CarriesBatches() && len(snd.out) == 0 && s.ring.Idle() {
		return false, nil, true
	}
	s.spillStuck(snd)
	return true, nil, true
}

// spillStuck moves to the spill, oldest first, the batches of snd's frames in flight (which
// stay in flight without them: detach), snd.out, and the held and queued batches.
func (s *stream) spillStuck(snd *sender) {
	stuck := snd.fwd.Window().Detach(snd.spare[:0])
	if n := len(stuck); n > 0 && len(snd.out) > 0 && stuck[n-1] == snd.out[0] {
		stuck = stuck[:n-1] // some of its frames in flight, the others not written: spilled with snd.out
	}
	for _, b := range stuck {
		s.spillSealed(b)
	}
	clear(stuck)
	s.drainToSpill(snd)
}

// drainToSpill moves every batch snd holds unsent, and every queued one, to the spill,
// without waiting.
func (s *stream) drainToSpill(snd *sender) {
	s.spillOut(snd)
	s.ring.Drain(s.spillSealed)
}
