package fluentcore

import (
	"sync/atomic"

	"github.com/fluentcore/fluentcore/internal/wire"
)

// A batch is what a stream's buffers are made of and what a forwarder sends: it sits below
// the sink and the forwarders, which both use it, and uses neither.

// batch is one buffer of encoded entries of one or more tags: the payload of one
// PackedForward frame per tag. Its entries are in runs, each of one tag, one after another
// in the order they were written; before its first frame is sent, the sender makes each
// tag's runs one (stream.regroup), keeping each tag's entries in their order, and each
// run is then one frame (group). Its tags cost the bytes their entries take: a tag that
// shares a shard's batch with another seals nothing.
type batch struct {
	buf []byte // concatenated Forward entries; cap is the stream's batch size, never grown
	n   int    // entries in buf
	// tag is the tag (tagTable's index; 0: the stream's own) of the writer that opened the
	// batch, the tag whose batches it counts in (stream.claim); its first run's tag.
	tag uint16
	// runs are its entries by tag, in buf's order; none while every entry is tag's (a
	// batch written into directly, as some tests do: ensureRuns). At most cap(runs), of at
	// most cap(tagsIn) tags: a batch that has no room for the next run is sealed.
	runs   []run
	tagsIn []uint16 // the tags of its runs, each once, in the order they came
	// grouped says group has run: each run is one frame, sent under its own ack token
	// (toks; "" until its first send, and again once its entries change) and marked sent
	// once delivered (sent), so that a resend skips it. At most cap(tagsIn) frames.
	grouped bool
	toks    []string
	sent    []bool
	// claimed says the batch is counted in its tag's batches (stream.claim) until finished.
	claimed bool
	first   uint64 // the first position in the stream's sealing order this batch finishes
	last    uint64 // the last: first and last differ once compact has merged batches into it
	// reserved: taken from the free batches the policy reserves (streamPolicy.reserves);
	// while it is open, only entries the policy keeps whole are written into it.
	reserved bool
	// opened is when its first entry was written (unix nanos, the sink's clock), 0 while
	// it holds none: written under its shard's lock, read by Stats (OldestPending).
	opened atomic.Int64
}

// run is a stretch of a batch's entries of one tag: from the previous run's end (0 for
// the first) to end, n entries.
type run struct {
	end, n uint32
	tag    uint16
}

// maxBatchTags is the most tags one batch holds, and so the most frames it is sent as.
// runBytes is how many bytes of a batch's buffer make room for one run (at least 4 runs,
// and as many as tags): two tags that take turns in one shard make a run of each entry,
// and the batch is sealed once it holds its runs' worth. The runs' room (12 bytes a run)
// is then about 1/21 of the buffer, made once with it.
const (
	maxBatchTags = 32
	runBytes     = 256
)

// newBatch returns an empty batch of size bytes with the room of its runs and frames made
// once.
func newBatch(size int) *batch {
	runs := max(4, size/runBytes)
	tags := min(maxBatchTags, runs)
	return &batch{
		buf:    make([]byte, 0, size),
		runs:   make([]run, 0, runs),
		tagsIn: make([]uint16, 0, tags),
		toks:   make([]string, 0, tags),
		sent:   make([]bool, 0, tags),
	}
}

// lastTag is the tag of the batch's last entry; tag while it has no runs.
func (b *batch) lastTag() uint16 {
	if len(b.runs) == 0 {
		return b.tag
	}
	return b.runs[len(b.runs)-1].tag
}

// accepts reports whether an entry of tag may be appended to b: it holds none, its last
// run is tag's (and not sent), or it has room for one more run (and frame, once grouped)
// and, for a tag it does not hold, one more tag.
func (b *batch) accepts(tag uint16) bool {
	if b.n == 0 || b.lastTag() == tag && !b.lastSent() {
		return true
	}
	if len(b.runs) >= cap(b.runs) || b.grouped && len(b.runs) >= cap(b.toks) {
		return false
	}
	return b.holds(tag) || len(b.tagsIn) < cap(b.tagsIn)
}

