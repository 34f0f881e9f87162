package shed

import "sync/atomic"

// allowance is the entries Keep may still let through past the keys' ratios: limit -
// spent (left). Its invariants:
//
//   - limit is what the last limited step set, as the room it read plus what it read as
//     spent (set), raised since by every entry the sender freed (free). At unlimited/2 or
//     more the allowance is unlimited (limited): Keep takes none of it and free adds
//     nothing.
//   - spent is what Keep's entries took of it, ever, net of what they gave back (take);
//     each key's part of it is its slot's spent, added after spent itself, so that no
//     slot shows a payment that spent does not.
//   - margin is its last part, which only the keys kept whole may take: the last limited
//     step's Observation.Margin.
//
// So what an entry took is counted against the room once: a step reads each key's spent
// with its count of offers, takes the entries it counted that the stream has not taken in
// (pending) off the room it read, and of what was spent only what was taken after its
// reads (set).
type allowance struct {
	limit  lone
	spent  lone
	margin atomic.Int64
}

// left is the allowance: the entries Keep may still let through. Safe for concurrent use.
func (a *allowance) left() int64 { return a.limit.Load() - a.spent.Load() }

// limited reports whether the allowance counts (limits).
func (a *allowance) limited() bool { return limits(a.limit.Load()) }

// limits reports whether a limit l counts: it is under unlimited/2, since free may move an
// unlimited one by a few while a step stores it.
func limits(l int64) bool { return l < unlimited/2 }

// unlimit makes the allowance unlimited until a step sets it.
func (a *allowance) unlimit() { a.limit.Store(unlimited) }

// free adds n entries that left the buffer, unless the allowance is unlimited.
func (a *allowance) free(n int64) {
	if a.limited() {
		a.limit.Add(n)
	}
}

// set makes the allowance room (entries, at least 0) less what was spent since the step's
// reads of the keys, whose sum was spentRead; its margin, margin. before is the limit as
// the step began: set as a change to the live limit, the new one keeps what free added
// since.
func (a *allowance) set(room float64, margin int64, spentRead, before int64) {
	a.margin.Store(margin)
	want := int64(min(max(0, room), unlimited/4)) + spentRead
	if !limits(before) {
		a.limit.Store(want)
		return
	}
	a.limit.Add(want - before)
}

// take takes the allowance for the n-th entry of the key in sl, whose keep ratio is r,
// down to floor. A lease covers the key's entries up to sl.leased (their places in its
// count of offers): an entry it covers is paid for. An entry past it extends the lease to
// leaseChunk places past its own, and pays the allowance for the entries the ratio keeps
// among those the lease did not cover, while that leaves the margin whole; else it pays for
// itself alone. So a key's callers write the shared allowance once a chunk, and otherwise
// only read their slot's line, which they write anyway. In the margin a chunk would hold
// room that only its key may use until the next step, and the keys that go on into the
// margin are the ones kept whole, rare ones among them, which offer an entry or two a step:
// a chunk each would spend the margin many times faster than they fill it. A caller that
// races past the floor, or whose lease another caller moved first, gives back what it paid.
// What it keeps paid it adds to the key's own spent count (slot.spent) after the shared one,
// so that a step never reads a payment in a slot before its entry is counted there.
func (a *allowance) take(sl *slot, n, r uint64, floor int64) bool {
	for {
		end := sl.leased.Load()
		if n <= end {
			return true
		}
		from := end
		if n-end > leaseChunk {
			// The entries between went on without a lease (each paid for itself), but
			// for those whose callers are still between their count and here: they pass
			// on this lease unpaid, at most one a caller.
			from = n - 1
		}
		last := n + leaseChunk - 1
		pay := int64(keptIn(from, last, r))
		if margin := a.margin.Load(); a.left() < margin+pay {
			break
		} else if a.limit.Load()-a.spent.Add(pay) < margin {
			a.spent.Add(-pay)
			break
		}
		if sl.leased.CompareAndSwap(end, last) {
			sl.spent.Add(pay)
			return true
		}
		a.spent.Add(-pay)
	}
	paid := false
	if a.left() > floor {
		if paid = a.limit.Load()-a.spent.Add(1) >= floor; !paid {
			a.spent.Add(-1)
		} else {
			sl.spent.Add(1)
		}
	}
	// Paid for by itself or not at all, the entry is paid for by no lease later: the lease
	// moves past it while it is the next place.
	sl.leased.CompareAndSwap(n-1, n)
	return paid
}
