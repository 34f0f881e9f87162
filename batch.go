package fluentcore

import "github.com/fluentcore/fluentcore/internal/wire"

// A batch is what a stream's buffers are made of and what a forwarder sends: it sits below
// the sink and the forwarders, which both use it, and uses neither.

// batch is one buffer of encoded entries: the payload of one PackedForward frame.
type batch struct {
	buf []byte // concatenated Forward entries; cap is the stream's batch size, never grown
	n   int    // entries in buf
	tag uint16 // the tag of its entries (tagTable's index; 0: the stream's own): one frame, one tag
	// claimed says the batch is counted in its tag's batches (stream.claim) until finished.
	claimed bool
	first   uint64 // the first position in the stream's sealing order this batch finishes
	last    uint64 // the last: first and last differ once compact has merged batches into it
	tok     ackToken
	// reserved: taken from the free batches the policy reserves (streamPolicy.reserved);
	// while it is open, only entries the policy keeps whole are written into it.
	reserved bool
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
