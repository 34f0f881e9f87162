package stream

// The senders: one goroutine per connection of the stream takes sealed batches, frames them
// through its forwarder (internal/forward) and finishes each once delivered (with Info.Acks, when
// its ack comes); after a failure it waits its backoff and sends the same batches again.
// The time of their attempts and failures, and so Spill.After's, is the stream's clock
// (Settings.Clock); their waits are plain timers.

import (
	"cmp"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/fluentcore/fluentcore/internal/forward"
	"github.com/fluentcore/fluentcore/internal/ring"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zapcore"
)

// streamView is what the senders, the flush policy and the err stream's spill use of their
// stream, which implements it: a batch's runs put together before its first frame, a tag's
// name, the counts of what was delivered or spilled, and sealing every open batch.
type streamView interface {
	regroup(b *ring.Batch)
	tagOf(idx uint16) string
	countDelivered(tag uint16, entries []byte, n int)
	countSpill(err error, n int, tag uint16)
	Flush()
}

// sender is one of a stream's connections and the goroutine that sends on it (run). Its
// batches are in one place at a time: in out (taken, not written), in flight on its
// forwarder (written, waiting for their acks), or handed back to the ring (Finish) or to
// its route. Only its own goroutine touches it, but for Close once that has stopped
// (giveBack).
type sender struct {
	fwd *forward.Forwarder
	bo  backoff.BackOff
	// out holds the batches the sender has taken and not written on its connection, oldest
	// first: the one it is sending, and those whose frames a failed connection lost. spare
	// is the other buffer requeue builds into; both can hold every batch of the stream.
	out, spare []*ring.Batch
	// failingSince is when the first attempt of the failure under way began (zero since the
	// last delivery); owed says a failure has come since the last backoff wait. A failure
	// may come after the write (an ack), so both outlive the delivery of one snd.out.
	failingSince time.Time
	owed         bool
	// stuckT is the clock's ticker of the route's deadline for a stuck connection (nil
	// until the first; the err stream's, see errSpill.stuck).
	stuckT *time.Ticker

	ring   *ring.Ring  // the stream's batches
	stream streamView  // the stream's, for framing and counting
	route  SpillRoute  // where batches go that cannot be delivered: the err stream's spill, or nowhere
	flush  *flusher    // the stream's flush policy, which a sender done sending or woken asks
	counts *sendCounts // the stream's counters, which its senders share
	clock  zapcore.Clock
	window int // the most frames the stream's connections hold in flight together
}

// newSender returns a sender on fwd for a stream of the ring r, whose connections hold at
// most window frames in flight together.
func newSender(fwd *forward.Forwarder, r *ring.Ring, view streamView, route SpillRoute, fl *flusher, counts *sendCounts, clock zapcore.Clock, window int) *sender {
	nb := len(r.Batches())
	return &sender{fwd: fwd, bo: fwd.NewBackoff(), out: make([]*ring.Batch, 0, nb), spare: make([]*ring.Batch, 0, nb),
		ring: r, stream: view, route: route, flush: fl, counts: counts, clock: clock, window: window}
}