// lastSent reports whether b's last run is a frame delivered already.
func (b *batch) lastSent() bool {
	return b.grouped && len(b.sent) > 0 && b.sent[len(b.sent)-1]
}

// takesRuns reports whether b has room for src's runs and tags (src not grouped), were
// src's entries appended to it.
func (b *batch) takesRuns(src *batch) bool {
	runs, tags := max(len(src.runs), 1), max(len(src.tagsIn), 1)
	if b.grouped && len(b.runs)+runs > cap(b.toks) {
		return false
	}
	return len(b.runs)+runs <= cap(b.runs) && len(b.tagsIn)+tags <= cap(b.tagsIn)
}

// holds reports whether b holds an entry of tag.
func (b *batch) holds(tag uint16) bool {
	if len(b.runs) == 0 {
		return b.n > 0 && b.tag == tag
	}
	for _, t := range b.tagsIn {
		if t == tag {
			return true
		}
	}
	return false
}

// ensureRuns gives the entries of a batch written without runs (buf[:end], all of its
// tag) their run.
func (b *batch) ensureRuns(end int) {
	if len(b.runs) == 0 && b.n > 0 && end > 0 {
		b.runs = append(b.runs, run{end: uint32(end), n: uint32(b.n), tag: b.tag})
		b.tagsIn = append(b.tagsIn[:0], b.tag)
		if b.grouped {
			b.toks, b.sent = append(b.toks, ""), append(b.sent, false)
		}
	}
}

// added records the entry of tag just appended to b.buf, which began at start: b.n and
// its run. The caller made sure b accepts tag.
func (b *batch) added(tag uint16, start int) {
	b.ensureRuns(start)
	if b.n == 0 {
		b.tag = tag
	}
	b.extend(tag, len(b.buf), 1)
	b.n++
}

// extend adds n entries of tag, from the end of b's runs to end, to b's runs (not to
// b.n): to its last run if that is tag's and not sent, else as a new run.
func (b *batch) extend(tag uint16, end, n int) {
	if k := len(b.runs) - 1; k >= 0 && b.runs[k].tag == tag && (!b.grouped || !b.sent[k]) {
		b.runs[k].end, b.runs[k].n = uint32(end), b.runs[k].n+uint32(n)
		if b.grouped {
			b.toks[k] = "" // other entries: another token
		}
		return
	}
	b.runs = append(b.runs, run{end: uint32(end), n: uint32(n), tag: tag})
	if !b.holds(tag) {
		b.tagsIn = append(b.tagsIn, tag)
	}
	if b.grouped {
		b.toks, b.sent = append(b.toks, ""), append(b.sent, false)
	}
}

// start is where run i begins in buf.
func (b *batch) start(i int) int {
	if i == 0 {
		return 0
	}
	return int(b.runs[i-1].end)
}

// interleaved reports whether some tag of b has more than one run.
func (b *batch) interleaved() bool { return len(b.runs) > len(b.tagsIn) }

// regroupInto copies b's entries into sp's buffer (empty, of the same size) tag by tag —
// each tag's runs one after another, in their order, the tags in the order they first
// came — and swaps the two buffers and runs: b then has one run per tag, and sp, still
// empty, b's old buffer. Neither is grouped yet.
func (b *batch) regroupInto(sp *batch) {
	out, runs := sp.buf[:0], sp.runs[:0]
	for _, t := range b.tagsIn {
		n := uint32(0)
		for i, r := range b.runs {
			if r.tag == t {
				out = append(out, b.buf[b.start(i):r.end]...)
				n += r.n
			}
		}
		runs = append(runs, run{end: uint32(len(out)), n: n, tag: t})
	}
	b.buf, sp.buf = out, b.buf[:0]
	b.runs, sp.runs = runs, b.runs[:0]
}

