package ring

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/fluentcore/fluentcore/internal/order"
	"github.com/tinylib/msgp/msgp"
)

// Ring is a stream's batches and their way round: the free list, a writer's open batch (its
// owner's, in a shard), the queue in sealing order, a sender, and back to the free list
// once finished. What Sync and Close wait for is the finished prefix of the sealing order.
//
// Its invariants:
//   - The batches are made once, by New; none is ever added, grown or dropped. Every batch
//     is in exactly one place: free (Take, Put), open in a shard of the owner (taken, not
//     sealed), queued (Seal), held (taken from the queue by Compact, out by TakeHeld or
//     Drain) or with a sender (out of Queue, TakeHeld or Drain, until Finish). A batch
//     Compact merges into another goes straight back to the free list.
//   - Seal numbers the batches 1, 2, ... in the order they are sealed, and queues them in
//     that order: a batch finishes the positions First to Last, one until merged. The free
//     list and the queue each have room for every batch: Take, Put and Seal never block.
//   - Finish marks a batch's positions finished (internal/order); WaitDone(seq) returns once
//     every position up to seq is, whatever order several senders finish them in.
//   - Compact merges a batch whole only into the batch sealed right before it
//     (src.First == dst.Last+1): a batch's positions stay one run, and finishing it finishes
//     exactly those, never a batch another sender holds between them. The held batches
//     keep sealing order and are older than every queued one: a sender takes them first.
//   - The counts a reader of the fill relies on, and their order. The queued bytes (Bytes)
//     are the entries of every batch sealed and not finished: added by Seal before the
//     batch is queued, taken off by Finish before it is free, unchanged by Compact, which
//     moves entries between the batches they count. Finish tells Hooks.Finished before the
//     batch is on the free list (Free): an owner that counts there the entries that left
//     (a shedder's allowance) counts them before their room can show. So an owner reading
//     what it holds reads Bytes first, then its open batches (each with its writers'
//     counts, under its shard's lock, where Seal is called), then Free: a batch sealed
//     meanwhile is counted once at most, and a batch finished meanwhile has its entries
//     counted out before its room counts in.
//
// Safe for concurrent use. Seal numbers and queues under one lock, Finish marks under
// another, and Compact, TakeHeld and Drain take the held batches under a third, which
// Drain holds while its f runs: f may Finish, so that lock comes before Finish's, never
// after it.
type Ring struct {
	free  chan *Batch // batches ready for writers
	queue chan *Batch // sealed batches, in sealing order, for the senders
	all   []*Batch    // every batch, made once
	hooks Hooks
	// capacity is the budget in bytes: every batch's buffer.
	capacity    int64
	queuedBytes atomic.Int64 // the entries' bytes of the batches sealed and not finished

	sealMu sync.Mutex
	sealed uint64 // the position of the last batch sealed

	doneMu   sync.Mutex
	done     *order.Done   // which positions are finished: with several senders, out of order
	progress chan struct{} // closed and replaced when done advances while someone waits
	watched  bool          // a WaitDone caller holds progress

	heldMu sync.Mutex
	held   []*Batch     // batches Compact took from the queue, in sealing order
	heldN  atomic.Int64 // len(held), for readers without heldMu
}

// Hooks are what a ring tells its owner of the batches that leave it: each is called by
// the goroutine that calls Finish or Compact, before the batch is reset and free.
type Hooks struct {
	// Finished is told of a batch whose entries left the buffer (Finish).
	Finished func(b *Batch)
	// Merged is told of a batch whose entries Compact moved into the batch before it.
	Merged func(b *Batch)
}

// New returns a ring of n batches of size bytes, all free, for up to senders senders.
func New(n, size, senders int, hooks Hooks) *Ring {
	r := &Ring{
		free:     make(chan *Batch, n),
		queue:    make(chan *Batch, n),
		all:      make([]*Batch, 0, n),
		hooks:    hooks,
		capacity: int64(n) * int64(size),
		done:     order.New(n + senders), // a run per batch, and per sender while it holds none
		progress: make(chan struct{}),
		held:     make([]*Batch, 0, n),
	}
	for range n {
		b := NewBatch(size)
		r.all = append(r.all, b)
		r.free <- b
	}
	return r
}

// Take returns a free batch. With a nil wait it does not wait: nil if none is free. Else
// it waits for one until wait is ready, and returns nil then.
func (r *Ring) Take(wait <-chan time.Time) *Batch {
	if wait == nil {
		select {
		case b := <-r.free:
			return b
		default:
			return nil
		}
	}
	select {
	case b := <-r.free:
		return b
	case <-wait:
		return nil
	}
}

// Put returns to the free list a batch taken and not sealed (empty, or holding only what
// its taker copied out again).
func (r *Ring) Put(b *Batch) { r.free <- b }

// Free is how many batches are free now.
func (r *Ring) Free() int { return len(r.free) }

