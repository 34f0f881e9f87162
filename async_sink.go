package fluentcore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/fluentcore/fluentcore/internal/spill"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/tinylib/msgp/msgp"
	"go.uber.org/zap/zapcore"
)

// The sink owns every buffer. Each stream has a fixed set of batch buffers, allocated once
// in newStream, that circulate: free list -> a shard's open batch (writers append encoded
// entries under the shard's lock) -> sealed and queued -> the sender writes it -> free list.
// Nothing is pooled or allocated per entry, so memory is bounded by configuration whatever
// the receiver does.
//
// The two streams share all of that; what differs is a policy value per stream: the info
// stream's (infoPolicy, degrade.go) drops what it cannot carry and counts it, the err
// stream's (errPolicy, err_spill.go) waits, truncates and spills instead.

// batch is one buffer of encoded entries: the payload of one PackedForward frame.
type batch struct {
	buf   []byte // concatenated Forward entries; cap is the stream's batch size, never grown
	n     int    // entries in buf
	first uint64 // the first position in the stream's sealing order this batch finishes
	seq   uint64 // the last: first and seq differ once compact has merged batches into it
	tok   ackToken
}

// sender is one of a stream's connections and the goroutine that sends on it.
type sender struct {
	fwd *forwarder
	bo  backoff.BackOff
	// out holds the batches the sender has taken and not written on its connection, oldest
	// first: the one it is sending, and those whose frames a failed connection lost. spare
	// is the other buffer requeue builds into; both can hold every batch of the stream.
	out, spare []*batch
	// failingSince is when the first attempt of the failure under way began (zero since the
	// last delivery); owed says a failure has come since the last backoff wait. A failure
	// may come after the write (an ack), so both outlive one call to deliver.
	failingSince time.Time
	owed         bool
}

// seqRange is a run of sealing positions, first to last, that the senders have finished.
type seqRange struct{ first, last uint64 }

