package fluentcore

import (
	"sync/atomic"

	"github.com/fluentcore/fluentcore/internal/wire"
)

// A batch is what a stream's buffers are made of and what a forwarder sends: it sits below
// the sink and the forwarders, which both use it, and uses neither.

// batch is one buffer of encoded entries: the payload of one PackedForward frame.
type batch struct {
	buf   []byte // concatenated Forward entries; cap is the stream's batch size, never grown
	n     int    // entries in buf
	first uint64 // the first position in the stream's sealing order this batch finishes
	last  uint64 // the last: first and last differ once compact has merged batches into it
	tok   ackToken
	// reserved: taken from the free batches the policy reserves (streamPolicy.reserves);
	// while it is open, only entries the policy keeps whole are written into it.
	reserved bool
	// opened is when its first entry was written (unix nanos, the sink's clock), 0 while
	// it holds none: written under its shard's lock, read by Stats (OldestPending).
	opened atomic.Int64
}

// openedBy makes b as old as o, if o is older: o's entries (some of them) move into b.
func (b *batch) openedBy(o *batch) {
	if at := o.opened.Load(); at != 0 && (b.opened.Load() == 0 || at < b.opened.Load()) {
		b.opened.Store(at)
	}
}

// ackToken is the ack token (the "chunk" option) of one frame's entries. A resend of the
// same entries reuses it, as fluentd does, so a receiver could tell a resend from new
// data; other entries (a new frame, or a batch compact has added to) get a new one.
type ackToken struct {
	id  string
	of  *byte // the entries it was made for: first byte and length
	len int
}

// forEntries returns the token for entries.
func (t *ackToken) forEntries(entries []byte) string {
	if t.id != "" && len(entries) > 0 && &entries[0] == t.of && len(entries) == t.len {
		return t.id
	}
	*t = ackToken{id: wire.NewChunkID()}
	if len(entries) > 0 {
		t.of, t.len = &entries[0], len(entries)
	}
	return t.id
}
