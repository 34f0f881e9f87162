package stream

// The flush policy: when the open batches are sealed partly filled. The clock's tick does it
// only while the senders are idle, so that a busy or failing sender does not spend the
// budget on half-empty batches; the sender does a flush it owes once idle again.

import (
	"sync/atomic"
	"time"

	"github.com/fluentcore/fluentcore/internal/ring"
)

// flusher is a stream's flush policy: it seals the open batches partly filled (through the
// stream's flush) when the senders are waiting for work. A batch sealed while a sender is
// still busy (a slow receiver, an ack that does not come) or failing (an outage) would wait
// with the rest of its buffer unused, and every Transport.FlushInterval would seal one more per
// shard: the budget would run out on batch buffers, not on bytes. Then the tick only marks
// the flush owed, and a sender seals the open batches itself once it is idle again
// (afterSend). Full batches, Sync, Close and a DPanic/Panic/Fatal seal at any time.
//
// A frame in flight holds its whole batch buffer until its ack comes, so while acks lag
// (a receiver that stalls, or is slow) the flush waits too, as for a busy sender: partly
// filled batches stop going out once a second frame waits on a connection (fewInFlight;
// one flush, a batch per shard, may be on the way then).
//
// What the stream cannot carry may have it seal while failing (overflow.sealsNow): the err
// stream's sealed batches go to the spill, which frees them.
type flusher struct {
	ring    *ring.Ring
	stream  streamView
	over    Overflow
	senders Senders      // the stream's, set once they are made (New)
	busy    atomic.Int32 // senders holding a batch (sender.run, while snd.out holds one)
	owed    atomic.Bool  // a flush tick found a sender busy, or acks lagging
}

// newFlusher returns the flush policy of a stream of the ring r, sealing through view,
// whose overflow is over; its senders are set once they are made, with the flusher.
func newFlusher(r *ring.Ring, view streamView, over Overflow) *flusher {
	return &flusher{ring: r, stream: view, over: over}
}

// tick is the clock's flush, every Transport.FlushInterval at now.
func (f *flusher) tick(now time.Time) {
	failing := f.senders.Failing()
	if f.over.sealsNow(now, failing, f.senders) {
		f.stream.Flush()
		return
	}
	if failing || f.busy.Load() > 0 || !f.ring.Idle() || !f.senders.fewInFlight() {
		f.owed.Store(true)
		return
	}
	f.stream.Flush()
}

// afterSend is a sender's side of tick: a flush the tick skipped while a sender was busy is
// done as soon as nothing else waits to be sent.
func (f *flusher) afterSend() {
	if f.ring.Idle() && f.senders.fewInFlight() && f.owed.Swap(false) {
		f.stream.Flush()
	}
}

// wake is a sender's answer to its stream's wake (an err entry is waiting): it seals the
// open batches at once, unless acks lag, when the flush is owed.
func (f *flusher) wake() {
	if f.senders.fewInFlight() {
		f.stream.Flush()
	} else {
		f.owed.Store(true)
	}
}

// FlushTick is the clock's flush of the stream at now: the shards calm again, unless
// writers still meet (shards.lock), and the flush policy's tick.
func (s *Stream) FlushTick(now time.Time) {
	s.shards.calm()
	s.flusher.tick(now)
}
