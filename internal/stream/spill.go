package stream

// What a stream cannot carry: the info stream drops it, counted by reason (dropOverflow); the
// err stream waits for room, cuts what is too large and spills the rest (errSpill): to the
// durable spill (Spill.Dir) or to Spill.Fallback, counted, and with Spill.Dir its sender replays
// the spill before sending from memory again.

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/fluentcore/fluentcore/internal/outcome"
	"github.com/fluentcore/fluentcore/internal/ring"
	"github.com/fluentcore/fluentcore/internal/spill"
	"github.com/fluentcore/fluentcore/internal/zapenc"
	"go.uber.org/zap/zapcore"
)

// Overflow is what a stream does with what it cannot carry, as its write path, its Close
// and its flush policy ask: the info stream's (dropOverflow) drops it, the err stream's
// (errSpill) waits, cuts and spills.
type Overflow interface {
	// roomWait is how long a writer that finds no free batch may wait for one; 0: not at
	// all, the entry is lost at once.
	roomWait() time.Duration
	// noRoom is told that a writer found no free batch while every connection fails: the
	// sender may make room at once rather than wait out its backoff.
	noRoom()
	// cutsOversized reports whether an entry over Transport.MaxEntryBytes is cut down to fit rather
	// than dropped (too_large).
	cutsOversized() bool
	// spillEntry spills an entry the stream cannot carry, written on shard sh — cut, its
	// bytes once cut down to size —, counted; false if it does not spill: the caller drops
	// it, counted by reason. The entry comes by value: a pointer passed to an interface's
	// method would move every entry to the heap, and a logging call allocates nothing.
	spillEntry(sh *shard, tag uint16, ctx *zapenc.Context, ent zapcore.Entry, fields []zapcore.Field, cut []byte) bool
	// spillBatch spills a sealed batch's frames not delivered yet and finishes it, counted;
	// false if it does not spill: the caller drops them.
	spillBatch(b *ring.Batch) bool
	// sealsNow reports whether the clock seals partly filled batches at now whatever the
	// senders (snds) are doing: when sealed batches leave at once, to the spill. failing:
	// every connection fails.
	sealsNow(now time.Time, failing bool, snds Senders) bool
}

// SpillRoute is where a sender's batches go that cannot be delivered, as the sender asks
// at each step: the info stream's (dropOverflow) has none, and its sender only retries; the err
// stream's (errSpill) is the spill, which may also be the queue (replay).
type SpillRoute interface {
	// signals are what the sender listens to besides its queue and its acks (see
	// ErrPolicy); nil channels, never ready, for a route without them.
	signals() (wake, spillKick <-chan struct{}, evacuate <-chan chan struct{})
	// replay sends what the spill holds while it is the queue; active: it was (the sender
	// starts over), ok false: ctx was cancelled.
	replay(ctx context.Context, snd *sender) (active, ok bool)
	// overdue moves snd's batches, failing since snd.failingSince, to the spill if they are
	// due (spilled; ok false: ctx was cancelled); if not, within is the longest the sender
	// may wait for its next attempt.
	overdue(ctx context.Context, snd *sender) (spilled, ok bool, within time.Duration)
	// kicked is told of a writer's kick (noRoom, or an entry spilled) during a backoff
	// wait, after a compact: it moves snd's batches to the spill if that is due now
	// (spilled; ok false: ctx was cancelled).
	kicked(ctx context.Context, snd *sender) (spilled, ok bool)
	// evacuate moves everything undelivered to the spill, then closes done.
	evacuate(snd *sender, done chan struct{})
	// stuck is the care of snd's connection stuck in one attempt: spilled, the pending
	// batches went to the spill; due, when to ask again; past, the time for that has
	// passed and what is sealed goes to spillBatch as it comes.
	stuck(snd *sender) (spilled bool, due <-chan time.Time, past bool)
	spillBatch(b *ring.Batch) bool
}

// Carrier builds a stream's overflow and its senders' route over the stream's ring, the
// stream (view) and its clock: DropsAll for the info stream, (*ErrPolicy).Carry for the
// err stream.
type Carrier func(r *ring.Ring, view streamView, clock zapcore.Clock) (Overflow, SpillRoute)

// dropOverflow is the info stream's overflow and route: it waits for nothing, cuts nothing
// and spills nothing; what it cannot carry is dropped, counted by reason (queue_full,
// too_large, shutdown ...), and its batches wait out an outage in the buffer, whose budget
// the degrade policy spends on entries.
type dropOverflow struct{}

