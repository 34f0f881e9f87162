package fluentcore

// The senders: one goroutine per connection of the stream takes sealed batches, frames them
// through its forwarder (forward.go) and finishes each once delivered (with RequireAck, when
// its ack comes); after a failure it waits its backoff and sends the same batches again.
// The time of their attempts and failures, and so SpillAfter's, is the stream's clock
// (streamSettings.clock); their waits are plain timers.

import (
	"cmp"
	"context"
	"errors"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/fluentcore/fluentcore/internal/forward"
	"github.com/fluentcore/fluentcore/internal/ring"
)

// sender is one of a stream's connections and the goroutine that sends on it.
type sender struct {
	fwd *forward.Forwarder
	bo  backoff.BackOff
	// out holds the batches the sender has taken and not written on its connection, oldest
	// first: the one it is sending, and those whose frames a failed connection lost. spare
	// is the other buffer requeue builds into; both can hold every batch of the stream.
	out, spare []*ring.Batch
	// failingSince is when the first attempt of the failure under way began (zero since the
	// last delivery); owed says a failure has come since the last backoff wait. A failure
	// may come after the write (an ack), so both outlive one call to deliver.
	failingSince time.Time
	owed         bool
	// stuckT is the timer of stuckSpill's deadline (nil until the first).
	stuckT *time.Timer
}

// run is one of the stream's senders: it delivers sealed batches, taking each as it comes,
// on its own connection, until ctx is cancelled. With RequireAck it writes up to
// MaxInflight frames ahead and finishes each batch when its ack comes. With one sender
// batches go out in order. With a durable spill (err stream, SpillDir, one sender) it
// first replays whatever the spill holds — also what a previous process left there — and
// sends from memory again once it is empty.
func (s *stream) run(ctx context.Context, snd *sender) {
	// The connections hold at most all but randShards of the batches in flight together:
	// that many stay out of flight, for the writers to fill and the senders to take next
	// (the logger tags' shards are not counted: a core without tags keeps its window).
	if !snd.fwd.Start(ctx, len(s.ring.Batches())-s.shards.randShards) {
		return // a connection past the stream's count, or Close before the first lookup ended
	}
	wake, spillKick, evacuate := s.policy.signals()
	for {
		if s.policy.replaying() {
			if !s.settle(ctx, snd) || !s.replay(ctx, snd, snd.bo) {
				return
			}
			continue
		}
		if len(snd.out) == 0 {
			if b := s.ring.TakeHeld(); b != nil {
				snd.out = append(snd.out, b)
			}
		}
		if len(snd.out) > 0 {
			if !s.send(ctx, snd) {
				return
			}
			continue
		}
		acks, dead, due := snd.fwd.AckEvents() // nil while no frame is in flight
		_, stuck, _ := s.stuckSpill(snd)
		select {
		case b := <-s.ring.Queue():
			snd.out = append(snd.out, b)
		case tok := <-acks:
			fl, err := snd.fwd.OnAck(tok)
			if s.acked(snd, fl, err) {
				s.sealAfterSend() // a flush owed while acks lagged
			}
		case <-dead:
			fl, err := snd.fwd.OnDead()
			s.acked(snd, fl, err)
		case <-due:
			s.acked(snd, forward.Flight{}, snd.fwd.OnDue())
		case <-wake:
			if s.fewInFlight() {
				s.flush()
			} else {
				s.flushOwed.Store(true) // see fewInFlight
			}
		case done := <-evacuate:
			s.evacuate(snd, done)
		case <-stuck: // stuckSpill is due
		case <-spillKick:
		case <-ctx.Done():
			return
		}
	}
}

// send is run's delivery of snd.out, counted busy for flushTick; it reports false when ctx
// was cancelled, with what is left in snd.out (and in flight) for Close.
func (s *stream) send(ctx context.Context, snd *sender) bool {
	s.busy.Add(1)
	ok := s.deliver(ctx, snd)
	s.busy.Add(-1)
	if ok {
		s.sealAfterSend()
	}
	return ok
}