// run is one of the stream's senders: it delivers sealed batches, taking each as it comes,
// on its own connection, until ctx is cancelled; then it calls wg.Done. With Info.Acks it
// writes up to Transport.MaxInflight frames ahead and finishes each batch when its ack
// comes. With one sender batches go out in order. With a durable spill (err stream,
// Spill.Dir, one sender) it first replays whatever the spill holds — also what a previous
// process left there — and sends from memory again once it is empty (route.replay).
//
// It writes the batches of snd.out, oldest first, until each is written (post) or ctx is
// cancelled. After a failure — of a write, or of the connection while frames waited for
// their acks, which puts them back in front — it waits with backoff before the next
// attempt (retryWait). Where the route spills (the err stream), batches that have failed
// for Spill.After, or once writers spill because the buffers are full, go to the spill
// instead, and run switches to replaying. While snd.out holds batches, the sender counts as
// busy for the flush policy, and once it is empty run does a flush owed (afterSend).
func (snd *sender) run(ctx context.Context, wg *sync.WaitGroup) {
	defer wg.Done()
	if !snd.fwd.Start(ctx, snd.window) {
		return // a connection past the stream's count, or Close before the first lookup ended
	}
	wake, spillKick, evacuate := snd.route.signals()
	for {
		if active, ok := snd.route.replay(ctx, snd); active {
			if !ok {
				return
			}
			continue
		}
		if len(snd.out) == 0 {
			if b := snd.ring.TakeHeld(); b != nil {
				snd.out = append(snd.out, b)
			}
		}
		if len(snd.out) > 0 {
			snd.flush.busy.Add(1)
			ok := true // false once ctx is cancelled
			for ok && len(snd.out) > 0 {
				if snd.owed {
					var spilled bool
					if spilled, ok = snd.retryWait(ctx); spilled || !ok {
						break
					}
				}
				if snd.post(ctx) {
					if len(snd.out) > 0 { // else post moved them to the spill (route.stuck)
						snd.out = snd.out[:copy(snd.out, snd.out[1:])]
					}
				} else {
					ok = ctx.Err() == nil
				}
			}
			snd.flush.busy.Add(-1)
			if !ok {
				return
			}
			snd.flush.afterSend()
			continue
		}
		acks, dead, due := snd.fwd.AckEvents() // nil while no frame is in flight
		_, stuck, _ := snd.route.stuck(snd)
		select {
		case b := <-snd.ring.Queue():
			snd.out = append(snd.out, b)
		case tok := <-acks:
			fl, err := snd.fwd.OnAck(tok)
			if snd.acked(fl, err) {
				snd.flush.afterSend() // a flush owed while acks lagged
			}
		case <-dead:
			fl, err := snd.fwd.OnDead()
			snd.acked(fl, err)
		case <-due:
			snd.acked(forward.Flight{}, snd.fwd.OnDue())
		case <-wake:
			snd.flush.wake()
		case done := <-evacuate:
			snd.route.evacuate(snd, done)
		case <-stuck: // the route's deadline for a stuck connection
		case <-spillKick:
		case <-ctx.Done():
			return
		}
	}
}

// retryWait is run's wait before it sends snd.out again after a failure (snd.owed): the
// queue compacted, then the backoff's next wait, or less if the spill is due sooner. It
// reports spilled once snd.out went to the spill instead (then run goes on, and switches to
// replaying), and ok false once ctx was cancelled, while it waited or while it spilled.
func (snd *sender) retryWait(ctx context.Context) (spilled, ok bool) {
	_, spillKick, evacuate := snd.route.signals()
	snd.owed = false
	snd.ring.Compact(snd.out[len(snd.out)-1])
	spilled, ok, within := snd.route.overdue(ctx, snd)
	if spilled {
		return true, ok
	}
	// The next attempt comes no later than the spill is due: if it fails too, the batches
	// go to the spill then, not after a long backoff step. The wait is on the stream's
	// clock, whose ticker ends it.
	t := snd.clock.NewTicker(max(min(nextWait(snd.bo), within), time.Nanosecond))
	defer t.Stop()
	for {
		select {
		case <-t.C:
			return false, true
		case <-spillKick:
			snd.ring.Compact(snd.out[len(snd.out)-1])
			if spilled, ok := snd.route.kicked(ctx, snd); spilled {
				return true, ok
			}
		case done := <-evacuate:
			snd.route.evacuate(snd, done)
			return true, true
		case <-ctx.Done():
			return false, false
		}
	}
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
// cancelled. While the route finds the connection stuck (the err stream's, errSpill.stuck),
// it writes nothing more: snd.out goes to the spill instead, with the batches of the
// frames in flight, and it reports true with snd.out empty.
func (snd *sender) post(ctx context.Context) bool {
	b := snd.out[0]
	snd.stream.regroup(b)
	start := snd.clock.Now()
	for i := range b.Runs {
		if b.Sent[i] {
			continue
		}
		for {
			if !snd.pollAcks() {
				return false
			}
			if !snd.fwd.Full() {
				if spilled, _, _ := snd.route.stuck(snd); spilled {
					return true
				}
				break
			}
			fl, spilled, err := snd.awaitAck(ctx)
			if spilled {
				return true
			}
			if !snd.acked(fl, err) {
				return false
			}
		}
		tag, entries, n := b.Frame(i)
		var chunk string
		if snd.fwd.RequireAck() {
			chunk = b.Token(i)
		}
		start = snd.clock.Now()
		size, fresh, err := snd.fwd.Post(ctx, snd.stream.tagOf(tag), entries, n, chunk, b)
		if !snd.counts.attempt(snd.fwd, fresh, size, err) {
			if ctx.Err() == nil {
				snd.failed(start)
			}
			snd.requeue()
			return false
		}
		if chunk == "" {
			b.Sent[i] = true
			snd.stream.countDelivered(tag, entries, n)
		}
	}
	if !snd.fwd.RequireAck() || b.AllSent() {
		snd.counts.observe(start)
		snd.ring.Finish(b)
		snd.recovered()
	}
	return true
}

// Forwarder returns the connection snd sends on.
func (snd *sender) Forwarder() *forward.Forwarder { return snd.fwd }

// sendFrame sends one frame that is no batch of the ring (the durable spill's replay) on
// snd's connection, waiting for its ack (no frame may be in flight), and counts it.
func (snd *sender) sendFrame(ctx context.Context, tag string, entries []byte, n int) bool {
	start := snd.clock.Now()
	size, fresh, err := snd.fwd.Send(ctx, tag, entries, n)
	if !snd.counts.attempt(snd.fwd, fresh, size, err) {
		return false
	}
	snd.counts.observe(start)
	return true
}

// pollAcks handles, without waiting, the acks (and the failure) that have come for snd's
// frames in flight. It reports false if the connection failed.
func (snd *sender) pollAcks() bool {
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
		if !snd.acked(fl, err) {
			return false
		}
	}
}