// Seal numbers b, the next position in sealing order, and queues it for the senders.
func (r *Ring) Seal(b *Batch) {
	r.queuedBytes.Add(int64(len(b.Buf)))
	r.sealMu.Lock()
	r.sealed++
	b.First, b.Last = r.sealed, r.sealed
	r.queue <- b
	r.sealMu.Unlock()
}

// Queue is where the senders receive the sealed batches, in sealing order.
func (r *Ring) Queue() <-chan *Batch { return r.queue }

// LastSealed is the position of the last batch sealed: what Sync waits for (WaitDone).
func (r *Ring) LastSealed() uint64 {
	r.sealMu.Lock()
	defer r.sealMu.Unlock()
	return r.sealed
}

// WaitDone waits until every position up to seq is finished, and reports true; false if
// deadline is ready first.
func (r *Ring) WaitDone(seq uint64, deadline <-chan time.Time) bool {
	for {
		r.doneMu.Lock()
		done, ch := r.done.Upto(), r.progress
		r.watched = true
		r.doneMu.Unlock()
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

// Finish returns a sealed batch its sender is done with (delivered, spilled or dropped) to
// the free list, and marks its positions finished.
func (r *Ring) Finish(b *Batch) {
	r.queuedBytes.Add(-int64(len(b.Buf)))
	first, last := b.First, b.Last
	r.hooks.Finished(b)
	b.Reset()
	r.free <- b
	r.doneMu.Lock()
	r.done.Mark(first, last)
	if r.watched {
		// Only then: a channel per batch would make the sender allocate, and an allocating
		// sender is made to assist the garbage collector (even parked) under a log flood.
		close(r.progress)
		r.progress = make(chan struct{})
		r.watched = false
	}
	r.doneMu.Unlock()
}

// TakeHeld takes the oldest batch Compact left held, or returns nil.
func (r *Ring) TakeHeld() *Batch {
	if r.heldN.Load() == 0 {
		return nil
	}
	r.heldMu.Lock()
	defer r.heldMu.Unlock()
	if len(r.held) == 0 {
		return nil
	}
	b := r.held[0]
	r.held = r.held[:copy(r.held, r.held[1:])]
	r.heldN.Store(int64(len(r.held)))
	return b
}

// Idle reports whether no batch is held or queued: none waits for a sender.
func (r *Ring) Idle() bool { return r.heldN.Load() == 0 && len(r.queue) == 0 }

// Compact packs the batches queued behind b, the newest one a sender holds and cannot
// deliver, into as few buffers as they fit in, and frees the others: batches sealed partly
// filled would otherwise hold the rest of their buffers through an outage. Order is kept:
// the entries after b move forward in sealing order; the batches that still hold entries
// wait held. A batch is merged whole only into the one sealed right before it (its
// positions then follow dst's), so that finishing dst finishes exactly the positions it
// holds; other senders may hold the batches in between.
func (r *Ring) Compact(b *Batch) {
	r.heldMu.Lock()
	defer r.heldMu.Unlock()
	defer func() { r.heldN.Store(int64(len(r.held))) }()
take:
	for len(r.held) < cap(r.held) {
		select {
		case nb := <-r.queue:
			r.held = append(r.held, nb)
		default:
			break take
		}
	}
	dst, kept := b, r.held[:0]
	for _, src := range r.held {
		if src.First != dst.Last+1 { // another sender holds what lies between
			kept = append(kept, src)
			dst = src
			continue
		}
		if len(dst.Buf)+len(src.Buf) <= cap(dst.Buf) && dst.TakesRuns(src) { // all of it fits
			dst.AppendBatch(src)
			dst.Last = src.Last // dst's delivery now finishes src's entries too
			dst.OpenedBy(src)
			r.hooks.Merged(src)
			src.Reset() // its bytes are dst's now
			r.free <- src
			continue
		}
		moveEntries(dst, src)
		kept = append(kept, src)
		dst = src
	}
	r.held = kept
}

// moveEntries moves the leading entries of nb that fit into b's free room to the end of b,
// if nb's entries are of one tag and b has room for their run.
func moveEntries(b, nb *Batch) {
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
		return // all of nb: only a merge (Compact) may take it whole, and empty it
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

// Drain hands every held batch, then every queued one, oldest first, to f, without
// waiting: the held ones under the lock Compact and TakeHeld take.
func (r *Ring) Drain(f func(b *Batch)) {
	r.heldMu.Lock()
	for _, b := range r.held {
		f(b)
	}
	r.held = r.held[:0]
	r.heldN.Store(0)
	r.heldMu.Unlock()
	for {
		select {
		case b := <-r.queue:
			f(b)
		default:
			return
		}
	}
}

// Bytes is the entries' bytes of the batches sealed and not finished (queued), and the
// budget: every batch's buffer (capacity).
func (r *Ring) Bytes() (queued, capacity int64) { return r.queuedBytes.Load(), r.capacity }

// Batches returns every batch of the ring, made once; the caller must not change the
// slice. Their Opened times may be read at any time; the rest only where the invariants
// above say who holds a batch.
func (r *Ring) Batches() []*Batch { return r.all }