// deliver writes the batches of snd.out, oldest first, until each is written (true, once
// snd.out is empty) or ctx is cancelled (false). After a failure — of a write, or of the
// connection while frames waited for their acks, which puts them back in front — it waits
// with backoff before the next attempt. On the err stream with a durable spill, batches
// that have failed for SpillAfter, or once writers spill because the buffers are full, go to
// the spill instead (true), and run switches to replaying.
func (s *stream) deliver(ctx context.Context, snd *sender) bool {
	_, spillKick, evacuate := s.policy.signals()
	for len(snd.out) > 0 {
		if snd.owed {
			snd.owed = false
			s.ring.Compact(snd.out[len(snd.out)-1])
			due, within := s.policy.spillDue(snd.failingSince, s.clock.Now())
			if due {
				return s.spillFailed(ctx, snd)
			}
			// The next attempt comes no later than the spill is due: if it fails too, the
			// batches go to the spill then, not after a long backoff step. The wait is on
			// the stream's clock, whose ticker ends it.
			t := s.clock.NewTicker(max(min(nextWait(snd.bo), within), time.Nanosecond))
			for waiting := true; waiting; {
				select {
				case <-t.C:
					waiting = false
				case <-spillKick:
					s.ring.Compact(snd.out[len(snd.out)-1])
					if s.spillKicked() {
						t.Stop()
						return s.spillFailed(ctx, snd)
					}
				case done := <-evacuate:
					t.Stop()
					s.evacuate(snd, done)
					return true
				case <-ctx.Done():
					t.Stop()
					return false
				}
			}
			t.Stop()
		}
		if s.post(ctx, snd) {
			if len(snd.out) > 0 { // else post moved them to the spill (stuckSpill)
				snd.out = snd.out[:copy(snd.out, snd.out[1:])]
			}
			continue
		}
		if ctx.Err() != nil {
			return false
		}
	}
	return true
}

// nextWait is the backoff's next wait; a backoff that gives up (none here does) waits a
// second.
func nextWait(bo backoff.BackOff) time.Duration {
	if wait := bo.NextBackOff(); wait != backoff.Stop {
		return wait
	}
	return time.Second
}

// failed records a failure whose first attempt began at start: the next attempt waits for
// the backoff.
func (snd *sender) failed(start time.Time) {
	if snd.failingSince.IsZero() || start.Before(snd.failingSince) {
		snd.failingSince = start
	}
	snd.owed = true
}

// recovered records a delivery: the failure, if there was one, is over.
func (snd *sender) recovered() {
	if !snd.failingSince.IsZero() {
		snd.failingSince, snd.owed = time.Time{}, false
		snd.bo.Reset()
	}
}

// post writes the frames of snd.out[0] not delivered yet, one per tag it holds (see
// batch.group), each once snd's connection has room for one more in flight. Without acks
// the batch is then delivered; with them it is when the ack of its last frame comes
// (acked). It reports false when the connection failed (the frames that were in flight on
// it are back in snd.out, ahead of the batch, which appears there once) or ctx was
// cancelled. On the err stream, while the connection is stuck (stuckSpill), it writes
// nothing more: snd.out goes to the spill instead, with the batches of the frames in
// flight, and it reports true with snd.out empty.
func (s *stream) post(ctx context.Context, snd *sender) bool {
	b := snd.out[0]
	s.regroup(b)
	start := s.clock.Now()
	for i := range b.Runs {
		if b.Sent[i] {
			continue
		}
		for {
			if !s.pollAcks(snd) {
				return false
			}
			if !snd.fwd.Full() {
				if spilled, _, _ := s.stuckSpill(snd); spilled {
					return true
				}
				break
			}
			fl, spilled, err := s.awaitAck(ctx, snd)
			if spilled {
				return true
			}
			if !s.acked(snd, fl, err) {
				return false
			}
		}
		tag, entries, n := b.Frame(i)
		var chunk string
		if snd.fwd.RequireAck() {
			chunk = b.Token(i)
		}
		start = s.clock.Now()
		size, fresh, err := snd.fwd.Post(ctx, s.tagOf(tag), entries, n, chunk, b)
		if !s.countSend(snd, fresh, size, err) {
			if ctx.Err() == nil {
				snd.failed(start)
			}
			s.requeue(snd)
			return false
		}
		if chunk == "" {
			b.Sent[i] = true
			s.counts.frameDelivered(tag, entries, n)
		}
	}
	if !snd.fwd.RequireAck() || b.AllSent() {
		s.observeSend(start)
		s.ring.Finish(b)
		snd.recovered()
	}
	return true
}

// pollAcks handles, without waiting, the acks (and the failure) that have come for snd's
// frames in flight. It reports false if the connection failed.
func (s *stream) pollAcks(snd *sender) bool {
	for {
		acks, dead, _ := snd.fwd.AckEvents()
		if acks == nil {
			return true // no connection
		}
		var fl forward.Flight
		var err error
		select {
		case tok := <-acks:
			fl, err = snd.fwd.OnAck(tok)
		case <-dead:
			fl, err = snd.fwd.OnDead()
		default:
			return true
		}
		if !s.acked(snd, fl, err) {
			return false
		}
	}
}

