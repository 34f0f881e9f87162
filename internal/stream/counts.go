package stream

// A stream's counts: what became of each entry it took in, for Stats, its metrics and the
// recent windows of KeepRatio and Dropping.

import (
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/fluentcore/fluentcore/internal/outcome"
	"github.com/fluentcore/fluentcore/internal/tagtable"
)

// Counts are a stream's counters of entries and their outcomes. An entry is counted
// in (shard.entries, by the writer under its shard's lock, or drop for one shed before the
// write) before its outcome (delivered, spilled, or dropped by reason in its shard), and
// every counter only grows; so read reads the outcomes before the entries, and Pending is
// never negative. A logger tag's entries are counted for the tag too (tagtable.Table.Counters), the
// stream's own tag's only in the stream's totals. Safe for concurrent use, but for Recent,
// which only the sink's clock rolls.
type Counts struct {
	id     ID
	tags   *tagtable.Table
	shards *shards // each shard counts what its writers took in and dropped

	Delivered, spilled atomic.Uint64
	DeliveredBytes     atomic.Uint64 // the encoded entries' bytes of the batches delivered (the degrade policy's entry size)
	Waits              atomic.Uint64 // err writes that found no room and waited
	WaitsOut           atomic.Uint64 // of those, the ones whose Err.MaxWait ran out

	// Recent is the ring of counts KeepRatio and Dropping are read from, which the sink's
	// clock rolls once a second (Roll).
	Recent        outcome.Window
	flushInterval time.Duration // Settings.FlushInterval: how long an entry may wait (stalled)
}

// newCounts makes the counts of stream id over its shards, its recent windows
// starting at now.
func newCounts(id ID, tags *tagtable.Table, ss *shards, flushInterval time.Duration, now time.Time) *Counts {
	c := &Counts{id: id, tags: tags, shards: ss, flushInterval: flushInterval}
	c.Recent.Start(now)
	return c
}

// entry counts an entry in: in its shard, as past Tags.Max if its logger's tag is, and in
// its logger tag's counts.
func (c *Counts) entry(sh *shard, tag tagtable.Ref) {
	sh.entries.Add(1)
	if tag.Over {
		sh.tagOverflow.Add(1)
	}
	if tc := c.tags.Counters(tag.Idx); tc != nil {
		tc.Entries[c.id].Add(1)
	}
}

// Drop counts an entry of tag dropped before it reached a shard (in Check).
func (c *Counts) Drop(r outcome.Reason, tag tagtable.Ref) {
	sh := &c.shards.all[rand.N(len(c.shards.all))]
	sh.entries.Add(1)
	sh.dropped[r].Add(1)
	if tag.Over {
		sh.tagOverflow.Add(1)
	}
	if tc := c.tags.Counters(tag.Idx); tc != nil {
		tc.Entries[c.id].Add(1)
		tc.Dropped[c.id].Add(1)
	}
}

// dropped counts an entry of tag the writer of sh dropped for why.
func (c *Counts) dropped(sh *shard, why outcome.Reason, tag uint16) {
	sh.dropped[why].Add(1)
	c.droppedTag(tag, 1)
}

// droppedTag counts n entries of tag idx dropped (besides the stream's count by reason).
func (c *Counts) droppedTag(idx uint16, n int) {
	if tc := c.tags.Counters(idx); tc != nil {
		tc.Dropped[c.id].Add(uint64(n))
	}
}

// frameDelivered counts a frame delivered: its n entries of tag and their bytes, for the
// stream and for its tag.
func (c *Counts) frameDelivered(tag uint16, entries []byte, n int) {
	c.DeliveredBytes.Add(uint64(len(entries)))
	c.Delivered.Add(uint64(n))
	if tc := c.tags.Counters(tag); tc != nil {
		tc.Delivered[c.id].Add(uint64(n))
	}
}

// recentCounts returns the stream's cumulative counts for its recent windows; the drops are
// read before the entries, which count each entry first.
func (c *Counts) recentCounts() outcome.Counts {
	var rc outcome.Counts
	for i := range c.shards.all {
		sh := &c.shards.all[i]
		for r := range sh.dropped {
			v := sh.dropped[r].Load()
			rc.Dropped += v
			if outcome.Backpressure(outcome.Reason(r)) {
				rc.Pressed += v
			}
		}
	}
	for i := range c.shards.all {
		rc.Offered += c.shards.all[i].entries.Load()
	}
	return rc
}

// Roll is the sink's clock's: once a second of the clock it takes the stream's counts for
// KeepRatio and Dropping. Only the clock's goroutine calls it.
func (c *Counts) Roll(now time.Time) {
	if c.Recent.Due(now) {
		c.Recent.Roll(now, c.recentCounts())
	}
}

// read adds the entries and their drops to st, whose outcomes (Delivered, Spilled) the
// caller read before, at now: Entries, Truncated, TagOverflow, Dropped, Pending, the recent
// windows (Dropping false once the stream is closed). The logger tags' counters are the
// table's to read (tagtable.TotalsOf).
func (c *Counts) read(st *Stats, now time.Time, closed bool) {
	cur := c.recentCounts()
	var dropped [outcome.NumReasons]uint64
	for i := range c.shards.all {
		for r := range dropped {
			dropped[r] += c.shards.all[i].dropped[r].Load()
		}
	}
	for i := range c.shards.all {
		sh := &c.shards.all[i]
		st.Entries += sh.entries.Load()
		st.Truncated += sh.truncated.Load()
		st.TagOverflow += sh.tagOverflow.Load()
	}
	var lost uint64 // every outcome but delivery
	for r, v := range dropped {
		st.Dropped[outcome.Reason(r).String()] = v
		lost += v
	}
	lost += st.Spilled
	if st.Entries > st.Delivered+lost {
		st.Pending = st.Entries - st.Delivered - lost
	}
	st.Recent = cur.Minus(c.Recent.Before(now, outcome.KeepWindow))
	st.KeepRatio = outcome.KeepRatio(st.Recent)
	// A closed stream drops nothing for backpressure any more, and its clock, which moves
	// the window, has stopped: it reads false rather than its last second for ever.
	st.Dropping = !closed && cur.Minus(c.Recent.Before(now, outcome.DropWindow)).Pressed > 0
}

// StallAfter is how long a stream that holds entries may deliver nothing before Stats
// reports its Capacity as 0: more than the gaps between a healthy sender's frames, less than
// a scrape interval.
const StallAfter = time.Second

// stalled reports whether the stream delivers nothing at now, by st: an entry has waited
// longer than Transport.FlushInterval and StallAfter, and no server has taken a frame for StallAfter.
func (c *Counts) stalled(now time.Time, st *Stats) bool {
	if st.Pending == 0 || st.OldestPending <= c.flushInterval+StallAfter {
		return false
	}
	for _, sv := range st.Servers {
		if now.Sub(sv.LastDelivery) <= StallAfter {
			return false
		}
	}
	return true
}