// acked handles what the forwarder reported of snd's frames in flight: an ack delivers its
// batch; an error (the connection failed) puts the frames that were in flight back in
// snd.out, ahead of the rest. It reports false on an error.
func (snd *sender) acked(fl forward.Flight, err error) bool {
	if err != nil {
		if !errors.Is(err, context.Canceled) { // Close
			snd.counts.sendErrors.Add(1)
			// The failure began with the oldest frame that was waiting for its ack.
			snd.failed(cmp.Or(snd.fwd.Window().OldestLost(), snd.clock.Now()))
		}
		snd.requeue()
		return false
	}
	if b := fl.Batch; b != nil {
		snd.counts.observe(fl.At)
		if i := b.FrameOf(fl.Chunk); i >= 0 && !b.Sent[i] {
			b.Sent[i] = true
			snd.stream.countDelivered(b.Frame(i))
		}
		if b.AllSent() {
			snd.ring.Finish(b)
		}
	} else if fl.Spilled {
		snd.counts.duplicated.Add(uint64(fl.N)) // in the spill too (errSpill.stuck): counted there
	}
	if fl.Chunk != "" {
		snd.recovered()
	}
	return true
}

// settle waits until every frame snd has in flight is acked, or has failed and is back in
// snd.out. It reports false if ctx was cancelled first.
func (snd *sender) settle(ctx context.Context) bool {
	for snd.fwd.Window().InFlight() > 0 {
		fl, _, err := snd.awaitAck(ctx)
		snd.acked(fl, err)
		if ctx.Err() != nil {
			return false
		}
	}
	return true
}

