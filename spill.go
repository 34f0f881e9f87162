package fluentcore

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tinylib/msgp/msgp"
	"go.uber.org/zap/zapcore"
)

// The durable err spill (Config.SpillDir): err batches that cannot be delivered are appended
// to segment files and replayed, oldest first, once the receiver is back — by this process,
// or by the next one after a crash.
//
//   - Format. A segment is a sequence of complete PackedForward frames,
//     [tag, bin(entries), {"size": n}], byte for byte what the sender writes on the wire
//     (without an ack "chunk"), so `cat SpillDir/*.fwd | nc fluentd 24224` replays a
//     directory by hand.
//   - Names. "%020d.fwd", a sequence number: lexical order is replay order. A segment is
//     closed once it holds segBytes and a new one is started; frames never straddle two.
//   - Durability. Every append is fsynced before it returns (err entries are rare and
//     durability is the point); the directory is fsynced after a segment is created, so
//     the new name survives a power cut too. A frame whose write or fsync fails is cut off
//     again and reported.
//   - Deletion. A segment is deleted once every frame in it was delivered (acknowledged,
//     with RequireAck). A crash between a delivery and that deletion sends the segment's
//     delivered frames again on restart: replay is at-least-once.
//   - Damage. A frame that does not parse as a valid PackedForward request of valid entries
//     (a tail cut by a crash, garbage) ends its segment: the frames before it are replayed,
//     the rest of the segment is skipped, counted and reported (EventSpillCorrupt).
//   - Ownership. SpillDir/LOCK is held with flock for the life of the core, so two
//     processes (or two cores) never share a directory: the second one runs without a
//     spill and reports it. The kernel drops the lock when a process dies, even by SIGKILL.
//   - Limit. The segments never hold more than maxBytes; a frame that does not fit is
//     refused with errSpillFull (the caller counts and reports it).

const (
	spillSuffix   = ".fwd"
	spillLockName = "LOCK"
	// spillSegmentMax is the largest segment size; smaller SpillMaxBytes get smaller segments
	// (a sixteenth of it), so deleting a delivered segment frees a useful share.
	spillSegmentMax = 4 << 20
	spillSegmentMin = 4 << 10
	// spillFrameMax is fluent-bit's in_forward limit for one request: a larger frame could
	// never be delivered, so it is neither written nor trusted when read.
	spillFrameMax = 6_144_000
	// spillOptionsMax bounds the option map of a frame read back; ours is {"size": n}.
	spillOptionsMax = 128
	// spillDepthMax bounds the nesting checked in a record read back.
	spillDepthMax = 100
)

var (
	// errSpillFull: the segments hold SpillMaxBytes; the frame was not written.
	errSpillFull = errors.New("fluentcore: spill: SpillMaxBytes reached")
	// errSpillClosed: the core was closed (its lock released); the caller uses ErrFallback.
	errSpillClosed = errors.New("fluentcore: spill: closed")
	// errSpillTooLarge: one entry larger than any receiver accepts; the caller uses ErrFallback.
	errSpillTooLarge = errors.New("fluentcore: spill: frame larger than a receiver accepts")
	// errEncode: a marshaler panicked while the entry was encoded for the spill.
	errEncode = errors.New("fluentcore: spill: encoding the entry panicked")
)

// segment is one spill file.
type segment struct {
	seq  uint64
	size int64 // bytes of complete frames (for a segment found at start: its file size)
}

// spillFrame is one frame read back from a segment, valid until the next head or pop.
type spillFrame struct {
	tag     string
	entries []byte // concatenated entries, pointing into the spill's read buffer
	n       int    // entries
	size    int64  // bytes the frame takes in its segment
}

// diskSpill is the segment store of one core's err stream. Appends (spillBatch,
// spillEntry) are safe for concurrent use and serialised by mu; the read side (head, pop)
// belongs to the err sender goroutine alone.
type diskSpill struct {
	dir      string
	maxBytes int64
	segBytes int64
	noSync   bool // benchmarks only: measure what fsync costs
	onEvent  func(Event)
	lock     *os.File

	mu      sync.Mutex
	closed  bool
	segs    []segment // oldest first; while w != nil the last one is w's
	w       *os.File
	nextSeq uint64
	full    bool // an append was refused since space was last freed: report once per episode
	enc     *msgpEncoder
	scratch []byte // spillEntry's encoded entry
	hdr     []byte // frame header scratch
	opt     []byte // option map scratch

	bytes   atomic.Int64  // bytes in all segments; written under mu, read anywhere
	corrupt atomic.Uint64 // segments whose tail was skipped

	// Read side: the err sender goroutine only.
	rf      *os.File
	rseq    uint64
	roff    int64
	rbuf    []byte
	cur     spillFrame
	haveCur bool
}

