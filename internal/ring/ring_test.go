package ring

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore/internal/testkit"
	"github.com/tinylib/msgp/msgp"
)

// owner counts what a ring tells its hooks.
type owner struct {
	finished, merged int
	entries          int // entries of the batches finished
}

func newRing(t *testing.T, n, size, senders int) (*Ring, *owner) {
	t.Helper()
	o := &owner{}
	r := New(n, size, senders, Hooks{
		Finished: func(b *Batch) { o.finished++; o.entries += b.N },
		Merged:   func(*Batch) { o.merged++ },
	})
	return r, o
}

// sealOne takes a free batch, writes entries into it as a writer does, and seals it.
func sealOne(t *testing.T, r *Ring, entries []byte, n int) *Batch {
	t.Helper()
	b := r.Take(nil)
	if b == nil {
		t.Fatal("no free batch")
	}
	b.Buf = append(b.Buf, entries...)
	b.N = n
	r.Seal(b)
	return b
}

// entrySizes returns the size of each msgpack entry in entries.
func entrySizes(t *testing.T, entries []byte) []int {
	t.Helper()
	var sizes []int
	for rest := entries; len(rest) > 0; {
		after, err := msgp.Skip(rest)
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, len(rest)-len(after))
		rest = after
	}
	return sizes
}

// offset returns where entry k starts, given the entries' sizes.
func offset(sizes []int, k int) int {
	o := 0
	for _, n := range sizes[:k] {
		o += n
	}
	return o
}

// Compact packs the batches queued behind the one the sender holds into as few buffers as
// they fit in, keeping the order of the entries and what Sync waits for: the entries come
// out in sealing order, every freed buffer is back on the free list, the last batch of the
// chain carries the highest position, and the queued bytes do not change.
func TestCompactPacksQueuedBatchesInOrder(t *testing.T) {
	const size = 4 << 10
	r, o := newRing(t, 16, size, 1)
	entries := testkit.Entries(400, strings.Repeat("e", 40)) // about 60 bytes each
	sizes := entrySizes(t, entries)
	// Seal batches of 5, 30, 2, 50, 3, ... entries, as a flush tick and full batches would.
	var held *Batch
	next := 0
	for k, counts := 0, []int{5, 30, 2, 50, 3, 60, 1, 40, 7, 55}; k < len(counts) && next < len(sizes); k++ {
		sealOne(t, r, entries[offset(sizes, next):offset(sizes, next+counts[k])], counts[k])
		next += counts[k]
		if held == nil {
			held = <-r.Queue() // the batch the sender is trying to deliver
		}
	}
	free, sealed := r.Free(), r.LastSealed()
	queued, _ := r.Bytes()
	r.Compact(held)

	got := append([]byte(nil), held.Buf...)
	n := held.N
	for _, b := range r.held {
		got = append(got, b.Buf...)
		n += b.N
		if b.Last <= held.Last {
			t.Fatalf("held batch seq %d not after %d", b.Last, held.Last)
		}
	}
	if !bytes.Equal(got, entries[:offset(sizes, next)]) || n != next {
		t.Fatalf("after compact: %d entries, %d bytes; want %d entries in order", n, len(got), next)
	}
	chain := 1 + len(r.held)
	if want := (offset(sizes, next) + size - 1) / size; chain > want+1 || len(r.Queue()) != 0 {
		t.Fatalf("%d batches hold %d bytes of %d-byte buffers (queue %d)", chain, len(got), size, len(r.Queue()))
	}
	last := held
	if len(r.held) > 0 {
		last = r.held[len(r.held)-1]
	}
	if last.Last != sealed || r.Free() != free+(10-chain) || o.merged != 10-chain {
		t.Fatalf("last seq %d (sealed %d), free %d (was %d), %d merged for a chain of %d", last.Last, sealed, r.Free(), free, o.merged, chain)
	}
	if q, _ := r.Bytes(); q != queued || q != int64(len(got)) {
		t.Fatalf("queued %d bytes after compact, %d before, %d held", q, queued, len(got))
	}
}

