package order

import "testing"

// With several senders batches finish out of order; Upto, what Sync and Close wait on,
// moves only over positions that are all finished, and Early stays one run per gap.
func TestMarkAdvancesOverFinishedRunsOnly(t *testing.T) {
	d := New(4)
	steps := []struct {
		first, last uint64
		upto        uint64
		gaps        int
	}{
		{2, 2, 0, 1}, // 1 still with a sender
		{4, 5, 0, 2}, // a merged batch (compact): 3 missing too
		{3, 3, 0, 1}, // 2..5 now one run, still behind 1
		{1, 1, 5, 0}, // 1 done: everything up to 5
		{7, 7, 5, 1},
		{6, 6, 7, 0},
		{8, 8, 8, 0}, // in order, as with one sender
	}
	for i, s := range steps {
		d.Mark(s.first, s.last)
		if d.Upto() != s.upto || len(d.Early()) != s.gaps {
			t.Fatalf("step %d (finish %d..%d): done up to %d with %d runs early, want %d and %d: %v", i, s.first, s.last, d.Upto(), len(d.Early()), s.upto, s.gaps, d.Early())
		}
	}
}

// Marking never allocates within the room New was given.
func TestMarkDoesNotAllocate(t *testing.T) {
	d := New(8)
	var n uint64
	allocs := testing.AllocsPerRun(100, func() {
		// Four runs finished out of order, then the gap before them.
		for _, k := range []uint64{2, 4, 6, 8, 1, 3, 5, 7} {
			d.Mark(n+k, n+k)
		}
		n += 8
	})
	if allocs != 0 || d.Upto() != n {
		t.Fatalf("%v allocations per run, done up to %d of %d", allocs, d.Upto(), n)
	}
}