// shard is one open batch and the encoder that writes into it. A writer takes shard 0 when
// it is free and another at random when it is not (lockShard), so many goroutines rarely
// meet on one lock, and one goroutine's entries stay in sealing order (the receiver's
// order too while the stream sends on one connection).
type shard struct {
	mu        sync.Mutex
	enc       *msgpEncoder
	cur       *batch // nil until a writer takes a batch from the free list
	entries   atomic.Uint64
	truncated atomic.Uint64 // err entries delivered cut down to MaxEntryBytes
	sinkHolds atomic.Int32  // lockForSink callers holding or waiting for mu
	sinkLocks atomic.Uint32 // lockForSink calls so far
	dropped   [numDropReasons]atomic.Uint64
	_         [64]byte // keep neighbouring shards off this cache line
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

// stream is one of the two streams: its buffers, its sender and its counters.
type stream struct {
	id       streamID
	tag      string
	shards   []shard
	free     chan *batch // batches ready for writers
	queue    chan *batch // sealed batches, in seq order, for the sender
	nbatches int
	batchCap int // bytes per batch
	sealAt   int // a batch this full is sealed right away
	entryCap int // largest encoded entry accepted
	closed   atomic.Bool
	senders  []*sender // one per connection; the err stream has one

	// The stream's policy: exactly one is set.
	info *infoPolicy
	err  *errPolicy

	sealMu sync.Mutex
	sealed uint64 // seq of the last sealed batch

	doneMu   sync.Mutex
	done     uint64        // every batch up to this seq is finished
	early    []seqRange    // finished above done, behind a batch another sender still holds
	progress chan struct{} // closed and replaced when done advances while someone waits
	watched  bool          // a waitDone caller holds progress

	heldMu sync.Mutex
	held   []*batch     // batches compact took from the queue, in order: sent before the queue
	heldN  atomic.Int64 // len(held), for readers without heldMu

	queuedBytes                                    atomic.Int64
	queuedBatches                                  atomic.Int64
	delivered, spilled                             atomic.Uint64
	waits                                          atomic.Uint64 // err writes that found no room and waited
	waitsOut                                       atomic.Uint64 // of those, the ones whose ErrMaxWait ran out
	attemptSince                                   atomic.Int64  // unix nanos when the attempt under way began (post, a replayed frame), 0 if none: read on the err stream, which has one sender
	busy                                           atomic.Int32  // senders holding a batch (deliver)
	flushOwed                                      atomic.Bool   // a flush tick found the sender busy
	contended                                      atomic.Bool   // writers met on shard 0 since the last flush tick
	replayed                                       atomic.Uint64 // delivered from the durable spill
	sentBatches, sentBytes, sendErrors, reconnects atomic.Uint64
	sendDuration                                   prometheus.Observer // this stream's histogram
}

func newStream(id streamID, budget int, s *settings, fwds ...*forwarder) *stream {
	nb := max(budget/s.batchBytes, 2)
	nshards := min(2*runtime.GOMAXPROCS(0), nb/2)
	st := &stream{
		id:       id,
		tag:      s.tags[id],
		shards:   make([]shard, nshards),
		free:     make(chan *batch, nb),
		queue:    make(chan *batch, nb),
		nbatches: nb,
		batchCap: s.batchBytes,
		sealAt:   s.batchBytes - s.batchBytes/16,
		entryCap: s.entryBytes,
		held:     make([]*batch, 0, nb),
		early:    make([]seqRange, 0, nb+len(fwds)),
		progress: make(chan struct{}),
	}
	for _, f := range fwds {
		// The connections hold at most all but nshards of the batches in flight together:
		// that many stay out of flight, for the writers to fill and the senders to take next.
		f.setMaxInflight(min(s.maxInflight, (nb-nshards)/len(fwds)))
		st.senders = append(st.senders, &sender{fwd: f, bo: s.newBackoff(), out: make([]*batch, 0, nb), spare: make([]*batch, 0, nb)})
	}
	for i := range st.shards {
		st.shards[i].enc = newMsgpEncoder(s.enc)
	}
	for range nb {
		st.free <- &batch{buf: make([]byte, 0, s.batchBytes)}
	}
	return st
}

// writeStatus is what one attempt to append an entry under a shard's lock ended with.
type writeStatus uint8

const (
	written      writeStatus = iota // the entry is in a batch (or counted as dropped)
	needBatch                       // no free batch; the caller decides to drop or wait
	streamClosed                    // the stream is closed
	oversized                       // an err entry larger than entryCap even once truncated
)

// write appends one entry to the stream. Info entries that find no free batch are dropped
// (queue_full); err entries wait up to ErrMaxWait for one and are spilled after that. While
// every connection fails, the wait lasts only until the sender has moved the queued batches
// to the spill, and there is none while the sender is in an attempt to send.
func (s *stream) write(ctx *encodedContext, ent *zapcore.Entry, fields []zapcore.Field) {
	i := s.lockShard()
	sh := &s.shards[i]
	sh.entries.Add(1)
	var deadline time.Time
	for {
		status := s.tryWriteLocked(sh, ctx, ent, fields)
		if status == needBatch && s.failing() {
			// No free batch during an outage: the budget is in open batches and the queue.
			// Another shard's open batch may still have room, so what is buffered, not how it
			// is split into batches, decides when the stream is full. (In a flood the
			// receiver drains the queue; the rejected writer pays for no other shard's lock.)
			status = s.writeElsewhere(i, ctx, ent, fields)
		}
		switch status {
		case written:
			if s.err != nil {
				s.err.wakeSender()
			}
			return
		case oversized:
			// Err entries are never dropped: one that can't be truncated to fit goes to the
			// spill whole.
			s.spillEntry(ctx, ent, fields)
			return
		case streamClosed:
			if s.err != nil {
				s.spillEntry(ctx, ent, fields)
				return
			}
			sh.dropped[dropClosed].Add(1)
			return
		case needBatch:
			if s.info != nil {
				sh.dropped[dropQueueFull].Add(1)
				return
			}
			if s.failing() {
				if at := s.attemptSince.Load(); at != 0 && time.Since(time.Unix(0, at)) >= s.err.maxWait {
					// The sender is stuck in an attempt that may last its whole timeout (a
					// dial to a host that does not answer): it cannot make room before then,
					// so the entry goes to the spill now rather than wait.
					s.spillEntry(ctx, ent, fields)
					return
				}
				// The sender packs the queued batches, or moves them to the spill, at once:
				// the wait below ends as soon as that frees a batch, and order is kept.
				s.err.kickSpill()
			}
			if deadline.IsZero() {
				deadline = time.Now().Add(s.err.maxWait)
				s.waits.Add(1)
			}
			if !s.waitForBatch(sh, deadline) {
				s.waitsOut.Add(1)
				s.spillEntry(ctx, ent, fields)
				return
			}
			sh.mu.Lock()
		}
	}
}

// lockShard locks a shard for a writer and returns its index. While the stream is calm,
// shard 0: a writer that is alone (the usual case at a modest rate) always writes there,
// and the entries of one goroutine keep their order in the stream, since batches are
// sealed in order and one shard's batch is in order. (Random shards, even uncontended,
// interleaved the entries of consecutive calls by a batch.) A flush or a scrape holding
// shard 0 (lockForSink) is waited for, for the same reason. The first writer to find
// shard 0 taken by another writer marks the stream contended, and until the next flush
// tick writers pick a shard at random, as many goroutines logging at once need: trying
// shard 0 first under contention starved the sender (the AddingFields parallel benchmark
// delivered half as much). The order of concurrent calls is not defined anyway, though a
// goroutine that moves shards may see its entries reordered within a flush.
func (s *stream) lockShard() int {
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
	i := rand.N(len(s.shards))
	s.shards[i].mu.Lock()
	return i
}

// tryWriteLocked encodes the entry into the shard's open batch, taking a free batch if the
// shard has none. The caller holds the shard's lock; tryWriteLocked releases it.
func (s *stream) tryWriteLocked(sh *shard, ctx *encodedContext, ent *zapcore.Entry, fields []zapcore.Field) writeStatus {
	defer sh.mu.Unlock()
	if s.closed.Load() {
		return streamClosed
	}
	if sh.cur == nil {
		if sh.cur = s.takeFree(); sh.cur == nil {
			return needBatch
		}
	}
	return s.appendLocked(sh, ctx, ent, fields, true)
}

// writeElsewhere tries the open batches of the shards other than shard i, skipping any
// whose lock is taken: the slow path of a stream without a free batch, never a wait.
func (s *stream) writeElsewhere(i int, ctx *encodedContext, ent *zapcore.Entry, fields []zapcore.Field) writeStatus {
	for k := 1; k < len(s.shards); k++ {
		o := &s.shards[(i+k)%len(s.shards)]
		if !o.mu.TryLock() {
			continue
		}
		status := needBatch
		if o.cur != nil && !s.closed.Load() {
			status = s.appendLocked(o, ctx, ent, fields, false)
		}
		o.mu.Unlock()
		if status != needBatch {
			return status
		}
	}
	return needBatch
}

// appendLocked encodes the entry into sh.cur (not nil), under sh's lock. An entry that does
// not fit seals the batch and moves to a free one if own, or leaves the batch as it is and
// reports needBatch if not (a batch borrowed by writeElsewhere).
func (s *stream) appendLocked(sh *shard, ctx *encodedContext, ent *zapcore.Entry, fields []zapcore.Field, own bool) writeStatus {
	b := sh.cur
	start := len(b.buf)
	truncated := false
	out, ok := encodeSafely(sh.enc, b.buf, ctx, ent, fields)
	if !ok {
		b.buf = b.buf[:start]
		sh.dropped[dropEncodeError].Add(1)
		return written
	}
	if len(out)-start > s.entryCap {
		b.buf = b.buf[:start]
		if s.err == nil {
			sh.dropped[dropTooLarge].Add(1)
			return written
		}
		// An err entry is delivered with its largest values truncated and marked (see
		// capEntry); out[start:] is still intact, and capped lives in the encoder.
		capped, ok := sh.enc.capEntry(out[start:], s.entryCap)
		if !ok {
			return oversized
		}
		out, truncated = append(b.buf, capped...), true
	}
	if cap(out) != cap(b.buf) {
		// The entry did not fit and append moved everything to a new array.
		b.buf = b.buf[:start]
		if !own {
			return needBatch
		}
		// Seal the batch as it was and copy the entry into a fresh one (rare: only entries
		// larger than the space sealAt leaves get here).
		sh.cur = nil
		s.seal(b)
		nb := s.takeFree()
		if nb == nil {
			return needBatch
		}
		nb.buf = append(nb.buf, out[start:]...)
		nb.n = 1
		sh.cur = nb
		b = nb
	} else {
		b.buf = out
		b.n++
	}
	if truncated {
		sh.truncated.Add(1)
	}
	if len(b.buf) >= s.sealAt {
		sh.cur = nil
		s.seal(b)
	}
	return written
}

func (s *stream) takeFree() *batch {
	select {
	case b := <-s.free:
		return b
	default:
		return nil
	}
}

// waitForBatch blocks (without any lock) until a batch is free or the deadline passes, and
// installs the batch in the shard. It reports false on timeout.
func (s *stream) waitForBatch(sh *shard, deadline time.Time) bool {
	d := time.Until(deadline)
	if d <= 0 {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case b := <-s.free:
		sh.mu.Lock()
		if sh.cur == nil {
			sh.cur = b
		} else {
			s.free <- b // another writer refilled the shard meanwhile; cannot block: b came from free
		}
		sh.mu.Unlock()
		return true
	case <-t.C:
		return false
	}
}

// seal queues a batch for the sender. Callers hold the lock of the shard the batch came
// from; the queue has room for every batch, so this never blocks.
func (s *stream) seal(b *batch) {
	s.queuedBytes.Add(int64(len(b.buf)))
	s.queuedBatches.Add(1)
	s.sealMu.Lock()
	s.sealed++
	b.first, b.seq = s.sealed, s.sealed
	s.queue <- b
	s.sealMu.Unlock()
	// The queue alone, since seal runs under a shard's lock: enough to wake the clock early,
	// which then reads the whole fill share.
	if s.info != nil && s.info.degrade.overHigh(float64(s.queuedBytes.Load())/float64(s.capacity())) {
		s.info.degrade.wake()
		select {
		case s.info.kick <- struct{}{}:
		default:
		}
	}
}

// flush seals every shard's non-empty open batch.
func (s *stream) flush() {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.lockForSink()
		if b := sh.cur; b != nil && b.n > 0 {
			sh.cur = nil
			s.seal(b)
		}
		sh.unlockForSink()
	}
}