// Compact merges a batch whole only into the one sealed right before it: with several
// senders the batch in between may be in another sender's hands, and a merged batch that
// finished its positions would then also finish that one's. Sync waits for all of them.
func TestCompactLeavesOtherSendersBatchesOut(t *testing.T) {
	r, _ := newRing(t, 16, 4<<10, 2)
	for range 4 {
		sealOne(t, r, testkit.Entries(1, "x"), 1)
	}
	mine, theirs := <-r.Queue(), <-r.Queue() // seq 1 fails here; seq 2 is with the other sender
	r.Compact(mine)
	if mine.Last != 1 || len(r.held) != 1 || r.held[0].First != 3 || r.held[0].Last != 4 || r.held[0].N != 2 {
		t.Fatalf("after compact: mine %d..%d, held %d batches (first %d..%d, %d entries); want mine 1..1 and 3..4 merged", mine.First, mine.Last, len(r.held), r.held[0].First, r.held[0].Last, r.held[0].N)
	}
	r.Finish(mine)
	r.Finish(r.TakeHeld())
	if !r.WaitDone(1, nil) || r.done.Upto() != 1 {
		t.Fatalf("done %d with 2 still sending, want 1", r.done.Upto())
	}
	r.Finish(theirs)
	if r.done.Upto() != 4 || len(r.done.Early()) != 0 {
		t.Fatalf("done %d (early %v) once every batch finished, want 4", r.done.Upto(), r.done.Early())
	}
}

// Compact moves what fits of a batch it cannot merge whole to the end of the one before,
// in order, and leaves a batch of several runs as it is.
func TestCompactMovesTheLeadingEntriesThatFit(t *testing.T) {
	const size = 1 << 10
	r, _ := newRing(t, 8, size, 1)
	entries := testkit.Entries(30, strings.Repeat("e", 40))
	sizes := entrySizes(t, entries)
	k := 0
	for offset(sizes, k+1) <= size-200 {
		k++
	}
	first := sealOne(t, r, entries[:offset(sizes, k)], k)
	second := sealOne(t, r, entries[offset(sizes, k):], len(sizes)-k)
	if <-r.Queue() != first {
		t.Fatal("the queue is not in sealing order")
	}
	r.Compact(first)
	if len(r.held) != 1 || r.held[0] != second || first.N <= k || first.N+second.N != len(sizes) {
		t.Fatalf("after compact: %d and %d entries (was %d and %d), %d held", first.N, second.N, k, len(sizes)-k, len(r.held))
	}
	if got := append(append([]byte(nil), first.Buf...), second.Buf...); !bytes.Equal(got, entries) {
		t.Fatal("entries out of order after compact moved some")
	}
	if first.Last != 1 || second.First != 2 {
		t.Fatalf("positions %d..%d and %d..%d; moving entries moves no position", first.First, first.Last, second.First, second.Last)
	}
}

// Seal numbers the batches in the order they are sealed and queues them in that order,
// however many writers seal at once.
func TestSealQueuesInSealingOrder(t *testing.T) {
	r, _ := newRing(t, 64, 256, 1)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 8 {
				b := r.Take(nil)
				b.Buf = append(b.Buf, 0xc0)
				b.N = 1
				r.Seal(b)
			}
		}()
	}
	wg.Wait()
	if r.LastSealed() != 64 || r.Free() != 0 {
		t.Fatalf("sealed %d, free %d; want 64 and 0", r.LastSealed(), r.Free())
	}
	for want := uint64(1); want <= 64; want++ {
		if b := <-r.Queue(); b.First != want || b.Last != want {
			t.Fatalf("queued %d..%d, want %d", b.First, b.Last, want)
		}
	}
}

