package ring

import (
	"sync/atomic"

	"github.com/fluentcore/fluentcore/internal/wire"
)

// Batch is one buffer of encoded entries of one or more tags: the payload of one
// PackedForward frame per tag. Its entries are in runs, each of one tag, one after another
// in the order they were written; before its first frame is sent, its owner makes each
// tag's runs one (RegroupInto or RegroupInPlace), keeping each tag's entries in their
// order, and each run is then one frame (Group). Its tags cost the bytes their entries
// take: a tag that shares a batch with another seals nothing.
//
// A batch is not safe for concurrent use: one writer fills it (under its shard's lock),
// then one sender frames it; only Opened is read by others.
type Batch struct {
	Buf []byte // concatenated Forward entries; cap is the size given to NewBatch, never grown
	N   int    // entries in Buf
	// Tag is the tag index (0: the stream's own) of the writer that opened the batch, the
	// tag whose batches it counts in while Claimed; its first run's tag.
	Tag uint16
	// Runs are its entries by tag, in Buf's order; none while every entry is Tag's (a batch
	// written into directly: EnsureRuns). At most cap(Runs), of at most cap(TagsIn) tags: a
	// batch that has no room for the next run is sealed.
	Runs   []Run
	TagsIn []uint16 // the tags of its runs, each once, in the order they came
	// Grouped says Group has run: each run is one frame, sent under its own ack token
	// (toks; "" until its first send, and again once its entries change) and marked in
	// Sent once delivered, so that a resend skips it. At most cap(TagsIn) frames.
	Grouped bool
	toks    []string
	Sent    []bool
	// Claimed says the batch is counted in its tag's batches until finished.
	Claimed bool
	First   uint64 // the first position in the stream's sealing order this batch finishes
	Last    uint64 // the last: First and Last differ once batches are merged into it
	// Reserved: taken from the free batches kept for entries the stream's policy keeps
	// whole; while it is open, only such entries are written into it.
	Reserved bool
	// Opened is when its first entry was written (unix nanos, the sink's clock), 0 while
	// it holds none: written under its shard's lock, read by the stream's statistics.
	Opened atomic.Int64
}

// Run is a stretch of a batch's entries of one tag: from the previous run's End (0 for
// the first) to End, N entries.
type Run struct {
	End, N uint32
	Tag    uint16
}

// MaxTags is the most tags one batch holds, and so the most frames it is sent as.
// runBytes is how many bytes of a batch's buffer make room for one run (at least 4 runs,
// and as many as tags): two tags that take turns in one shard make a run of each entry,
// and the batch is sealed once it holds its runs' worth. The runs' room (12 bytes a run)
// is then about 1/21 of the buffer, made once with it.
const (
	MaxTags  = 32
	runBytes = 256
)

// NewBatch returns an empty batch of size bytes with the room of its runs and frames made
// once.
func NewBatch(size int) *Batch {
	runs := max(4, size/runBytes)
	tags := min(MaxTags, runs)
	return &Batch{
		Buf:    make([]byte, 0, size),
		Runs:   make([]Run, 0, runs),
		TagsIn: make([]uint16, 0, tags),
		toks:   make([]string, 0, tags),
		Sent:   make([]bool, 0, tags),
	}
}

// lastTag is the tag of the batch's last entry; tag while it has no runs.
func (b *Batch) lastTag() uint16 {
	if len(b.Runs) == 0 {
		return b.Tag
	}
	return b.Runs[len(b.Runs)-1].Tag
}

// Accepts reports whether an entry of tag may be appended to b: it holds none, its last
// run is tag's (and not sent), or it has room for one more run (and frame, once grouped)
// and, for a tag it does not hold, one more tag.
func (b *Batch) Accepts(tag uint16) bool {
	if b.N == 0 || b.lastTag() == tag && !b.lastSent() {
		return true
	}
	if len(b.Runs) >= cap(b.Runs) || b.Grouped && len(b.Runs) >= cap(b.toks) {
		return false
	}
	return b.Holds(tag) || len(b.TagsIn) < cap(b.TagsIn)
}

// lastSent reports whether b's last run is a frame delivered already.
func (b *Batch) lastSent() bool {
	return b.Grouped && len(b.Sent) > 0 && b.Sent[len(b.Sent)-1]
}