// openSpill creates dir if needed, takes its lock and lists the segments a previous process
// left. It does not read them: frames are checked as they are replayed, in the background.
func openSpill(dir string, maxBytes int64, batchBytes int, enc *encoderConfig, onEvent func(Event)) (*diskSpill, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("fluentcore: SpillDir: %w", err)
	}
	lock, err := lockSpillDir(filepath.Join(dir, spillLockName))
	if err != nil {
		return nil, err
	}
	d := &diskSpill{
		dir:      dir,
		maxBytes: maxBytes,
		segBytes: min(spillSegmentMax, max(maxBytes/16, spillSegmentMin, int64(batchBytes))),
		onEvent:  onEvent,
		lock:     lock,
		enc:      newMsgpEncoder(enc),
		nextSeq:  1,
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		unlockSpillDir(lock)
		return nil, fmt.Errorf("fluentcore: SpillDir: %w", err)
	}
	var total int64
	for _, e := range ents { // sorted by name, so by sequence number: the names are zero-padded
		seq, ok := parseSegmentName(e.Name())
		if !ok || !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		d.segs = append(d.segs, segment{seq: seq, size: info.Size()})
		total += info.Size()
		d.nextSeq = max(d.nextSeq, seq+1)
	}
	d.bytes.Store(total)
	return d, nil
}

func segmentName(seq uint64) string { return fmt.Sprintf("%020d%s", seq, spillSuffix) }

func parseSegmentName(name string) (uint64, bool) {
	base, ok := strings.CutSuffix(name, spillSuffix)
	if !ok || len(base) != 20 {
		return 0, false
	}
	seq, err := strconv.ParseUint(base, 10, 64)
	return seq, err == nil
}

func (d *diskSpill) path(seq uint64) string { return filepath.Join(d.dir, segmentName(seq)) }

// event reports a spill event; never called with mu held.
func (d *diskSpill) event(kind EventKind, err error) {
	if d.onEvent != nil {
		d.onEvent(Event{Kind: kind, Stream: errStream.String(), Time: time.Now(), Err: err})
	}
}

// spillBatch appends one sealed batch as a frame.
func (d *diskSpill) spillBatch(tag string, entries []byte, n int) error {
	d.mu.Lock()
	report, err := d.appendLocked(tag, entries, n)
	d.mu.Unlock()
	d.reportAppend(err, report)
	return err
}

// spillEntry encodes one entry and appends it as a one-entry frame.
func (d *diskSpill) spillEntry(tag string, ctx *encodedContext, ent zapcore.Entry, fields []zapcore.Field) error {
	d.mu.Lock()
	out, ok := encodeSafely(d.enc, d.scratch[:0], ctx, ent, fields)
	var err error
	var report bool
	if ok {
		report, err = d.appendLocked(tag, out, 1)
	} else {
		err = errEncode
	}
	if cap(out) <= 64<<10 {
		d.scratch = out[:0]
	} else {
		d.scratch = nil // a rare huge entry: do not keep its buffer
	}
	d.mu.Unlock()
	d.reportAppend(err, report)
	return err
}

func (d *diskSpill) reportAppend(err error, report bool) {
	if !report {
		return
	}
	if errors.Is(err, errSpillFull) {
		d.event(EventSpillFull, fmt.Errorf("%w (%d bytes in %s): further err entries go to ErrFallback", err, d.maxBytes, d.dir))
	} else {
		d.event(EventSpillFailed, err)
	}
}

// appendLocked writes one frame — header, entries, option map — and fsyncs it. report says
// whether the error is news worth an event (the first refusal of a full episode, or an I/O
// failure).
func (d *diskSpill) appendLocked(tag string, entries []byte, n int) (report bool, err error) {
	if d.closed {
		return false, errSpillClosed
	}
	d.hdr = append(d.hdr[:0], 0x93)
	d.hdr = msgp.AppendString(d.hdr, tag)
	d.hdr = msgp.AppendBytesHeader(d.hdr, uint32(len(entries)))
	d.opt, _ = forwardOptions{Size: n}.MarshalMsg(d.opt[:0]) // cannot fail
	size := int64(len(d.hdr) + len(entries) + len(d.opt))
	if size > spillFrameMax {
		return false, errSpillTooLarge
	}
	if d.bytes.Load()+size > d.maxBytes {
		first := !d.full
		d.full = true
		return first, errSpillFull
	}
	if d.w != nil && d.segs[len(d.segs)-1].size >= d.segBytes {
		d.closeWriterLocked()
	}
	if d.w == nil {
		if err := d.createLocked(); err != nil {
			return true, err
		}
	}
	last := &d.segs[len(d.segs)-1]
	bufs := net.Buffers{d.hdr, entries, d.opt}
	_, err = bufs.WriteTo(d.w)
	if err == nil && !d.noSync {
		err = d.w.Sync()
	}
	if err != nil {
		// Cut the partial frame off and leave the segment: the next append starts a fresh
		// one. If even the cut fails, readers stop at last.size and the bytes after it are
		// deleted with the segment.
		_ = d.w.Truncate(last.size)
		d.closeWriterLocked()
		return true, fmt.Errorf("fluentcore: spill: append to %s: %w", d.path(last.seq), err)
	}
	last.size += size
	d.bytes.Add(size)
	return false, nil
}