// DropsAll is the info stream's carrier.
func DropsAll(*ring.Ring, streamView, zapcore.Clock) (Overflow, SpillRoute) {
	return dropOverflow{}, dropOverflow{}
}

func (dropOverflow) roomWait() time.Duration { return 0 }
func (dropOverflow) noRoom()                 {}
func (dropOverflow) cutsOversized() bool     { return false }
func (dropOverflow) spillEntry(*shard, uint16, *zapenc.Context, zapcore.Entry, []zapcore.Field, []byte) bool {
	return false
}
func (dropOverflow) spillBatch(*ring.Batch) bool                  { return false }
func (dropOverflow) sealsNow(time.Time, bool, Senders) bool       { return false }
func (dropOverflow) replay(context.Context, *sender) (bool, bool) { return false, true }
func (dropOverflow) kicked(context.Context, *sender) (bool, bool) { return false, true }
func (dropOverflow) stuck(*sender) (bool, <-chan time.Time, bool) { return false, nil, false }
func (dropOverflow) evacuate(_ *sender, done chan struct{})       { close(done) } // nothing to move

func (dropOverflow) overdue(context.Context, *sender) (bool, bool, time.Duration) {
	return false, true, time.Duration(math.MaxInt64)
}

func (dropOverflow) signals() (wake, spillKick <-chan struct{}, evacuate <-chan chan struct{}) {
	return nil, nil, nil
}

// errSpill is the err stream's overflow and route: no entry is lost silently. Its policy
// (ErrPolicy) says how long a writer waits and where the spill is; errSpill moves what the
// stream cannot carry there, in order: an entry no batch could take, the batches that have
// failed for Spill.After or that were pending while the sender waited Spill.After for an ack
// (stuck), and everything at a DPanic, Panic or Fatal (evacuate). With Spill.Dir the spill
// is then the queue until it is empty (replay). Only the err sender calls its route, but
// for spillEntry, which writers call.
type errSpill struct {
	p      *ErrPolicy
	ring   *ring.Ring
	stream streamView
	clock  zapcore.Clock
}

// Carry is the err stream's carrier: errSpill over its ring.
func (p *ErrPolicy) Carry(r *ring.Ring, view streamView, clock zapcore.Clock) (Overflow, SpillRoute) {
	e := &errSpill{p: p, ring: r, stream: view, clock: clock}
	return e, e
}

func (e *errSpill) roomWait() time.Duration { return e.p.maxWait }
func (e *errSpill) noRoom()                 { e.p.kickSpill() }
func (e *errSpill) cutsOversized() bool     { return true } // delivered truncated, marked

// signals: wake (an entry is waiting), spillKick (a writer found the buffers full while
// sends fail, or spilled) and evacuate (a DPanic, Panic or Fatal: everything undelivered to
// the spill now).
func (e *errSpill) signals() (wake, spillKick <-chan struct{}, evacuate <-chan chan struct{}) {
	return e.p.wake, e.p.spillKick, e.p.evacuate
}

// sealsNow: the err stream's sealed batches leave at once while sends fail, to the durable
// spill (which frees them, and an entry there survives a crash), or, without one, to
// Spill.Fallback once they have failed for Spill.After; and whether failing or not, while its
// sender has been stuck in one attempt for Spill.After (stuckPast).
func (e *errSpill) sealsNow(now time.Time, failing bool, snds Senders) bool {
	return failing && e.sealsWhileFailing(snds.DisconnectedFor(now)) || e.stuckPast(now, snds)
}

func (e *errSpill) sealsWhileFailing(failingFor time.Duration) bool {
	return e.p.disk != nil || failingFor >= e.p.spillAfter
}

// stuckPast reports whether, at now, the sender (snds) has been stuck in one attempt
// (stuckSince) for Spill.After: its pending batches go to the spill (stuck), and so do
// those sealed while it lasts.
func (e *errSpill) stuckPast(now time.Time, snds Senders) bool {
	at := snds.stuckSince()
	return at != 0 && now.Sub(time.Unix(0, at)) >= e.p.spillAfter
}

// spillDue reports whether batches whose sends have failed since failingSince go to the
// spill at now: after Spill.After, or at once when the durable spill is already the queue;
// and if not, how long until they will. Without Spill.Dir the spill is Spill.Fallback: an
// outage longer than Spill.After puts err entries there, in order, rather than keeping them
// in memory, where a crash would lose them, a full buffer would slow the callers and
// nothing would show them.
func (e *errSpill) spillDue(failingSince, now time.Time) (bool, time.Duration) {
	left := failingSince.Add(e.p.spillAfter).Sub(now)
	return left <= 0 || e.p.replaying(), left
}