// TakesRuns reports whether b has room for src's runs and tags (src not grouped), were
// src's entries appended to it.
func (b *Batch) TakesRuns(src *Batch) bool {
	runs, tags := max(len(src.Runs), 1), max(len(src.TagsIn), 1)
	if b.Grouped && len(b.Runs)+runs > cap(b.toks) {
		return false
	}
	return len(b.Runs)+runs <= cap(b.Runs) && len(b.TagsIn)+tags <= cap(b.TagsIn)
}

// Holds reports whether b holds an entry of tag.
func (b *Batch) Holds(tag uint16) bool {
	if len(b.Runs) == 0 {
		return b.N > 0 && b.Tag == tag
	}
	for _, t := range b.TagsIn {
		if t == tag {
			return true
		}
	}
	return false
}

// EnsureRuns gives the entries of a batch written without runs (Buf[:end], all of its
// tag) their run.
func (b *Batch) EnsureRuns(end int) {
	if len(b.Runs) == 0 && b.N > 0 && end > 0 {
		b.Runs = append(b.Runs, Run{End: uint32(end), N: uint32(b.N), Tag: b.Tag})
		b.TagsIn = append(b.TagsIn[:0], b.Tag)
		if b.Grouped {
			b.toks, b.Sent = append(b.toks, ""), append(b.Sent, false)
		}
	}
}

// Added records the entry of tag just appended to b.Buf, which began at start: b.N and
// its run. The caller made sure b accepts tag.
func (b *Batch) Added(tag uint16, start int) {
	b.EnsureRuns(start)
	if b.N == 0 {
		b.Tag = tag
	}
	b.Extend(tag, len(b.Buf), 1)
	b.N++
}

// Extend adds n entries of tag, from the end of b's runs to end, to b's runs (not to
// b.N): to its last run if that is tag's and not sent, else as a new run.
func (b *Batch) Extend(tag uint16, end, n int) {
	if k := len(b.Runs) - 1; k >= 0 && b.Runs[k].Tag == tag && (!b.Grouped || !b.Sent[k]) {
		b.Runs[k].End, b.Runs[k].N = uint32(end), b.Runs[k].N+uint32(n)
		if b.Grouped {
			b.toks[k] = "" // other entries: another token
		}
		return
	}
	b.Runs = append(b.Runs, Run{End: uint32(end), N: uint32(n), Tag: tag})
	if !b.Holds(tag) {
		b.TagsIn = append(b.TagsIn, tag)
	}
	if b.Grouped {
		b.toks, b.Sent = append(b.toks, ""), append(b.Sent, false)
	}
}

// Start is where run i begins in buf.
func (b *Batch) Start(i int) int {
	if i == 0 {
		return 0
	}
	return int(b.Runs[i-1].End)
}

// Interleaved reports whether some tag of b has more than one run.
func (b *Batch) Interleaved() bool { return len(b.Runs) > len(b.TagsIn) }

// RegroupInto copies b's entries into sp's buffer (empty, of the same size) tag by tag —
// each tag's runs one after another, in their order, the tags in the order they first
// came — and swaps the two buffers and runs: b then has one run per tag, and sp, still
// empty, b's old buffer. Neither is grouped yet.
func (b *Batch) RegroupInto(sp *Batch) {
	out, runs := sp.Buf[:0], sp.Runs[:0]
	for _, t := range b.TagsIn {
		n := uint32(0)
		for i, r := range b.Runs {
			if r.Tag == t {
				out = append(out, b.Buf[b.Start(i):r.End]...)
				n += r.N
			}
		}
		runs = append(runs, Run{End: uint32(len(out)), N: n, Tag: t})
	}
	b.Buf, sp.Buf = out, b.Buf[:0]
	b.Runs, sp.Runs = runs, b.Runs[:0]
}