// createLocked starts a new segment and makes its name durable.
func (d *diskSpill) createLocked() error {
	seq := d.nextSeq
	d.nextSeq++ // used up even if the create fails, so a stray file cannot block every later append
	f, err := os.OpenFile(d.path(seq), os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("fluentcore: spill: %w", err)
	}
	if !d.noSync {
		if err := syncDir(d.dir); err != nil {
			_ = f.Close()
			_ = os.Remove(d.path(seq))
			return fmt.Errorf("fluentcore: spill: sync %s: %w", d.dir, err)
		}
	}
	d.w = f
	d.segs = append(d.segs, segment{seq: seq})
	return nil
}

func (d *diskSpill) closeWriterLocked() {
	if d.w != nil {
		_ = d.w.Close()
		d.w = nil
	}
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// empty reports whether no segment is left (delivered segments are deleted by head).
func (d *diskSpill) empty() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.segs) == 0
}

// head returns the oldest frame not yet delivered, or false when the spill is empty. It
// deletes segments whose frames were all delivered, and skips (and reports) the rest of a
// segment at its first invalid frame. The frame stays the head until pop. An error means
// the segment could not be opened or read (reported); the caller tries again later, since
// deleting spilled entries over what may be a passing condition (EMFILE) would lose them.
func (d *diskSpill) head() (spillFrame, bool, error) {
	for {
		if d.haveCur {
			return d.cur, true, nil
		}
		d.mu.Lock()
		if len(d.segs) == 0 {
			d.mu.Unlock()
			d.closeReader()
			d.rbuf = nil // replay is over: give the buffer back
			return spillFrame{}, false, nil
		}
		seg := d.segs[0]
		d.mu.Unlock()
		if d.rf == nil || d.rseq != seg.seq {
			d.closeReader()
			f, err := os.Open(d.path(seg.seq))
			if errors.Is(err, os.ErrNotExist) { // deleted by hand
				d.skipHead(seg, fmt.Errorf("fluentcore: spill: segment %s vanished: %d bytes lost", d.path(seg.seq), seg.size))
				continue
			}
			if err != nil {
				err = fmt.Errorf("fluentcore: spill: replay: %w", err)
				d.event(EventSpillFailed, err)
				return spillFrame{}, false, err
			}
			d.rf, d.rseq, d.roff = f, seg.seq, 0
		}
		if d.roff >= seg.size {
			d.retireHead(seg.seq)
			continue
		}
		fr, err := d.readFrame(seg.size)
		var rerr readError
		if errors.As(err, &rerr) {
			d.closeReader() // reopen and reread next time
			err = fmt.Errorf("fluentcore: spill: replay: %w", rerr.err)
			d.event(EventSpillFailed, err)
			return spillFrame{}, false, err
		}
		if err != nil {
			d.skipHead(seg, fmt.Errorf("fluentcore: spill: segment %s: %d bytes skipped at offset %d: %w",
				d.path(seg.seq), seg.size-d.roff, d.roff, err))
			continue
		}
		d.cur, d.haveCur = fr, true
		return fr, true, nil
	}
}

// readError is a failure to read a segment, as opposed to what was read being invalid.
type readError struct{ err error }

func (e readError) Error() string { return e.err.Error() }

// pop records that the head frame was delivered.
func (d *diskSpill) pop() {
	if d.haveCur {
		d.roff += d.cur.size
		d.haveCur = false
	}
}

// retireHead deletes the head segment once every frame in it is delivered, unless frames
// were appended to it meanwhile.
func (d *diskSpill) retireHead(seq uint64) {
	d.mu.Lock()
	if len(d.segs) == 0 || d.segs[0].seq != seq || d.segs[0].size > d.roff {
		d.mu.Unlock()
		return
	}
	d.removeHeadLocked()
	d.mu.Unlock()
	d.closeReader()
	if err := os.Remove(d.path(seq)); err != nil && !errors.Is(err, os.ErrNotExist) {
		d.event(EventSpillFailed, fmt.Errorf("fluentcore: spill: delete delivered segment (its frames will be sent again by the next process): %w", err))
	}
}