// buffered is the size of the entries the stream holds: in the queue, and in the open
// batches, read under each shard's lock (so never from a goroutine that holds one). The
// writers pay nothing for it; a scrape and the clock's observation pay a short wait.
func (s *stream) buffered() int64 {
	n := s.queuedBytes.Load()
	for i := range s.shards {
		sh := &s.shards[i]
		sh.lockForSink()
		if sh.cur != nil {
			n += int64(len(sh.cur.buf))
		}
		sh.unlockForSink()
	}
	return n
}

// tight reports whether the stream is down to its last eighth of free batches (4 of the
// default 32; with fewer than 8, when none is free) while its sends succeed. The adaptive
// policy sets its budget once a step, and a flood that grows within a step would take the
// last of the buffer; the reserve keeps that room for rare messages (internal/shed). Not
// during an outage: then the buffer holds what it can (the outage rows of the Guarantees
// table). One channel length and one atomic load.
func (s *stream) tight() bool { return len(s.free) <= s.nbatches/8 && !s.failing() }

// failing reports whether every connection of the stream is failing: nothing drains.
func (s *stream) failing() bool {
	for _, snd := range s.senders {
		if !snd.fwd.failing() {
			return false
		}
	}
	return true
}

// disconnectedFor is how long the stream has had no working connection at now; 0 if it has
// one.
func (s *stream) disconnectedFor(now time.Time) time.Duration {
	d := s.senders[0].fwd.disconnectedFor(now)
	for _, snd := range s.senders[1:] {
		d = min(d, snd.fwd.disconnectedFor(now))
	}
	return d
}

// lastError is the last send error of a connection, if one has one.
func (s *stream) lastError() error {
	for _, snd := range s.senders {
		if err := snd.fwd.lastError(); err != nil {
			return err
		}
	}
	return nil
}

// capacity is the stream's buffer budget in bytes: all its batch buffers.
func (s *stream) capacity() int64 { return int64(s.nbatches * s.batchCap) }

