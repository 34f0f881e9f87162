package stream

import (
	"testing"
	"time"

	"github.com/fluentcore/fluentcore/internal/outcome"
	"github.com/fluentcore/fluentcore/internal/tagtable"
)

// The counts of a stream, built alone over its shards: each entry counted in before its
// outcome, by shard and by logger tag, read into Stats with what is neither delivered,
// spilled nor dropped as Pending, and Dropping while a drop for backpressure is recent.
func TestStreamCountsReadEveryEntryOnce(t *testing.T) {
	s := testSettings(defaultBatchBytes, defaultEntryBytes)
	tags := newTestTags()
	ss := newShards(8, tags, s.Enc)
	start := time.Unix(100, 0)
	c := newCounts(Info, tags, ss, time.Second, start)
	audit := tags.Lookup("audit")
	c.entry(&ss.all[0], tagtable.Ref{})
	c.entry(&ss.all[0], tagtable.Ref{Over: true})
	c.entry(&ss.all[1], audit)
	c.entry(&ss.all[1], audit)
	c.Drop(outcome.Degraded, audit)                     // shed in Check: counted in and dropped at once
	c.dropped(&ss.all[1], outcome.QueueFull, audit.Idx) // one of audit's written entries
	c.frameDelivered(audit.Idx, make([]byte, 10), 1)
	c.spilled.Add(1) // the stream's own tag's
	read := func(now time.Time, closed bool) Stats {
		st := Stats{Dropped: map[string]uint64{}, Delivered: c.Delivered.Load(), Spilled: c.spilled.Load()}
		c.read(&st, now, closed)
		return st
	}
	st := read(start, false)
	if st.Entries != 5 || st.TagOverflow != 1 || st.Dropped["degraded"] != 1 || st.Dropped["queue_full"] != 1 || st.Pending != 1 {
		t.Fatalf("entries %d, overflow %d, dropped %v, pending %d; want 5, 1, a degraded and a queue_full, 1", st.Entries, st.TagOverflow, st.Dropped, st.Pending)
	}
	if ts := tagtable.TotalsOf[tagtable.Totals](tags, int(Info))[tags.TagOf(audit.Idx, int(Info))]; ts.Entries != 3 || ts.Dropped != 2 || ts.Delivered != 1 {
		t.Fatalf("audit's counts %+v; want 3 entries, 2 dropped, 1 delivered", ts)
	}
	if !st.Dropping || read(start, true).Dropping {
		t.Fatal("Dropping is not true with two recent drops, false once closed")
	}
	if c.DeliveredBytes.Load() != 10 {
		t.Fatalf("delivered bytes %d; want 10", c.DeliveredBytes.Load())
	}
	c.Roll(start.Add(time.Second))
	if read(start.Add(2*time.Second), false).Dropping {
		t.Fatal("Dropping a second after the last drop")
	}
}