// skipHead drops the rest of a damaged head segment and reports it.
func (d *diskSpill) skipHead(seg segment, why error) {
	d.mu.Lock()
	if len(d.segs) > 0 && d.segs[0].seq == seg.seq {
		d.removeHeadLocked()
	}
	d.mu.Unlock()
	d.closeReader()
	_ = os.Remove(d.path(seg.seq))
	d.corrupt.Add(1)
	d.event(EventSpillCorrupt, why)
}

func (d *diskSpill) removeHeadLocked() {
	if len(d.segs) == 1 {
		d.closeWriterLocked() // the head is also the segment being appended to
	}
	d.bytes.Add(-d.segs[0].size)
	d.segs = slices.Delete(d.segs, 0, 1)
	d.full = false
}

func (d *diskSpill) closeReader() {
	if d.rf != nil {
		_ = d.rf.Close()
		d.rf = nil
	}
	d.haveCur = false
}

// readAt reads up to n bytes of the head segment at the read offset into rbuf, never past
// limit; short is true when that is less than n.
func (d *diskSpill) readAt(n, limit int64) (b []byte, short bool, err error) {
	short = d.roff+n > limit
	if short {
		n = limit - d.roff
	}
	if int64(cap(d.rbuf)) < n {
		d.rbuf = make([]byte, max(n, 64<<10))
	}
	b = d.rbuf[:n]
	if _, err := d.rf.ReadAt(b, d.roff); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, true, errors.New("file shorter than expected")
		}
		return nil, true, readError{err}
	}
	return b, short, nil
}

var errTruncated = errors.New("frame truncated")

// readFrame reads and checks the frame at the read offset of the head segment, which ends
// at limit. Anything a strict receiver (fluentd, fluent-bit, forwardtest) would reject is
// an error, so a damaged segment can never wedge the sender on a frame that is refused.
func (d *diskSpill) readFrame(limit int64) (spillFrame, error) {
	// [ fixarray 3 | str header (1–5 bytes)
	b, short, err := d.readAt(6, limit)
	if err != nil {
		return spillFrame{}, err
	}
	if b[0] != 0x93 {
		return spillFrame{}, fmt.Errorf("frame starts with 0x%02x, not a 3-element array", b[0])
	}
	tagLen, tagHdr, err := strHeader(b[1:])
	if err != nil {
		return spillFrame{}, shortOr(err, short)
	}
	if tagLen > spillFrameMax {
		return spillFrame{}, fmt.Errorf("tag of %d bytes", tagLen)
	}
	// ... tag | bin header (1–5 bytes)
	tagEnd := int64(1+tagHdr) + tagLen
	if b, short, err = d.readAt(tagEnd+5, limit); err != nil {
		return spillFrame{}, err
	}
	if int64(len(b)) < tagEnd {
		return spillFrame{}, errTruncated
	}
	entLen, rest, err := msgp.ReadBytesHeader(b[tagEnd:])
	if err != nil {
		return spillFrame{}, shortOr(err, short)
	}
	head := int64(len(b) - len(rest))
	if head+int64(entLen) > spillFrameMax {
		return spillFrame{}, fmt.Errorf("frame of %d bytes", head+int64(entLen))
	}
	// ... entries | option map ]
	entEnd := head + int64(entLen)
	if b, short, err = d.readAt(entEnd+spillOptionsMax, limit); err != nil {
		return spillFrame{}, err
	}
	if int64(len(b)) < entEnd {
		return spillFrame{}, errTruncated
	}
	n, rest, err := readSpillOptions(b[entEnd:])
	if err != nil {
		return spillFrame{}, shortOr(err, short)
	}
	entries := b[head:entEnd]
	if err := checkEntries(entries, n); err != nil {
		return spillFrame{}, err
	}
	fr := spillFrame{tag: d.cur.tag, entries: entries, n: n, size: int64(len(b) - len(rest))}
	if tag := b[1+tagHdr : tagEnd]; fr.tag != string(tag) { // no allocation when the tag repeats
		fr.tag = string(tag)
	}
	return fr, nil
}

// shortOr turns a short read into errTruncated: the segment ended inside the frame.
func shortOr(err error, short bool) error {
	if errors.Is(err, msgp.ErrShortBytes) {
		if short {
			return errTruncated
		}
		return errors.New("frame header too long")
	}
	return err
}