// flushTick is the clock's flush: it seals the open batches when the sender is waiting for
// work. A batch sealed while the sender is still busy (a slow receiver, an ack that does not
// come) or failing (an outage) would wait with the rest of its buffer unused, and every
// FlushInterval would seal one more per shard: the budget would run out on batch buffers,
// not on bytes. Then the tick only marks the flush owed, and the sender seals the open
// batches itself once it is idle again (sealAfterSend). Full batches, Sync, Close and a
// DPanic/Panic/Fatal seal at any time. The err stream keeps sealing while failing with a
// durable spill, and without one once sends have failed for SpillAfter: its sealed batches
// go to the spill, which frees them, and an entry there survives a crash.
func (s *stream) flushTick(now time.Time) {
	if s.contended.Load() {
		s.contended.Store(false) // calm again, unless writers still meet (lockShard)
	}
	failing := s.failing()
	if failing && s.err != nil && (s.err.disk != nil || s.disconnectedFor(now) >= s.err.spillAfter) {
		s.flush()
		return
	}
	if failing || s.busy.Load() > 0 || s.heldN.Load() > 0 || len(s.queue) > 0 || !s.fewInFlight() {
		s.flushOwed.Store(true)
		return
	}
	s.flush()
}

// sealAfterSend is the sender's side of flushTick: a flush the tick skipped while the sender
// was busy is done as soon as nothing else waits to be sent.
func (s *stream) sealAfterSend() {
	if len(s.queue) == 0 && s.heldN.Load() == 0 && s.fewInFlight() && s.flushOwed.Swap(false) {
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
		if snd.fwd.inflight.Load() > 1 {
			return false
		}
	}
	return true
}

func (s *stream) lastSealed() uint64 {
	s.sealMu.Lock()
	defer s.sealMu.Unlock()
	return s.sealed
}