func (e *errSpill) overdue(ctx context.Context, snd *sender) (spilled, ok bool, within time.Duration) {
	due, within := e.spillDue(snd.failingSince, e.clock.Now())
	if due {
		return true, e.spillFailed(ctx, snd), within
	}
	return false, true, within
}

// kicked: after a writer's kick and a compact, the sender's batches go to the spill now
// rather than after Spill.After if the buffers are still full while sends fail, or the
// durable spill holds frames, which makes it the queue.
func (e *errSpill) kicked(ctx context.Context, snd *sender) (spilled, ok bool) {
	if e.ring.Free() == 0 || e.p.replaying() {
		return true, e.spillFailed(ctx, snd)
	}
	return false, true
}

// spillFailed moves the err batches that could not be delivered to the spill. With
// Spill.Dir, snd's batches go to the durable spill, and run then replays from it. Without,
// everything held and queued goes to Spill.Fallback, and so does what is sealed while the
// backoff runs: the next batch sent is the next attempt, and while sends fail no err entry
// waits in memory for more than Spill.After and a backoff wait. It reports false if ctx was
// cancelled.
func (e *errSpill) spillFailed(ctx context.Context, snd *sender) bool {
	if e.p.disk != nil {
		e.spillOut(snd)
		return true
	}
	e.drainToSpill(snd)
	return e.spillWhileWaiting(ctx, snd, nextWait(snd.bo))
}

// spillEntry spills one err entry that could not be buffered — its bytes, cut, when it was
// cut down to size already — counts it (and on shard sh, its cut), and wakes the sender to
// move the queued batches to the durable spill too.
func (e *errSpill) spillEntry(sh *shard, tag uint16, ctx *zapenc.Context, ent zapcore.Entry, fields []zapcore.Field, cut []byte) bool {
	var err error
	wasCut := cut != nil
	if wasCut {
		err = e.p.appendBatch(e.stream.tagOf(tag), cut, 1)
	} else {
		wasCut, err = e.p.SpillEntry(e.stream.tagOf(tag), ctx, &ent, fields)
	}
	if wasCut && err == nil {
		sh.truncated.Add(1)
	}
	e.stream.countSpill(err, 1, tag)
	e.p.kickSpill()
	return true
}

// evacuate, on the err sender, moves every entry not yet delivered — the open batches, the
// queue — to the spill (Spill.Dir, or Spill.Fallback), then closes done. It answers the
// root sink's sync for a DPanic, Panic or Fatal entry, which must not go down with the
// process.
// Frames in flight are not waited for: their connection is closed, and they are spilled
// with the rest (at least once: they may have arrived).
func (e *errSpill) evacuate(snd *sender, done chan struct{}) {
	snd.fwd.Reclaim()
	snd.requeue()
	e.stream.Flush()
	e.drainToSpill(snd)
	close(done)
}

// spillOut hands snd's unsent batches to the spill, oldest first.
func (e *errSpill) spillOut(snd *sender) {
	for _, b := range snd.out {
		e.spillSealed(b)
	}
	clear(snd.out)
	snd.out = snd.out[:0]
}

// spillBatch is spillSealed: an err batch is never dropped.
func (e *errSpill) spillBatch(b *ring.Batch) bool {
	e.spillSealed(b)
	return true
}

// spillSealed hands a sealed err batch's frames not delivered yet to the spill, one per
// tag, and frees it.
func (e *errSpill) spillSealed(b *ring.Batch) {
	e.stream.regroup(b)
	for i := range b.Runs {
		if !b.Sent[i] {
			tag, entries, n := b.Frame(i)
			e.stream.countSpill(e.p.appendBatch(e.stream.tagOf(tag), entries, n), n, tag)
		}
	}
	e.ring.Finish(b)
}

// countSpill counts n entries by what the spill said: spilled, or dropped with the reason
// (the spill chain has written them to Spill.Fallback where it could): never silently. tag is
// the entries' logger tag.
func (s *Stream) countSpill(err error, n int, tag uint16) {
	if err != nil {
		s.Counts.droppedTag(tag, n)
	}
	switch {
	case err == nil:
		s.Counts.spilled.Add(uint64(n))
		if c := s.tags.Counters(tag); c != nil {
			c.Spilled[s.ID].Add(uint64(n))
		}
	case errors.Is(err, spill.ErrFull):
		s.shards.all[0].dropped[outcome.SpillFull].Add(uint64(n))
	case errors.Is(err, errEncodePanic):
		s.shards.all[0].dropped[outcome.EncodeError].Add(uint64(n))
	default:
		s.shards.all[0].dropped[outcome.SpillFailed].Add(uint64(n))
	}
}