// regroupInPlace makes each tag's runs one as regroupInto does, in b's own buffer: each
// later run of a tag is moved back to the end of the tag's first, the runs between moved
// up. Slower (the bytes between move once per run moved back): for when no buffer is free.
func (b *batch) regroupInPlace() {
	var tmp [4096]byte
	for i := 0; i < len(b.runs); i++ {
		for j := i + 1; j < len(b.runs); j++ {
			if b.runs[j].tag != b.runs[i].tag {
				continue
			}
			mid, ys, ye := int(b.runs[i].end), b.start(j), int(b.runs[j].end)
			if y := ye - ys; y <= len(tmp) {
				copy(tmp[:y], b.buf[ys:ye])
				copy(b.buf[mid+y:ye], b.buf[mid:ys])
				copy(b.buf[mid:], tmp[:y])
			} else {
				rotate(b.buf[mid:ye], ys-mid)
			}
			y := uint32(ye - ys)
			for k := i + 1; k < j; k++ {
				b.runs[k].end += y
			}
			b.runs[i].end += y
			b.runs[i].n += b.runs[j].n
			b.runs = append(b.runs[:j], b.runs[j+1:]...)
			j--
		}
	}
}

// rotate moves p[k:] in front of p[:k], in place.
func rotate(p []byte, k int) {
	reverse(p[:k])
	reverse(p[k:])
	reverse(p)
}

func reverse(p []byte) {
	for i, j := 0, len(p)-1; i < j; i, j = i+1, j-1 {
		p[i], p[j] = p[j], p[i]
	}
}

// group readies b to be sent: each run is one frame, with a token and a sent mark. The
// runs must be one per tag (regroupInto, regroupInPlace). It does nothing once done.
func (b *batch) group() {
	if b.grouped {
		return
	}
	b.ensureRuns(len(b.buf))
	b.grouped = true
	b.toks = b.toks[:len(b.runs)]
	b.sent = b.sent[:len(b.runs)]
	clear(b.toks)
	clear(b.sent)
}

// frame returns frame i of a grouped batch: its tag, entries and count.
func (b *batch) frame(i int) (tag uint16, entries []byte, n int) {
	r := &b.runs[i]
	return r.tag, b.buf[b.start(i):r.end], int(r.n)
}

// token returns the ack token of frame i of a grouped batch: the same for every send of
// the same entries, as fluentd does, so a receiver could tell a resend from new data.
func (b *batch) token(i int) string {
	if b.toks[i] == "" {
		b.toks[i] = wire.NewChunkID()
	}
	return b.toks[i]
}

// frameOf returns the frame of a grouped batch whose ack token is chunk, or -1.
func (b *batch) frameOf(chunk string) int {
	for i, t := range b.toks {
		if t == chunk {
			return i
		}
	}
	return -1
}

// unsent is how many of b's entries are not delivered yet.
func (b *batch) unsent() int {
	if !b.grouped {
		return b.n
	}
	n := 0
	for i := range b.runs {
		if !b.sent[i] {
			n += int(b.runs[i].n)
		}
	}
	return n
}

// allSent reports whether every frame of a grouped batch is delivered.
func (b *batch) allSent() bool {
	for _, s := range b.sent {
		if !s {
			return false
		}
	}
	return true
}

// reset empties b for the free list.
func (b *batch) reset() {
	b.buf, b.n, b.tag, b.reserved = b.buf[:0], 0, 0, false
	b.runs, b.tagsIn, b.grouped = b.runs[:0], b.tagsIn[:0], false
	clear(b.toks)
	b.toks, b.sent = b.toks[:0], b.sent[:0]
	b.opened.Store(0)
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

// appendBatch appends src's entries and runs to b, which has room for both (len(b.buf) +
// len(src.buf) <= cap(b.buf) and b.takesRuns(src)); each of src's runs extends b's last
// run when it is of the same tag and not sent.
func (b *batch) appendBatch(src *batch) {
	b.ensureRuns(len(b.buf))
	src.ensureRuns(len(src.buf))
	off := len(b.buf)
	b.buf = append(b.buf, src.buf...)
	for _, r := range src.runs {
		b.extend(r.tag, off+int(r.end), int(r.n))
	}
	b.n += src.n
}