// waitDone waits until the sender has finished with every batch up to seq.
func (s *stream) waitDone(seq uint64, deadline <-chan time.Time) bool {
	for {
		s.doneMu.Lock()
		done, ch := s.done, s.progress
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
func (s *stream) finish(b *batch) {
	s.queuedBytes.Add(-int64(len(b.buf)))
	s.queuedBatches.Add(-1)
	first, last := b.first, b.seq
	b.buf, b.n, b.tok = b.buf[:0], 0, ackToken{}
	s.free <- b
	s.doneMu.Lock()
	s.markDone(first, last)
	if s.watched {
		// Only then: a channel per batch would make the sender allocate, and an allocating
		// sender is made to assist the garbage collector (even parked) under a log flood.
		close(s.progress)
		s.progress = make(chan struct{})
		s.watched = false
	}
	s.doneMu.Unlock()
}

// markDone records that the batches first to last are finished, and moves done over every
// run of finished positions that now follows it. With several senders batches finish out
// of order; a run that finished early waits in early, next to its neighbours, so early
// holds one range per batch still in a sender's hands. s.doneMu is held.
func (s *stream) markDone(first, last uint64) {
	if first != s.done+1 {
		left, right := -1, -1 // the finished runs this one joins
		for i, r := range s.early {
			if r.last+1 == first {
				left = i
			}
			if last+1 == r.first {
				right = i
			}
		}
		switch {
		case left >= 0 && right >= 0:
			s.early[left].last = s.early[right].last
			s.early[right] = s.early[len(s.early)-1]
			s.early = s.early[:len(s.early)-1]
		case left >= 0:
			s.early[left].last = last
		case right >= 0:
			s.early[right].first = first
		default:
			s.early = append(s.early, seqRange{first, last})
		}
		return
	}
	s.done = last
	for i := 0; i < len(s.early); {
		if r := s.early[i]; r.first == s.done+1 {
			s.done = r.last
			s.early[i] = s.early[len(s.early)-1]
			s.early = s.early[:len(s.early)-1]
			i = 0
			continue
		}
		i++
	}
}

// run is one of the stream's senders: it delivers sealed batches, taking each as it comes,
// on its own connection, until ctx is cancelled. With RequireAck it writes up to
// MaxInflight frames ahead and finishes each batch when its ack comes. With one sender
// batches go out in order. With a durable spill (err stream, SpillDir, one sender) it
// first replays whatever the spill holds — also what a previous process left there — and
// sends from memory again once it is empty.
func (s *stream) run(ctx context.Context, snd *sender) {
	var wake, spillKick chan struct{} // nil, so never ready, on the info stream
	var evacuate chan chan struct{}
	if s.err != nil {
		wake, spillKick, evacuate = s.err.wake, s.err.spillKick, s.err.evacuate
	}
	for {
		if s.err != nil && s.err.replaying() {
			if !s.settle(ctx, snd) || !s.replay(ctx, snd, snd.bo) {
				return
			}
			continue
		}
		if len(snd.out) == 0 {
			if b := s.takeHeld(); b != nil {
				snd.out = append(snd.out, b)
			}
		}
		if len(snd.out) > 0 {
			if !s.send(ctx, snd) {
				return
			}
			continue
		}
		acks, dead, due := snd.fwd.ackEvents() // nil while no frame is in flight
		select {
		case b := <-s.queue:
			snd.out = append(snd.out, b)
		case tok := <-acks:
			fl, err := snd.fwd.onAck(tok)
			if s.acked(snd, fl, err) {
				s.sealAfterSend() // a flush owed while acks lagged
			}
		case <-dead:
			fl, err := snd.fwd.onDead()
			s.acked(snd, fl, err)
		case <-due:
			s.acked(snd, flight{}, snd.fwd.onDue())
		case <-wake:
			if s.fewInFlight() {
				s.flush()
			} else {
				s.flushOwed.Store(true) // see fewInFlight
			}
		case done := <-evacuate:
			s.evacuate(snd, done)
		case <-spillKick:
		case <-ctx.Done():
			return
		}
	}
}

// takeHeld takes the oldest batch compact left in held, or returns nil.
func (s *stream) takeHeld() *batch {
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
	var spillKick chan struct{}
	var evacuate chan chan struct{}
	if s.err != nil {
		spillKick, evacuate = s.err.spillKick, s.err.evacuate
	}
	for len(snd.out) > 0 {
		if snd.owed {
			snd.owed = false
			s.compact(snd.out[len(snd.out)-1])
			now := time.Now()
			if s.err != nil && s.err.spillNow(snd.failingSince, now) {
				return s.spillFailed(ctx, snd)
			}
			wait := nextWait(snd.bo)
			if s.err != nil {
				// The next attempt comes no later than SpillAfter: if it fails too, the
				// batches go to the spill then, not after a long backoff step.
				wait = min(wait, snd.failingSince.Add(s.err.spillAfter).Sub(now))
			}
			t := time.NewTimer(wait)
			for waiting := true; waiting; {
				select {
				case <-t.C:
					waiting = false
				case <-spillKick:
					s.compact(snd.out[len(snd.out)-1])
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
		}
		if s.post(ctx, snd) {
			snd.out = snd.out[:copy(snd.out, snd.out[1:])]
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

// spillKicked reports whether, after a writer's kick (kickSpill) and a compact, the
// sender's batches go to the spill now rather than after SpillAfter: the buffers are still
// full while sends fail, or the durable spill holds frames, which makes it the queue.
func (s *stream) spillKicked() bool { return len(s.free) == 0 || s.err.replaying() }

// spillFailed moves the err batches that could not be delivered to the spill. With
// SpillDir, snd's batches go to the durable spill, and run then replays from it. Without,
// everything held and queued goes to ErrFallback, and so does what is sealed while the
// backoff runs: the next batch sent is the next attempt, and while sends fail no err entry
// waits in memory for more than SpillAfter and a backoff wait. It reports false if ctx was
// cancelled.
func (s *stream) spillFailed(ctx context.Context, snd *sender) bool {
	if s.err.disk != nil {
		s.spillOut(snd)
		return true
	}
	s.drainToSpill(snd)
	return s.spillWhileWaiting(ctx, snd, nextWait(snd.bo))
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

// post writes the frame of snd.out[0] once snd's connection has room for one more in
// flight. Without acks the batch is then delivered; with them it is when its ack comes
// (acked). It reports false when the connection failed (the frames that were in flight on
// it are back in snd.out, ahead of the batch) or ctx was cancelled.
func (s *stream) post(ctx context.Context, snd *sender) bool {
	for {
		if !s.pollAcks(snd) {
			return false
		}
		if !snd.fwd.full() {
			break
		}
		fl, err := snd.fwd.awaitAck(ctx)
		if !s.acked(snd, fl, err) {
			return false
		}
	}
	b := snd.out[0]
	var chunk string
	if snd.fwd.s.requireAck {
		chunk = b.tok.forEntries(b.buf)
	}
	start := time.Now()
	s.attemptSince.Store(start.UnixNano())
	size, fresh, err := snd.fwd.post(ctx, s.tag, b.buf, b.n, chunk, b)
	s.attemptSince.Store(0)
	if !s.countSend(snd, fresh, size, err) {
		if ctx.Err() == nil {
			snd.failed(start)
		}
		s.requeue(snd)
		return false
	}
	if chunk == "" {
		s.observeSend(start)
		s.delivered.Add(uint64(b.n))
		s.finish(b)
		snd.recovered()
	}
	return true
}

// pollAcks handles, without waiting, the acks (and the failure) that have come for snd's
// frames in flight. It reports false if the connection failed.
func (s *stream) pollAcks(snd *sender) bool {
	for {
		acks, dead, _ := snd.fwd.ackEvents()
		if acks == nil {
			return true // no connection
		}
		var fl flight
		var err error
		select {
		case tok := <-acks:
			fl, err = snd.fwd.onAck(tok)
		case <-dead:
			fl, err = snd.fwd.onDead()
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
func (s *stream) acked(snd *sender, fl flight, err error) bool {
	if err != nil {
		if !errors.Is(err, context.Canceled) { // Close
			s.sendErrors.Add(1)
			// The failure began with the oldest frame that was waiting for its ack.
			snd.failed(cmp.Or(snd.fwd.lostSince, time.Now()))
		}
		s.requeue(snd)
		return false
	}
	if b := fl.b; b != nil {
		s.observeSend(fl.at)
		s.delivered.Add(uint64(b.n))
		s.finish(b)
	}
	if fl.chunk != "" {
		snd.recovered()
	}
	return true
}

// settle waits until every frame snd has in flight is acked, or has failed and is back in
// snd.out. It reports false if ctx was cancelled first.
func (s *stream) settle(ctx context.Context, snd *sender) bool {
	for len(snd.fwd.flights) > 0 {
		fl, err := snd.fwd.awaitAck(ctx)
		s.acked(snd, fl, err)
		if ctx.Err() != nil {
			return false
		}
	}
	return true
}

// requeue puts the batches of the frames snd's connection lost (or still has in flight)
// back in front of snd.out, oldest first. Nothing is allocated: both slices can hold every
// batch of the stream.
func (s *stream) requeue(snd *sender) {
	if len(snd.fwd.lost) == 0 && len(snd.fwd.flights) == 0 {
		return
	}
	next := snd.fwd.takeUnacked(snd.spare[:0])
	next = append(next, snd.out...)
	snd.out, snd.spare = next, snd.out[:0]
}

// countSend counts one attempt to write a frame, and reports whether it succeeded.
func (s *stream) countSend(snd *sender, fresh bool, size int, err error) bool {
	if fresh && snd.fwd.connects.Load() > 1 {
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
	if s.sendDuration != nil { // nil only in tests that build a stream alone
		s.sendDuration.Observe(time.Since(start).Seconds())
	}
}

// compact packs the batches queued behind b, the newest one the sender holds and cannot
// deliver, into as few buffers as they fit in, and frees the others: batches sealed partly
// filled (by the flush tick before the sender saw the receiver fail) would otherwise hold
// the rest of their buffers through the outage. Order is kept: the entries after b
// move forward in sealing order; the batches that still hold entries wait in held. A batch
// is merged whole only into the one sealed right before it (its positions then follow
// dst's), so that finishing dst finishes exactly the positions it holds; other senders may
// hold the batches in between.
func (s *stream) compact(b *batch) {
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
		if src.first != dst.seq+1 { // another sender holds what lies between
			kept = append(kept, src)
			dst = src
			continue
		}
		if len(dst.buf)+len(src.buf) <= cap(dst.buf) { // all of it fits
			dst.buf = append(dst.buf, src.buf...)
			dst.n += src.n
			dst.seq = src.seq // dst's delivery now finishes src's entries too
			src.buf, src.n = src.buf[:0], 0
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

// moveEntries moves the leading entries of nb that fit into b's free room to the end of b.
func (s *stream) moveEntries(b, nb *batch) {
	moved, k := 0, 0
	for rest := nb.buf; len(rest) > 0; k++ {
		after, err := msgp.Skip(rest) // one entry: [EventTime, record]
		size := len(rest) - len(after)
		if err != nil || len(b.buf)+moved+size > cap(b.buf) {
			break
		}
		moved, rest = moved+size, after
	}
	if moved > 0 {
		b.buf = append(b.buf, nb.buf[:moved]...)
		b.n += k
		nb.buf = nb.buf[:copy(nb.buf, nb.buf[moved:])]
		nb.n -= k
	}
}

// sendFrame sends one frame of the spill's replay on snd's connection, waiting for its ack
// (no frame may be in flight), and counts it.
func (s *stream) sendFrame(ctx context.Context, snd *sender, tag string, entries []byte, n int) bool {
	start := time.Now()
	s.attemptSince.Store(start.UnixNano())
	size, fresh, err := snd.fwd.send(ctx, tag, entries, n)
	s.attemptSince.Store(0)
	if !s.countSend(snd, fresh, size, err) {
		return false
	}
	s.observeSend(start)
	return true
}

// spillEntry spills one err entry that could not be buffered, counts it, and wakes the
// sender to move the queued batches to the durable spill too.
func (s *stream) spillEntry(ctx *encodedContext, ent *zapcore.Entry, fields []zapcore.Field) {
	s.countSpill(s.err.spillEntry(s.tag, ctx, ent, fields), 1)
	s.err.kickSpill()
}

// evacuate, on the err sender, moves every entry not yet delivered — the open batches, the
// queue — to the spill (SpillDir, or ErrFallback), then closes done. It answers
// syncOrSpill: a DPanic, Panic or Fatal entry must not go down with the process.
// Frames in flight are not waited for: their connection is closed, and they are spilled
// with the rest (at least once: they may have arrived).
func (s *stream) evacuate(snd *sender, done chan struct{}) {
	snd.fwd.reclaim()
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

// spillSealed hands a sealed err batch to the spill and frees it.
func (s *stream) spillSealed(b *batch) {
	s.countSpill(s.err.spill.Append(s.tag, b.buf, b.n), b.n)
	s.finish(b)
}

// countSpill counts n entries by what the spill said: spilled, or dropped with the reason
// (the spill chain has written them to ErrFallback where it could): never silently.
func (s *stream) countSpill(err error, n int) {
	switch {
	case err == nil:
		s.spilled.Add(uint64(n))
	case errors.Is(err, spill.ErrFull):
		s.shards[0].dropped[dropSpillFull].Add(uint64(n))
	case errors.Is(err, errEncodePanic):
		s.shards[0].dropped[dropEncodeError].Add(uint64(n))
	default:
		s.shards[0].dropped[dropSpillFailed].Add(uint64(n))
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
		fr, ok, err := s.err.disk.Head()
		if err == nil && !ok {
			return true
		}
		if err == nil && s.sendFrame(ctx, snd, fr.Tag, fr.Entries, fr.N) {
			s.replayed.Add(uint64(fr.N))
			s.err.disk.Pop()
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
		case b := <-s.queue:
			s.spillSealed(b)
		case <-s.err.spillKick:
		case done := <-s.err.evacuate:
			s.evacuate(snd, done) // what was queued is in the durable spill already
		case <-t.C:
			return true
		case <-ctx.Done():
			return false
		}
	}
}

// drainToSpill moves every batch snd holds unsent, and every queued one, to the spill,
// without waiting.
func (s *stream) drainToSpill(snd *sender) {
	s.spillOut(snd)
	s.heldMu.Lock()
	for _, b := range s.held {
		s.spillSealed(b)
	}
	s.held = s.held[:0]
	s.heldN.Store(0)
	s.heldMu.Unlock()
	for {
		select {
		case b := <-s.queue:
			s.spillSealed(b)
		default:
			return
		}
	}
}

// abandon accounts for a batch that was never delivered: err entries are spilled, info
// entries counted as dropped at shutdown.
func (s *stream) abandon(b *batch) {
	if s.err != nil {
		s.spillSealed(b)
		return
	}
	s.shards[0].dropped[dropShutdown].Add(uint64(b.n))
	s.finish(b)
}

func (s *stream) stats() StreamStats {
	st := StreamStats{
		Dropped:       make(map[string]uint64, numDropReasons),
		Delivered:     s.delivered.Load(),
		Spilled:       s.spilled.Load(),
		Replayed:      s.replayed.Load(),
		BufferedBytes: s.buffered(),
		CapacityBytes: s.capacity(),
		SentBatches:   s.sentBatches.Load(),
		SentBytes:     s.sentBytes.Load(),
		SendErrors:    s.sendErrors.Load(),
		Reconnects:    s.reconnects.Load(),
	}
	for _, snd := range s.senders {
		st.HandshakeFailures += snd.fwd.handshakeFailures.Load()
	}
	st.Servers = s.serverStats()
	for r := dropReason(0); r < numDropReasons; r++ {
		st.Dropped[r.String()] = 0
	}
	for i := range s.shards {
		sh := &s.shards[i]
		st.Entries += sh.entries.Load()
		st.Truncated += sh.truncated.Load()
		for r := dropReason(0); r < numDropReasons; r++ {
			st.Dropped[r.String()] += sh.dropped[r].Load()
		}
	}
	if s.err != nil && s.err.disk != nil {
		st.SpillBytes = s.err.disk.Bytes()
		st.SpillCorruptSegments = s.err.disk.CorruptSegments()
	}
	st.KeepRatio = 1
	if s.info != nil {
		st.Degraded = s.info.degrade.active.Load()
		st.DegradeTransitions = s.info.degrade.transitions.Load()
		st.KeepRatio, st.Capacity = s.info.degrade.keepRatio(), s.info.degrade.capacity()
	}
	return st
}

// serverStats sums the senders' connections, frames in flight and deliveries by server.
func (s *stream) serverStats() []ServerStats {
	eps := s.senders[0].fwd.s.endpoints
	rows := make([]ServerStats, 0, len(eps))
	row := make([]int, len(eps)) // endpoint -> its address's row
	for i, ep := range eps {
		r := slices.IndexFunc(rows, func(st ServerStats) bool { return st.Addr == ep.Addr })
		if r < 0 {
			r = len(rows)
			rows = append(rows, ServerStats{Addr: ep.Addr})
		}
		row[i] = r
	}
	for _, snd := range s.senders {
		if i := snd.fwd.server.Load(); i >= 0 {
			rows[row[i]].Connections++
			rows[row[i]].FramesInFlight += int(snd.fwd.inflight.Load())
		}
		for i := range snd.fwd.deliveredTo {
			rows[row[i]].Delivered += snd.fwd.deliveredTo[i].Load()
		}
	}
	return rows
}

// countDrop counts an entry dropped before it reached a shard (in Check).
func (s *stream) countDrop(r dropReason) {
	sh := &s.shards[rand.N(len(s.shards))]
	sh.entries.Add(1)
	sh.dropped[r].Add(1)
}

// sink is the two streams, their senders and the clock that flushes them and drives the
// degrade state machine. It implements entrySink.
type sink struct {
	streams  [numStreams]*stream
	s        *settings
	spillErr error // why SpillDir could not be used, if it could not
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	stopTick chan struct{}
	closing  sync.Once
	closeErr error
}

var _ entrySink = (*sink)(nil)

// newSink allocates both streams' buffers, opens the spill and starts the senders and the
// clock. sendDuration receives each stream's send times.
func newSink(s *settings, sendDuration *prometheus.HistogramVec) *sink {
	k := &sink{s: s, stopTick: make(chan struct{})}
	info := newStream(infoStream, s.infoBufferBytes, s, newForwarders(s, s.infoConnections)...)
	info.info = &infoPolicy{degrade: newDegradeControl(s.degrade), kick: make(chan struct{}, 1)}
	if s.degrade.WeightKey != "" && s.degrade.Policy == DegradeAdaptive {
		key := appendStr(nil, s.degrade.WeightKey)
		for i := range info.shards {
			info.shards[i].enc.weightKey, info.shards[i].enc.weigh = key, info.info.degrade.weight
		}
	}
	errs := newStream(errStream, s.errBufferBytes, s, newForwarder(s))
	errs.err, k.spillErr = newErrPolicy(s)
	k.streams = [numStreams]*stream{infoStream: info, errStream: errs}
	for _, st := range k.streams {
		st.sendDuration = sendDuration.WithLabelValues(st.id.String())
	}

	ctx, cancel := context.WithCancel(context.Background())
	k.cancel = cancel
	for _, st := range k.streams {
		for _, snd := range st.senders {
			k.wg.Add(1)
			go func() {
				defer k.wg.Done()
				if st.err != nil && k.spillErr != nil {
					s.event(time.Now(), EventSpillDisabled, k.spillErr)
				}
				st.run(ctx, snd)
			}()
		}
	}
	k.wg.Add(1)
	go func() {
		defer k.wg.Done()
		k.clock()
	}()
	return k
}

// admit is small enough to be inlined into Check: while the info stream's policy is not
// consulted, an entry costs one atomic load. The entry goes by pointer: copying a
// zapcore.Entry (about 150 bytes) on each call was a measurable part of admission
// (BenchmarkAdmit).
func (k *sink) admit(ent *zapcore.Entry) bool {
	return !k.streams[infoStream].info.degrade.checking.Load() || k.consult(ent)
}

// consult asks the info stream's policy about an entry (err entries always pass), steps
// the adaptive shedder if a step is due, and counts the entry if it is shed.
func (k *sink) consult(ent *zapcore.Entry) bool {
	if k.s.split.streamFor(ent.Level) != infoStream {
		return true
	}
	st := k.streams[infoStream]
	d := st.info.degrade
	// The reserve matters to the adaptive policy only: the others need not look.
	ok, reason := d.admit(ent, d.shed != nil && st.tight())
	if d.stepDue(ent.Time.UnixNano()) {
		if now := time.Now(); d.beginStep(now) {
			d.endStep(k.infoObservation(now))
		}
	}
	if !ok {
		st.countDrop(reason)
		if d.yields() {
			// Never a wait on I/O, and only a caller whose entry the pipeline could not
			// take pays (see yields).
			runtime.Gosched()
		}
	}
	return ok
}

func (k *sink) write(ctx *encodedContext, ent *zapcore.Entry, fields []zapcore.Field) {
	k.streams[k.s.split.streamFor(ent.Level)].write(ctx, ent, fields)
}

func (k *sink) stats() Stats {
	return Stats{Info: k.streams[infoStream].stats(), Err: k.streams[errStream].stats()}
}

// clock flushes the streams every FlushInterval and feeds the info stream's degrade state
// machine several times a second (and at once when its fill reaches the high watermark).
func (k *sink) clock() {
	// Two tickers: flushing on its own FlushInterval ticker bounds an entry's wait in a
	// batch by FlushInterval itself (a flush on a coarser tick could add a whole tick);
	// the degrade machine is fed every observeEvery.
	flush := time.NewTicker(k.s.flushInterval)
	defer flush.Stop()
	slow := min(k.s.flushInterval, observeEvery)
	observe := time.NewTicker(slow)
	defer observe.Stop()
	info := k.streams[infoStream]
	fast := false
	for {
		select {
		case <-k.stopTick:
			return
		case <-info.info.kick:
		case <-observe.C:
		case <-flush.C:
			now := time.Now()
			for _, st := range k.streams {
				st.flushTick(now)
			}
		}
		k.observeDegrade(time.Now())
		if f := info.info.degrade.fast(); f != fast {
			fast = f
			if f {
				observe.Reset(adaptiveStep)
			} else {
				observe.Reset(slow)
			}
		}
	}
}

// observeEvery is how often the degrade state machine is fed when nothing else wakes it.
const observeEvery = 100 * time.Millisecond

// infoObservation is what the info stream's policy is told at now.
func (k *sink) infoObservation(now time.Time) degradeObservation {
	info := k.streams[infoStream]
	delivered := info.delivered.Load()
	entryBytes := 256.0 // until something is delivered: about an access log line
	if delivered > 0 {
		entryBytes = float64(info.sentBytes.Load()) / float64(delivered)
	}
	return degradeObservation{
		now: now, buffered: info.buffered(), limit: info.capacity(),
		disconnectedFor: info.disconnectedFor(now), delivered: delivered, entryBytes: entryBytes,
	}
}

func (k *sink) observeDegrade(now time.Time) {
	changed, degraded := k.streams[infoStream].info.degrade.observe(k.infoObservation(now))
	if changed {
		kind := EventRecovered
		if degraded {
			kind = EventDegraded
		}
		k.s.event(now, kind, nil)
	}
}

// sync flushes both streams and waits until everything sealed so far is delivered (or given
// up on), or the timeout passes.
func (k *sink) sync(timeout time.Duration) error {
	_, err := k.syncStreams(timeout)
	return err
}

// syncStreams is sync that also says which stream missed the deadline. It waits for the err
// stream first, so that a backlog of info entries is never taken for an err stream that
// cannot deliver.
func (k *sink) syncStreams(timeout time.Duration) (missed streamID, err error) {
	var targets [numStreams]uint64
	for id, st := range k.streams {
		st.flush()
		targets[id] = st.lastSealed()
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	for _, id := range [...]streamID{errStream, infoStream} {
		st := k.streams[id]
		if !st.waitDone(targets[id], t.C) {
			err := fmt.Errorf("fluentcore: sync: %s stream not delivered within %v", st.id, timeout)
			if last := st.lastError(); last != nil {
				err = fmt.Errorf("%w; last send error: %w", err, last) // e.g. ErrHandshake
			}
			return id, err
		}
	}
	return 0, nil
}

// syncOrSpill is sync for a DPanic, Panic or Fatal entry, which the process may not
// survive: it waits for delivery for timeout less a fifth of it (at most 1 s), and if the
// err stream missed that, for the rest it has the err sender move what it could not
// deliver to the spill (SpillDir, or ErrFallback). The sender answers between attempts to
// send; one still in progress then (a dial to a host that does not answer, a handshake, a
// write to a receiver that stopped reading, an ack wait) ends within its own timeout, and
// if that is later than the rest of the bound only the sync error is returned.
func (k *sink) syncOrSpill(timeout time.Duration) error {
	evac := min(timeout/5, time.Second)
	missed, err := k.syncStreams(timeout - evac)
	if err == nil || missed != errStream {
		return err
	}
	done := make(chan struct{})
	t := time.NewTimer(evac)
	defer t.Stop()
	select {
	case k.streams[errStream].err.evacuate <- done:
	case <-t.C:
		return err
	}
	select {
	case <-done:
		return fmt.Errorf("%w; the err stream's undelivered entries went to the spill (SpillDir, or ErrFallback)", err)
	case <-t.C:
		return err
	}
}

// close stops accepting entries, tries to deliver what was accepted within timeout, then
// stops the senders and accounts for whatever is left: info as dropped (shutdown), err as
// spilled (to SpillDir, for the next process to replay, or to ErrFallback).
func (k *sink) close(timeout time.Duration) error {
	k.closing.Do(func() {
		for _, st := range k.streams {
			st.closed.Store(true)
		}
		err := k.sync(timeout)
		k.cancel()
		close(k.stopTick)
		k.wg.Wait()
		for _, st := range k.streams {
			for _, snd := range st.senders { // oldest first: in flight, unsent, held, the queue
				st.pollAcks(snd) // acks that came in before the senders stopped
				st.requeue(snd)
				for _, b := range snd.out {
					st.abandon(b)
				}
				snd.out = snd.out[:0]
			}
			for _, b := range st.held {
				st.abandon(b)
			}
			st.held = st.held[:0]
			st.heldN.Store(0)
			for len(st.queue) > 0 {
				st.abandon(<-st.queue)
			}
			for _, snd := range st.senders {
				snd.fwd.close()
			}
			if st.err != nil && st.err.disk != nil {
				st.err.disk.Close() // releases SpillDir; later err entries go to ErrFallback
			}
		}
		if err != nil {
			err = errors.Join(err, fmt.Errorf("fluentcore: close: undelivered info entries were dropped and err entries spilled to the fallback"))
		}
		k.closeErr = err
	})
	return k.closeErr
}