// acked handles what the forwarder reported of snd's frames in flight: an ack delivers its
// batch; an error (the connection failed) puts the frames that were in flight back in
// snd.out, ahead of the rest. It reports false on an error.
func (s *stream) acked(snd *sender, fl forward.Flight, err error) bool {
	if err != nil {
		if !errors.Is(err, context.Canceled) { // Close
			s.sendErrors.Add(1)
			// The failure began with the oldest frame that was waiting for its ack.
			snd.failed(cmp.Or(snd.fwd.Window().OldestLost(), s.clock.Now()))
		}
		s.requeue(snd)
		return false
	}
	if b := fl.Batch; b != nil {
		s.observeSend(fl.At)
		if i := b.FrameOf(fl.Chunk); i >= 0 && !b.Sent[i] {
			b.Sent[i] = true
			s.counts.frameDelivered(b.Frame(i))
		}
		if b.AllSent() {
			s.ring.Finish(b)
		}
	} else if fl.Spilled {
		s.duplicated.Add(uint64(fl.N)) // in the spill too (stuckSpill): counted there
	}
	if fl.Chunk != "" {
		snd.recovered()
	}
	return true
}

// settle waits until every frame snd has in flight is acked, or has failed and is back in
// snd.out. It reports false if ctx was cancelled first.
func (s *stream) settle(ctx context.Context, snd *sender) bool {
	for snd.fwd.Window().InFlight() > 0 {
		fl, _, err := s.awaitAck(ctx, snd)
		s.acked(snd, fl, err)
		if ctx.Err() != nil {
			return false
		}
	}
	return true
}

// awaitAck is snd.fwd.AwaitAck with, on the err stream, the care of a stuck connection
// while it waits: stuckSpill, which its own deadline and the entries written (which may
// also owe a flush) have it look at again. It reports spilled when
// the pending batches went to the spill, snd.out with them; once they have, it moves what
// is sealed to the spill as it comes, until the frames in flight are acked or fail.
func (s *stream) awaitAck(ctx context.Context, snd *sender) (fl forward.Flight, spilled bool, err error) {
	if s.errSpill == nil {
		fl, err = snd.fwd.AwaitAck(ctx)
		return fl, false, err
	}
	wake, _, _ := s.policy.signals()
	for {
		acks, dead, due := snd.fwd.AckEvents()
		if dead == nil {
			return forward.Flight{}, false, nil // nothing in flight
		}
		spilled, stuck, past := s.stuckSpill(snd)
		if spilled {
			return forward.Flight{}, true, nil
		}
		var queue <-chan *ring.Batch
		if past {
			queue = s.ring.Queue() // snd.out is empty: stuckSpill would have moved it
		}
		select {
		case tok := <-acks:
			fl, err = snd.fwd.OnAck(tok)
		case <-dead:
			fl, err = snd.fwd.OnDead()
		case <-due:
			err = snd.fwd.OnDue()
		case <-stuck:
		case b := <-queue:
			s.spillSealed(b)
		case <-wake:
			if s.fewInFlight() {
				s.flush()
			} else {
				s.flushOwed.Store(true) // see fewInFlight
			}
		case <-ctx.Done():
			return forward.Flight{}, false, ctx.Err()
		}
		if err != nil || fl.Chunk != "" {
			return fl, false, err
		}
	}
}

// requeue puts the batches of the frames snd's connection lost (or still has in flight)
// back in front of snd.out, oldest first, each once (a batch's frames may be some in
// flight, some not written). Nothing is allocated: both slices can hold every batch of the
// stream.
func (s *stream) requeue(snd *sender) {
	if !snd.fwd.Window().HasUnacked() {
		return
	}
	next := snd.fwd.Window().TakeUnacked(snd.spare[:0])
	if len(next) > 0 && len(snd.out) > 0 && next[len(next)-1] == snd.out[0] {
		next = next[:len(next)-1]
	}
	next = append(next, snd.out...)
	snd.out, snd.spare = next, snd.out[:0]
}

// countSend counts one attempt to write a frame, and reports whether it succeeded.
func (s *stream) countSend(snd *sender, fresh bool, size int, err error) bool {
	if fresh && snd.fwd.Status().Connects() > 1 {
		s.reconnects.Add(1)
	}
	if err != nil {
		s.sendErrors.Add(1)
		return false
	}
	s.sentBatches.Add(1)
	s.sentBytes.Add(uint64(size))
	return true
}

// observeSend records how long a frame took from its write (or the attempt that wrote it)
// to its delivery.
func (s *stream) observeSend(start time.Time) {
	s.sendDuration.Observe(s.clock.Now().Sub(start).Seconds())
}
