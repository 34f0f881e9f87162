// Package tagtable is the core's table of logger tags: each name a logger asks for (its Tag
// option, or its logger name) gets a small index once, which is all an entry carries
// (Ref); the table holds each index's tag on each stream and its counters. It knows no
// template and no stream beyond their number: its maker says how a name becomes a tag
// (New's expand) and how long a name may be.
package tagtable

import (
	"strings"
	"sync"
	"sync/atomic"
)

// Streams is how many streams each index has a tag on: the info stream (0) and the err
// stream (1).
const Streams = 2

// Ref is what travels with an entry: Idx, the entry's tag (0: its stream's own tag), and
// Over, whether its logger asked for a name past the table's cap (counted as such).
type Ref struct {
	Idx  uint16
	Over bool
}

// Table resolves tag names to indexes: at most max of them, each with its tag per stream.
// Lookups are lock-free (an immutable map, replaced whole under mu as a name is added); a
// name past max takes no lock once the table is full. Safe for concurrent use.
type Table struct {
	expand func(name string, stream int) string // a name's tag on a stream
	max    int                                  // names at most
	// nameRoom is the longest name whose tags fit: a longer one is past the cap, as a name
	// past max is, without a lock.
	nameRoom int
	names    atomic.Pointer[map[string]Ref]
	full     atomic.Bool // max names are in names: a new one is past the cap
	inUse    atomic.Bool // a name is in names
	mu       sync.Mutex
	n        int // names so far; tags[1:n+1] are set
	// tags holds each index's tag by stream: index 0 is the streams' own tags. Allocated
	// whole up front, each entry written once before its index is published in names, so
	// that readers (the senders, by a batch's index) need no lock.
	tags [][Streams]string
	// counts are each index's counters, by stream (index 0's stay zero: the stream's own
	// tag is the stream's totals less the others).
	counts []Counters
}

// Counters are one logger tag's counters, by stream: 64 bytes, a cache line, as a tag's
// writers share its shard anyway. Safe for concurrent use.
type Counters struct {
	Entries, Delivered, Dropped, Spilled [Streams]atomic.Uint64
}

// Totals are one tag's counters on one stream, read.
type Totals struct {
	Entries, Delivered, Dropped, Spilled uint64
}

// New returns a table of at most max names, the streams' own tags at index 0. A name's tag
// on a stream is expand(name, stream); a name longer than nameRoom, whose tags would be
// too long, is past the cap.
func New(streamTags [Streams]string, max, nameRoom int, expand func(name string, stream int) string) *Table {
	t := &Table{expand: expand, max: max, nameRoom: nameRoom,
		tags: make([][Streams]string, max+1), counts: make([]Counters, max+1)}
	t.tags[0] = streamTags
	m := map[string]Ref{}
	t.names.Store(&m)
	return t
}

// Lookup returns the index of name ("" is the streams' own tag), adding it if the table has
// room; a name past the cap gets index 0 and Over, and so does a name longer than the
// table's nameRoom, or one that is only dots (no segment to send under).
func (t *Table) Lookup(name string) Ref {
	if name == "" {
		return Ref{}
	}
	if r, ok := (*t.names.Load())[name]; ok {
		return r
	}
	if t.full.Load() || len(name) > t.nameRoom || strings.Trim(name, ".") == "" {
		return Ref{Over: true}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	old := *t.names.Load()
	if r, ok := old[name]; ok {
		return r
	}
	if t.n >= t.max {
		t.full.Store(true)
		return Ref{Over: true}
	}
	t.n++
	r := Ref{Idx: uint16(t.n)}
	for id := range Streams {
		t.tags[r.Idx][id] = t.expand(name, id)
	}
	m := make(map[string]Ref, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	m[name] = r
	t.names.Store(&m)
	t.inUse.Store(true)
	return r
}

// TagOf returns the tag of index idx on stream. idx comes from Lookup (directly, or through
// a batch written after it), which published it.
func (t *Table) TagOf(idx uint16, stream int) string { return t.tags[idx][stream] }

// InUse reports whether the table holds a name: until then every entry is of its
// stream's own tag.
func (t *Table) InUse() bool { return t.inUse.Load() }

// Max is the most names the table holds.
func (t *Table) Max() int { return t.max }

// Counters returns index idx's counters; nil for index 0, the streams' own tag.
func (t *Table) Counters(idx uint16) *Counters {
	if idx == 0 {
		return nil
	}
	return &t.counts[idx]
}

// Count is how many names the table holds; indexes 1 to Count are theirs.
func (t *Table) Count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n
}

// TotalsOf returns the counters of every name's tag on stream, by tag (two names can make
// one tag: their counters are added), as T, a type with Totals' fields (the root's
// TagStats): nil if t holds no name. Safe for concurrent use; the counters are read one by
// one, without a lock.
func TotalsOf[T ~struct{ Entries, Delivered, Dropped, Spilled uint64 }](t *Table, stream int) map[string]T {
	n := t.Count()
	if n == 0 {
		return nil
	}
	m := make(map[string]T, n)
	for i := 1; i <= n; i++ {
		c := &t.counts[i]
		tag := t.tags[i][stream]
		st := Totals(m[tag])
		st.Entries += c.Entries[stream].Load()
		st.Delivered += c.Delivered[stream].Load()
		st.Dropped += c.Dropped[stream].Load()
		st.Spilled += c.Spilled[stream].Load()
		m[tag] = T(st)
	}
	return m
}