// strHeader parses a msgpack str header: the string's length and the header's.
func strHeader(b []byte) (n int64, hdr int, err error) {
	if len(b) == 0 {
		return 0, 0, msgp.ErrShortBytes
	}
	lead := b[0]
	var size int
	switch {
	case lead&0xe0 == 0xa0:
		return int64(lead & 0x1f), 1, nil
	case lead == 0xd9:
		size = 1
	case lead == 0xda:
		size = 2
	case lead == 0xdb:
		size = 4
	default:
		return 0, 0, fmt.Errorf("tag starts with 0x%02x, not a str", lead)
	}
	if len(b) < 1+size {
		return 0, 0, msgp.ErrShortBytes
	}
	for _, c := range b[1 : 1+size] {
		n = n<<8 | int64(c)
	}
	return n, 1 + size, nil
}

// readSpillOptions reads a frame's option map: "size" is required; "chunk" and
// "compressed" are refused (a spill frame never has them); other keys are skipped.
func readSpillOptions(b []byte) (size int, rest []byte, err error) {
	if len(b) > 0 && msgp.NextType(b) != msgp.MapType {
		return 0, nil, fmt.Errorf("options are msgpack %s, not a map", msgp.NextType(b))
	}
	sz, b, err := msgp.ReadMapHeaderBytes(b)
	if err != nil {
		return 0, nil, err
	}
	size = -1
	for range sz {
		var key []byte
		if key, b, err = msgp.ReadStringZC(b); err != nil {
			return 0, nil, err
		}
		switch string(key) {
		case "size":
			if size, b, err = msgp.ReadIntBytes(b); err != nil {
				return 0, nil, err
			}
		case "chunk", "compressed":
			return 0, nil, fmt.Errorf("option %q in a spill frame", key)
		default:
			if b, err = msgp.Skip(b); err != nil {
				return 0, nil, err
			}
		}
	}
	if size < 0 {
		return 0, nil, errors.New(`option "size" missing`)
	}
	return size, b, nil
}

// checkEntries checks that b is exactly n Forward entries: [EventTime, record], where the
// time is ext type 0 of 8 bytes and the record a map whose keys are str at every level and
// whose values hold no extension.
func checkEntries(b []byte, n int) error {
	count := 0
	for len(b) > 0 {
		sz, rest, err := msgp.ReadArrayHeaderBytes(b)
		if err != nil || sz != 2 {
			return fmt.Errorf("entry %d is not a 2-element array", count)
		}
		var et eventTime
		if b, err = msgp.ReadExtensionBytes(rest, &et); err != nil {
			return fmt.Errorf("entry %d: time: %w", count, err)
		}
		if msgp.NextType(b) != msgp.MapType {
			return fmt.Errorf("entry %d: record is not a map", count)
		}
		if b, err = checkValue(b, 0); err != nil {
			return fmt.Errorf("entry %d: record: %w", count, err)
		}
		count++
	}
	if count != n {
		return fmt.Errorf("%d entries, option size says %d", count, n)
	}
	return nil
}

func checkValue(b []byte, depth int) ([]byte, error) {
	if depth > spillDepthMax {
		return nil, errors.New("nested too deep")
	}
	var err error
	switch t := msgp.NextType(b); t {
	case msgp.MapType:
		var sz uint32
		if sz, b, err = msgp.ReadMapHeaderBytes(b); err != nil {
			return nil, err
		}
		for range sz {
			if _, b, err = msgp.ReadStringZC(b); err != nil {
				return nil, errors.New("map key is not a str")
			}
			if b, err = checkValue(b, depth+1); err != nil {
				return nil, err
			}
		}
		return b, nil
	case msgp.ArrayType:
		var sz uint32
		if sz, b, err = msgp.ReadArrayHeaderBytes(b); err != nil {
			return nil, err
		}
		for range sz {
			if b, err = checkValue(b, depth+1); err != nil {
				return nil, err
			}
		}
		return b, nil
	case msgp.StrType, msgp.BinType, msgp.IntType, msgp.UintType, msgp.Float32Type,
		msgp.Float64Type, msgp.BoolType, msgp.NilType:
		return msgp.Skip(b)
	default:
		return nil, fmt.Errorf("value of msgpack type %s", t)
	}
}

// close releases the segments and the lock; later appends return errSpillClosed. Only
// called once the err sender has stopped.
func (d *diskSpill) close() {
	d.mu.Lock()
	d.closed = true
	d.closeWriterLocked()
	d.mu.Unlock()
	d.closeReader()
	d.rbuf = nil
	unlockSpillDir(d.lock)
}
