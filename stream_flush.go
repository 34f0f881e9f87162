package fluentcore

// The flush policy: when the open batches are sealed partly filled. The clock's tick does it
// only while the senders are idle, so that a busy or failing sender does not spend the
// budget on half-empty batches; the sender does a flush it owes once idle again.

import "time"

// flushTick is the clock's flush: it seals the open batches when the sender is waiting for
// work. A batch sealed while the sender is still busy (a slow receiver, an ack that does not
// come) or failing (an outage) would wait with the rest of its buffer unused, and every
// FlushInterval would seal one more per shard: the budget would run out on batch buffers,
// not on bytes. Then the tick only marks the flush owed, and the sender seals the open
// batches itself once it is idle again (sealAfterSend). Full batches, Sync, Close and a
// DPanic/Panic/Fatal seal at any time. The err stream keeps sealing while failing with a
// durable spill, and without one once sends have failed for SpillAfter: its sealed batches
// go to the spill, which frees them, and an entry there survives a crash; so it does while
// its sender has been stuck in one attempt for SpillAfter (stuckPast), failing or not.
func (s *stream) flushTick(now time.Time) {
	s.shards.calm()
	failing := s.failing()
	if failing && s.policy.sealsWhileFailing(s.disconnectedFor(now)) || s.stuckPast(now) {
		s.flush()
		return
	}
	if failing || s.busy.Load() > 0 || !s.ring.Idle() || !s.fewInFlight() {
		s.flushOwed.Store(true)
		return
	}
	s.flush()
}

// stuckPast reports whether, at now, the err stream's sender has been stuck in one attempt
// (stuckSince) for SpillAfter: its pending batches go to the spill (stuckSpill), and so do
// those sealed while it lasts. Always false on the info stream.
func (s *stream) stuckPast(now time.Time) bool {
	if s.errSpill == nil {
		return false
	}
	at := s.stuckSince()
	return at != 0 && now.Sub(time.Unix(0, at)) >= s.errSpill.spillAfter
}

// sealAfterSend is the sender's side of flushTick: a flush the tick skipped while the sender
// was busy is done as soon as nothing else waits to be sent.
func (s *stream) sealAfterSend() {
	if s.ring.Idle() && s.fewInFlight() && s.flushOwed.Swap(false) {
		s.flush()
	}
}

// fewInFlight reports whether every connection has at most one frame waiting for its ack.
// A frame in flight holds its whole batch buffer until the ack comes, so while acks lag
// (a receiver that stalls, or is slow), batches sealed partly filled would keep the rest
// of their buffers unused, as with a sender that is busy: the flush waits, and partly
// filled batches stop going out once a second frame waits (one flush, a batch per shard,
// may be on the way then).
func (s *stream) fewInFlight() bool {
	for _, snd := range s.senders {
		if snd.fwd.Status().FramesInFlight() > 1 {
			return false
		}
	}
	return true
}
