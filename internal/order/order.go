// Package order tracks how far a numbered sequence is finished when its parts finish out of
// order: the sink numbers its batches as they are sealed, several senders finish them in
// any order, and Sync waits until every batch up to a number is finished. It knows nothing
// of time or of the sink.
package order

// Range is a run of positions, First to Last, finished together.
type Range struct{ First, Last uint64 }

// Done is the finished prefix of a sequence whose positions start at 1, and the runs
// finished beyond it. The zero value has nothing finished. Not safe for concurrent use: the
// caller holds a lock of its own around Mark and Upto.
type Done struct {
	upto  uint64  // every position up to this is finished
	early []Range // finished above upto, behind a position not finished yet
}

// New returns a Done whose early runs never need more room than room: one run per part
// that may be unfinished at once (the batches, plus one per sender), so that Mark never
// allocates.
func New(room int) *Done { return &Done{early: make([]Range, 0, room)} }

// Upto returns the highest position up to which everything is finished.
func (d *Done) Upto() uint64 { return d.upto }

// Early returns the runs finished beyond Upto (for tests and messages; do not keep it).
func (d *Done) Early() []Range { return d.early }

// Mark records that positions first to last are finished, and moves Upto over every run of
// finished positions that now follows it. A run that finished early waits in the early
// list, joined with its finished neighbours, so the list holds one run per gap.
func (d *Done) Mark(first, last uint64) {
	if first != d.upto+1 {
		left, right := -1, -1 // the finished runs this one joins
		for i, r := range d.early {
			if r.Last+1 == first {
				left = i
			}
			if last+1 == r.First {
				right = i
			}
		}
		switch {
		case left >= 0 && right >= 0:
			d.early[left].Last = d.early[right].Last
			d.early[right] = d.early[len(d.early)-1]
			d.early = d.early[:len(d.early)-1]
		case left >= 0:
			d.early[left].Last = last
		case right >= 0:
			d.early[right].First = first
		default:
			d.early = append(d.early, Range{first, last})
		}
		return
	}
	d.upto = last
	for i := 0; i < len(d.early); {
		if r := d.early[i]; r.First == d.upto+1 {
			d.upto = r.Last
			d.early[i] = d.early[len(d.early)-1]
			d.early = d.early[:len(d.early)-1]
			i = 0
			continue
		}
		i++
	}
}