// WaitDone waits for every position up to seq, in whatever order the senders finish them,
// and gives up at its deadline.
func TestWaitDoneWaitsForEveryPositionUpTo(t *testing.T) {
	r, _ := newRing(t, 8, 256, 2)
	for range 3 {
		sealOne(t, r, []byte{0xc0}, 1)
	}
	a, b, c := <-r.Queue(), <-r.Queue(), <-r.Queue()
	r.Finish(b)
	if r.WaitDone(2, time.After(10*time.Millisecond)) {
		t.Fatal("WaitDone(2) returned with position 1 not finished")
	}
	waited := make(chan bool)
	go func() { waited <- r.WaitDone(3, nil) }()
	r.Finish(c)
	select {
	case <-waited:
		t.Fatal("WaitDone(3) returned with position 1 not finished")
	case <-time.After(10 * time.Millisecond):
	}
	r.Finish(a)
	select {
	case ok := <-waited:
		if !ok {
			t.Fatal("WaitDone(3) gave up with no deadline")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("WaitDone(3) did not return once every position was finished")
	}
}

// Finish tells the owner of the entries that left before the batch is free, and after
// their bytes are out of the queued ones: an owner that counts the freed entries there
// counts them before their room can show (a reader reads Bytes, its open batches, Free).
func TestFinishTellsTheOwnerBeforeTheBatchIsFree(t *testing.T) {
	var r *Ring
	var free int
	var queued int64
	r = New(4, 256, 1, Hooks{
		Finished: func(*Batch) { free = r.Free(); queued, _ = r.Bytes() },
		Merged:   func(*Batch) {},
	})
	sealOne(t, r, []byte{0xc0, 0xc0}, 2)
	before := r.Free()
	r.Finish(<-r.Queue())
	if free != before || queued != 0 || r.Free() != before+1 {
		t.Fatalf("at the hook: %d free (%d before), %d bytes queued; after: %d free", free, before, queued, r.Free())
	}
}

// Take waits for a batch until its wait is ready; with none, it does not wait.
func TestTakeWaitsOnlyWhenAskedTo(t *testing.T) {
	r, _ := newRing(t, 1, 256, 1)
	b := r.Take(nil)
	if b == nil || r.Take(nil) != nil {
		t.Fatal("one batch, taken once")
	}
	if r.Take(time.After(time.Millisecond)) != nil {
		t.Fatal("a batch taken with none free")
	}
	go r.Put(b)
	if r.Take(time.After(10*time.Second)) != b {
		t.Fatal("the batch put back was not taken")
	}
}

// Drain hands the held batches, then the queued ones, in sealing order; Idle is true
// only once none waits.
func TestDrainHandsHeldThenQueuedInOrder(t *testing.T) {
	r, _ := newRing(t, 8, 64, 1)
	for range 3 {
		sealOne(t, r, testkit.Entries(1, strings.Repeat("x", 30)), 1) // too big to merge
	}
	r.Compact(<-r.Queue()) // 2 and 3 held
	for range 2 {
		sealOne(t, r, testkit.Entries(1, strings.Repeat("x", 30)), 1) // 4 and 5 queued
	}
	if r.Idle() || r.heldN.Load() != 2 {
		t.Fatalf("idle %v with %d held", r.Idle(), r.heldN.Load())
	}
	var got []uint64
	r.Drain(func(b *Batch) { got = append(got, b.First) })
	if !slices.Equal(got, []uint64{2, 3, 4, 5}) || !r.Idle() {
		t.Fatalf("drained %v (idle %v), want 2 to 5", got, r.Idle())
	}
}

// Whatever takes, puts, seals, compactions and finishes happen, every batch is in one place
// at a time: once all are finished or put back, the free list holds each batch once, every
// position sealed is finished, and nothing is queued.
func TestEveryBatchComesBackOnce(t *testing.T) {
	const n = 16
	r, o := newRing(t, n, 512, 1)
	rng := rand.New(rand.NewPCG(1, 2))
	var open, sending []*Batch
	entries := 0
	for range 5000 {
		switch rng.IntN(6) {
		case 0: // a writer takes a batch
			if b := r.Take(nil); b != nil {
				open = append(open, b)
			}
		case 1: // a writer seals or gives back its batch
			if len(open) > 0 {
				b := open[0]
				open = open[1:]
				if rng.IntN(4) == 0 {
					r.Put(b)
					continue
				}
				k := 1 + rng.IntN(4)
				b.Buf = append(b.Buf, testkit.Entries(k, "m")...)
				b.N = k
				entries += k
				r.Seal(b)
			}
		case 2: // the sender takes the next batch
			if b := r.TakeHeld(); b != nil {
				sending = append(sending, b)
			} else {
				select {
				case b := <-r.Queue():
					sending = append(sending, b)
				default:
				}
			}
		case 3: // the sender cannot deliver its newest batch
			if len(sending) > 0 {
				r.Compact(sending[len(sending)-1])
			}
		case 4, 5: // the sender delivers its oldest batch
			if len(sending) > 0 {
				r.Finish(sending[0])
				sending = sending[1:]
			}
		}
	}
	for _, b := range open {
		r.Put(b)
	}
	for _, b := range sending {
		r.Finish(b)
	}
	r.Drain(r.Finish)
	seen := map[*Batch]bool{}
	for b := r.Take(nil); b != nil; b = r.Take(nil) {
		if seen[b] || b.N != 0 || len(b.Buf) != 0 {
			t.Fatalf("batch back twice, or not reset (%d entries)", b.N)
		}
		seen[b] = true
	}
	if q, _ := r.Bytes(); len(seen) != n || q != 0 || !r.WaitDone(r.LastSealed(), time.After(time.Second)) {
		t.Fatalf("%d of %d batches back, %d bytes queued, done %d of %d", len(seen), n, q, r.done.Upto(), r.LastSealed())
	}
	if o.entries != entries {
		t.Fatalf("the owner was told of %d entries finished, %d were sealed", o.entries, entries)
	}
}