// RegroupInPlace makes each tag's runs one as regroupInto does, in b's own buffer: each
// later run of a tag is moved back to the end of the tag's first, the runs between moved
// up. Slower (the bytes between move once per run moved back): for when no buffer is free.
func (b *Batch) RegroupInPlace() {
	var tmp [4096]byte
	for i := 0; i < len(b.Runs); i++ {
		for j := i + 1; j < len(b.Runs); j++ {
			if b.Runs[j].Tag != b.Runs[i].Tag {
				continue
			}
			mid, ys, ye := int(b.Runs[i].End), b.Start(j), int(b.Runs[j].End)
			if y := ye - ys; y <= len(tmp) {
				copy(tmp[:y], b.Buf[ys:ye])
				copy(b.Buf[mid+y:ye], b.Buf[mid:ys])
				copy(b.Buf[mid:], tmp[:y])
			} else {
				rotate(b.Buf[mid:ye], ys-mid)
			}
			y := uint32(ye - ys)
			for k := i + 1; k < j; k++ {
				b.Runs[k].End += y
			}
			b.Runs[i].End += y
			b.Runs[i].N += b.Runs[j].N
			b.Runs = append(b.Runs[:j], b.Runs[j+1:]...)
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

// Group readies b to be sent: each run is one frame, with a token and a sent mark. The
// runs must be one per tag (regroupInto, regroupInPlace). It does nothing once done.
func (b *Batch) Group() {
	if b.Grouped {
		return
	}
	b.EnsureRuns(len(b.Buf))
	b.Grouped = true
	b.toks = b.toks[:len(b.Runs)]
	b.Sent = b.Sent[:len(b.Runs)]
	clear(b.toks)
	clear(b.Sent)
}

// Frame returns frame i of a grouped batch: its tag, entries and count.
func (b *Batch) Frame(i int) (tag uint16, entries []byte, n int) {
	r := &b.Runs[i]
	return r.Tag, b.Buf[b.Start(i):r.End], int(r.N)
}

// Token returns the ack token of frame i of a grouped batch: the same for every send of
// the same entries, as fluentd does, so a receiver could tell a resend from new data.
func (b *Batch) Token(i int) string {
	if b.toks[i] == "" {
		b.toks[i] = wire.NewChunkID()
	}
	return b.toks[i]
}

// FrameOf returns the frame of a grouped batch whose ack token is chunk, or -1.
func (b *Batch) FrameOf(chunk string) int {
	for i, t := range b.toks {
		if t == chunk {
			return i
		}
	}
	return -1
}

// Unsent is how many of b's entries are not delivered yet.
func (b *Batch) Unsent() int {
	if !b.Grouped {
		return b.N
	}
	n := 0
	for i := range b.Runs {
		if !b.Sent[i] {
			n += int(b.Runs[i].N)
		}
	}
	return n
}

// AllSent reports whether every frame of a grouped batch is delivered.
func (b *Batch) AllSent() bool {
	for _, s := range b.Sent {
		if !s {
			return false
		}
	}
	return true
}

// Reset empties b for the free list.
func (b *Batch) Reset() {
	b.Buf, b.N, b.Tag, b.Reserved = b.Buf[:0], 0, 0, false
	b.Runs, b.TagsIn, b.Grouped = b.Runs[:0], b.TagsIn[:0], false
	clear(b.toks)
	b.toks, b.Sent = b.toks[:0], b.Sent[:0]
	b.Opened.Store(0)
}

// OpenedBy makes b as old as o, if o is older: o's entries (some of them) move into b.
func (b *Batch) OpenedBy(o *Batch) {
	if at := o.Opened.Load(); at != 0 && (b.Opened.Load() == 0 || at < b.Opened.Load()) {
		b.Opened.Store(at)
	}
}

// AckToken is the ack token (the "chunk" option) of one frame's entries. A resend of the
// same entries reuses it, as fluentd does, so a receiver could tell a resend from new
// data; other entries (a new frame, or a batch compact has added to) get a new one.
type AckToken struct {
	id  string
	of  *byte // the entries it was made for: first byte and length
	len int
}

// ForEntries returns the token for entries.
func (t *AckToken) ForEntries(entries []byte) string {
	if t.id != "" && len(entries) > 0 && &entries[0] == t.of && len(entries) == t.len {
		return t.id
	}
	*t = AckToken{id: wire.NewChunkID()}
	if len(entries) > 0 {
		t.of, t.len = &entries[0], len(entries)
	}
	return t.id
}

// AppendBatch appends src's entries and runs to b, which has room for both (len(b.Buf) +
// len(src.buf) <= cap(b.Buf) and b.takesRuns(src)); each of src's runs extends b's last
// run when it is of the same tag and not sent.
func (b *Batch) AppendBatch(src *Batch) {
	b.EnsureRuns(len(b.Buf))
	src.EnsureRuns(len(src.Buf))
	off := len(b.Buf)
	b.Buf = append(b.Buf, src.Buf...)
	for _, r := range src.Runs {
		b.Extend(r.Tag, off+int(r.End), int(r.N))
	}
	b.N += src.N
}