// replay is the err sender while the durable spill holds frames (after its frames in
// flight have settled). The spill is then the queue: every sealed batch is appended to its
// tail (which frees the batch for writers at once) and frames are sent from its head,
// oldest first, so spilled entries arrive before newer ones, and newer ones wait behind
// them, never forever. A segment is deleted once all its frames are delivered
// (acknowledged, with Info.Acks: sendFrame waits for the ack). A segment that cannot be
// read is retried like a failed send. ok is true once the spill is empty, false when ctx
// is cancelled.
func (e *errSpill) replay(ctx context.Context, snd *sender) (active, ok bool) {
	if !e.p.replaying() {
		return false, true
	}
	if !snd.settle(ctx) {
		return true, false
	}
	bo := snd.bo
	bo.Reset()
	for {
		e.drainToSpill(snd)
		fr, has, err := e.p.disk.Head()
		if err == nil && !has {
			return true, true
		}
		if err == nil && snd.sendFrame(ctx, fr.Tag, fr.Entries, fr.N) {
			snd.counts.replayed.Add(uint64(fr.N))
			e.p.disk.Pop()
			bo.Reset()
			continue
		}
		if !e.spillWhileWaiting(ctx, snd, nextWait(bo)) {
			return true, false
		}
	}
}

// spillWhileWaiting waits d (false if ctx is cancelled first), moving batches to the spill
// as they are sealed.
func (e *errSpill) spillWhileWaiting(ctx context.Context, snd *sender, d time.Duration) bool {
	t := e.clock.NewTicker(max(d, time.Nanosecond)) // the clock's: it decides when the wait ends
	defer t.Stop()
	for {
		select {
		case b := <-e.ring.Queue():
			e.spillSealed(b)
		case <-e.p.spillKick:
		case done := <-e.p.evacuate:
			e.evacuate(snd, done) // what was queued is in the durable spill already
		case <-t.C:
			return true
		case <-ctx.Done():
			return false
		}
	}
}

// stuck is the err sender's care of a connection stuck in one attempt: a write that has
// not completed, or the oldest frame in flight not acked, with no frame taken since
// (forward.Status.StuckSince). Once that has lasted Spill.After, the pending batches go to
// the spill (spillStuck), counted as spilled, and it reports spilled; a shorter stall
// spills nothing here, as its frames may still be acked (the writers spill their own
// entries once it has lasted Err.MaxWait and the buffers are full). Before that it returns
// the channel that fires when they are due; past it, with nothing left to move, past, and
// the frames in flight keep waiting for their acks (an ack that comes delivers a
// duplicate: Stats.Duplicated). While no attempt is under way it does nothing.
func (e *errSpill) stuck(snd *sender) (spilled bool, due <-chan time.Time, past bool) {
	at := snd.fwd.Status().StuckSince()
	if at == 0 {
		return false, nil, false
	}
	if left := time.Unix(0, at).Add(e.p.spillAfter).Sub(e.clock.Now()); left > 0 {
		if snd.stuckT == nil {
			snd.stuckT = e.clock.NewTicker(left)
		} else {
			snd.stuckT.Reset(left) // since Go 1.23 a Reset ticker never delivers a stale tick
		}
		return false, snd.stuckT.C, false
	}
	if !snd.fwd.Window().CarriesBatches() && len(snd.out) == 0 && e.ring.Idle() {
		return false, nil, true
	}
	e.spillStuck(snd)
	return true, nil, true
}

// spillStuck moves to the spill, oldest first, the batches of snd's frames in flight (which
// stay in flight without them: detach), snd.out, and the held and queued batches.
func (e *errSpill) spillStuck(snd *sender) {
	stuck := snd.fwd.Window().Detach(snd.spare[:0])
	if n := len(stuck); n > 0 && len(snd.out) > 0 && stuck[n-1] == snd.out[0] {
		stuck = stuck[:n-1] // some of its frames in flight, the others not written: spilled with snd.out
	}
	for _, b := range stuck {
		e.spillSealed(b)
	}
	clear(stuck)
	e.drainToSpill(snd)
}

// drainToSpill moves every batch snd holds unsent, and every queued one, to the spill,
// without waiting.
func (e *errSpill) drainToSpill(snd *sender) {
	e.spillOut(snd)
	e.ring.Drain(e.spillSealed)
}