// awaitAck waits for the next event of the frames in flight, as forward.Forwarder.AwaitAck
// does, with the route's care of a stuck connection while it waits (route.stuck, which the
// deadline it returns has it look at again; the err stream's, whose entries written may
// also owe a flush). It reports spilled when the pending batches went to the spill,
// snd.out with them; once they have, it moves what is sealed to the spill as it comes,
// until the frames in flight are acked or fail.
func (snd *sender) awaitAck(ctx context.Context) (fl forward.Flight, spilled bool, err error) {
	wake, _, _ := snd.route.signals()
	for {
		acks, dead, due := snd.fwd.AckEvents()
		if dead == nil {
			return forward.Flight{}, false, nil // nothing in flight
		}
		spilled, stuck, past := snd.route.stuck(snd)
		if spilled {
			return forward.Flight{}, true, nil
		}
		var queue <-chan *ring.Batch
		if past {
			queue = snd.ring.Queue() // snd.out is empty: route.stuck would have moved it
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
			snd.route.spillBatch(b)
		case <-wake:
			snd.flush.wake()
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
func (snd *sender) requeue() {
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

// giveBack hands every batch snd holds to abandon, oldest first: those of the acks that
// came in before it stopped are delivered first, then the frames in flight, then snd.out.
// Close calls it once run has returned.
func (snd *sender) giveBack(abandon func(*ring.Batch)) {
	snd.pollAcks()
	snd.requeue()
	for _, b := range snd.out {
		abandon(b)
	}
	snd.out = snd.out[:0]
}

// sendCounts are a stream's counters of its senders' attempts and deliveries, which its
// senders share; Stats reads them.
type sendCounts struct {
	replayed                                       atomic.Uint64 // delivered from the durable spill
	duplicated                                     atomic.Uint64 // acked after their batch was spilled (errSpill.stuck)
	sentBatches, sentBytes, sendErrors, reconnects atomic.Uint64
	duration                                       prometheus.Observer // this stream's histogram of send times
	clock                                          zapcore.Clock
}

// attempt counts one attempt of fwd to write a frame, and reports whether it succeeded.
func (c *sendCounts) attempt(fwd *forward.Forwarder, fresh bool, size int, err error) bool {
	if fresh && fwd.Status().Connects() > 1 {
		c.reconnects.Add(1)
	}
	if err != nil {
		c.sendErrors.Add(1)
		return false
	}
	c.sentBatches.Add(1)
	c.sentBytes.Add(uint64(size))
	return true
}

// observe records how long a frame took from its write (or the attempt that wrote it) to
// its delivery.
func (c *sendCounts) observe(start time.Time) {
	c.duration.Observe(c.clock.Now().Sub(start).Seconds())
}

// Senders are a stream's senders, one per connection, made once with the stream; the err
// stream has one. Its methods read the connections' status and are safe for concurrent use.
type Senders []*sender

// Start starts each sender's goroutine on wg, until ctx is cancelled.
func (ss Senders) Start(ctx context.Context, wg *sync.WaitGroup) {
	for _, snd := range ss {
		wg.Add(1)
		go snd.run(ctx, wg)
	}
}

// Release hands every batch the senders hold to abandon (giveBack), only once their
// goroutines have stopped (Close).
func (ss Senders) Release(abandon func(*ring.Batch)) {
	for _, snd := range ss { // oldest first: in flight, unsent, held
		snd.giveBack(abandon)
	}
}

// CloseAll closes every sender's connection.
func (ss Senders) CloseAll() {
	for _, snd := range ss {
		snd.fwd.Close()
	}
}

// Sending returns the senders that send: the first forward.Forwarder.Sending of them (the
// others never start, and hold nothing).
func (ss Senders) Sending() Senders { return ss[:ss[0].fwd.Sending()] }

// Failing reports whether every connection of the stream is failing: nothing drains.
func (ss Senders) Failing() bool {
	for _, snd := range ss.Sending() {
		if !snd.fwd.Status().Failing() {
			return false
		}
	}
	return true
}

// DisconnectedFor is how long the stream has had no working connection at now; 0 if it has
// one.
func (ss Senders) DisconnectedFor(now time.Time) time.Duration {
	d := ss[0].fwd.Status().DisconnectedFor(now)
	for _, snd := range ss.Sending()[1:] {
		d = min(d, snd.fwd.Status().DisconnectedFor(now))
	}
	return d
}

// stuckSince returns since when every connection of the stream has been stuck (unix nanos,
// the stream's clock): in one attempt — a dial, a write, or the oldest frame waiting for
// its ack — with no frame taken since (forward.Status.StuckSince). 0 while a connection is in no
// attempt.
func (ss Senders) stuckSince() int64 {
	var since int64
	for _, snd := range ss.Sending() {
		at := snd.fwd.Status().StuckSince()
		if at == 0 {
			return 0
		}
		since = max(since, at)
	}
	return since
}

// LastError is the last send error of a connection, if one has one.
func (ss Senders) LastError() error {
	for _, snd := range ss {
		if err := snd.fwd.Status().LastError(); err != nil {
			return err
		}
	}
	return nil
}

// fewInFlight reports whether every connection has at most one frame waiting for its ack
// (see flusher).
func (ss Senders) fewInFlight() bool {
	for _, snd := range ss {
		if snd.fwd.Status().FramesInFlight() > 1 {
			return false
		}
	}
	return true
}
