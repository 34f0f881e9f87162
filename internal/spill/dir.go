package spill

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

	"github.com/fluentcore/fluentcore/internal/wire"
	"github.com/tinylib/msgp/msgp"
)

// SegmentSuffix ends the name of every segment file.
const SegmentSuffix = ".fwd"

const (
	lockName = "LOCK"
	// spillSegmentMax is the largest segment size; smaller Spill.MaxBytes get smaller segments
	// (a sixteenth of it), so deleting a delivered segment frees a useful share.
	spillSegmentMax = 4 << 20
	spillSegmentMin = 4 << 10
	// optionsMax bounds the option map of a frame read back; ours is {"size": n}.
	optionsMax = 128
)

var (
	// ErrFull means the segments hold Spill.MaxBytes; the frame was not written.
	ErrFull = errors.New("fluentcore: spill: Spill.MaxBytes reached")
	// ErrClosed means the spill was closed (its lock released); the caller uses Spill.Fallback.
	ErrClosed = errors.New("fluentcore: spill: closed")
	// ErrTooLarge means a frame larger than any receiver accepts (wire.MaxFrameBytes); the
	// caller uses Spill.Fallback.
	ErrTooLarge = errors.New("fluentcore: spill: frame larger than a receiver accepts")
)

// EventKind says what a Reporter is told of.
type EventKind uint8

const (
	// Full reports an append refused because the segments hold maxBytes; once per episode.
	Full EventKind = iota
	// Corrupt reports that a damaged segment tail was skipped during replay.
	Corrupt
	// Failed reports that writing, reading or deleting a segment failed.
	Failed
)

// Reporter is told of what the spill could not do. It is called on the goroutine that met
// the condition, never with the spill's lock held; it must not block.
type Reporter func(kind EventKind, err error)

// segment is one spill file.
type segment struct {
	seq  uint64
	size int64 // bytes of complete frames (for a segment found at start: its file size)
}

// Frame is one frame read back from a segment, valid until the next Head or Pop.
type Frame struct {
	Tag     string
	Entries []byte // concatenated entries, pointing into the spill's read buffer
	N       int    // entries
	size    int64  // bytes the frame takes in its segment
}

// Dir is the segment store of one core's err stream. Append is safe for concurrent use
// and serialised by mu; the read side (Head, Pop) belongs to one goroutine, the err sender.
type Dir struct {
	dir      string
	maxBytes int64
	segBytes int64
	noSync   bool // benchmarks only: measure what fsync costs
	report   Reporter
	lock     *os.File

	mu      sync.Mutex
	closed  bool
	segs    []segment // oldest first; while w != nil the last one is w's
	w       *os.File
	nextSeq uint64
	full    bool   // an append was refused since space was last freed: report once per episode
	hdr     []byte // frame header scratch
	opt     []byte // option map scratch

	bytes   atomic.Int64  // bytes in all segments; written under mu, read anywhere
	corrupt atomic.Uint64 // segments whose tail was skipped

	// Read side: the err sender goroutine only.
	rf      *os.File
	rseq    uint64
	roff    int64
	rbuf    []byte
	cur     Frame
	haveCur bool
}

// Open creates dir if needed (mode 0700), takes its lock and lists the segments a previous
// process left. It does not read them: frames are checked as they are replayed. maxBytes
// bounds the segments; batchBytes is the largest batch appended; report may be nil. The
// error says why the directory cannot be used (not creatable, or locked by another core).
func Open(dir string, maxBytes int64, batchBytes int, report Reporter) (*Dir, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("fluentcore: Spill.Dir: %w", err)
	}
	lock, err := lockDir(filepath.Join(dir, lockName))
	if err != nil {
		return nil, err
	}
	d := &Dir{
		dir:      dir,
		maxBytes: maxBytes,
		segBytes: min(spillSegmentMax, max(maxBytes/16, spillSegmentMin, int64(batchBytes))),
		report:   report,
		lock:     lock,
		nextSeq:  1,
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		_ = lock.Close()
		return nil, fmt.Errorf("fluentcore: Spill.Dir: %w", err)
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

// SegmentName is the file name of segment seq: zero-padded, so name order is replay order.
func SegmentName(seq uint64) string { return fmt.Sprintf("%020d%s", seq, SegmentSuffix) }

func parseSegmentName(name string) (uint64, bool) {
	base, ok := strings.CutSuffix(name, SegmentSuffix)
	if !ok || len(base) != 20 {
		return 0, false
	}
	seq, err := strconv.ParseUint(base, 10, 64)
	return seq, err == nil
}

func (d *Dir) path(seq uint64) string { return filepath.Join(d.dir, SegmentName(seq)) }

// event reports a spill event; never called with mu held.
func (d *Dir) event(kind EventKind, err error) {
	if d.report != nil {
		d.report(kind, err)
	}
}

// Append writes n encoded entries as one frame and fsyncs it. It returns ErrFull,
// ErrClosed, ErrTooLarge, or the I/O error (reported as Failed) if the frame was not
// written.
func (d *Dir) Append(tag string, entries []byte, n int) error {
	d.mu.Lock()
	report, err := d.appendLocked(tag, entries, n)
	d.mu.Unlock()
	if report {
		if errors.Is(err, ErrFull) {
			d.event(Full, fmt.Errorf("%w (%d bytes in %s): further err entries go to Spill.Fallback", err, d.maxBytes, d.dir))
		} else {
			d.event(Failed, err)
		}
	}
	return err
}

// appendLocked writes one frame — header, entries, option map — and fsyncs it. report says
// whether the error is news worth an event (the first refusal of a full episode, or an I/O
// failure).
func (d *Dir) appendLocked(tag string, entries []byte, n int) (report bool, err error) {
	if d.closed {
		return false, ErrClosed
	}
	d.hdr = wire.AppendFrameHeader(d.hdr[:0], tag, len(entries))
	d.opt = wire.AppendOptions(d.opt[:0], n, "", "")
	size := int64(len(d.hdr) + len(entries) + len(d.opt))
	if size > wire.MaxFrameBytes {
		return false, ErrTooLarge
	}
	if d.bytes.Load()+size > d.maxBytes {
		first := !d.full
		d.full = true
		return first, ErrFull
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
func (d *Dir) createLocked() error {
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

func (d *Dir) closeWriterLocked() {
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

// Empty reports whether no segment is left (delivered segments are deleted by Head).
func (d *Dir) Empty() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.segs) == 0
}

// Head returns the oldest frame not yet delivered, or false when the spill is empty. It
// deletes segments whose frames were all delivered, and skips (and reports) the rest of a
// segment at its first invalid frame. The frame stays the head until Pop. An error means
// the segment could not be opened or read (reported); the caller tries again later, since
// deleting spilled entries over what may be a passing condition (EMFILE) would lose them.
func (d *Dir) Head() (Frame, bool, error) {
	for {
		if d.haveCur {
			return d.cur, true, nil
		}
		d.mu.Lock()
		if len(d.segs) == 0 {
			d.mu.Unlock()
			d.closeReader()
			d.rbuf = nil // replay is over: give the buffer back
			return Frame{}, false, nil
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
				d.event(Failed, err)
				return Frame{}, false, err
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
			d.event(Failed, err)
			return Frame{}, false, err
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

// Pop records that the head frame was delivered.
func (d *Dir) Pop() {
	if d.haveCur {
		d.roff += d.cur.size
		d.haveCur = false
	}
}

// retireHead deletes the head segment once every frame in it is delivered, unless frames
// were appended to it meanwhile.
func (d *Dir) retireHead(seq uint64) {
	d.mu.Lock()
	if len(d.segs) == 0 || d.segs[0].seq != seq || d.segs[0].size > d.roff {
		d.mu.Unlock()
		return
	}
	d.removeHeadLocked()
	d.mu.Unlock()
	d.closeReader()
	if err := os.Remove(d.path(seq)); err != nil && !errors.Is(err, os.ErrNotExist) {
		d.event(Failed, fmt.Errorf("fluentcore: spill: delete delivered segment (its frames will be sent again by the next process): %w", err))
	}
}

// skipHead drops the rest of a damaged head segment and reports it.
func (d *Dir) skipHead(seg segment, why error) {
	d.mu.Lock()
	if len(d.segs) > 0 && d.segs[0].seq == seg.seq {
		d.removeHeadLocked()
	}
	d.mu.Unlock()
	d.closeReader()
	_ = os.Remove(d.path(seg.seq))
	d.corrupt.Add(1)
	d.event(Corrupt, why)
}

func (d *Dir) removeHeadLocked() {
	if len(d.segs) == 1 {
		d.closeWriterLocked() // the head is also the segment being appended to
	}
	d.bytes.Add(-d.segs[0].size)
	d.segs = slices.Delete(d.segs, 0, 1)
	d.full = false
}

func (d *Dir) closeReader() {
	if d.rf != nil {
		_ = d.rf.Close()
		d.rf = nil
	}
	d.haveCur = false
}

// readAt reads up to n bytes of the head segment at the read offset into rbuf, never past
// limit; short is true when that is less than n.
func (d *Dir) readAt(n, limit int64) (b []byte, short bool, err error) {
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
func (d *Dir) readFrame(limit int64) (Frame, error) {
	// [ fixarray 3 | str header (1–5 bytes)
	b, short, err := d.readAt(6, limit)
	if err != nil {
		return Frame{}, err
	}
	if b[0] != wire.Array3 {
		return Frame{}, fmt.Errorf("frame starts with 0x%02x, not a 3-element array", b[0])
	}
	tagLen, tagHdr, err := wire.ReadStrHeader(b[1:])
	if err != nil {
		return Frame{}, shortOr(fmt.Errorf("tag %w", err), short)
	}
	if tagLen > wire.MaxFrameBytes {
		return Frame{}, fmt.Errorf("tag of %d bytes", tagLen)
	}
	// ... tag | bin header (1–5 bytes)
	tagEnd := int64(1+tagHdr) + tagLen
	if b, short, err = d.readAt(tagEnd+5, limit); err != nil {
		return Frame{}, err
	}
	if int64(len(b)) < tagEnd {
		return Frame{}, errTruncated
	}
	entLen, rest, err := msgp.ReadBytesHeader(b[tagEnd:])
	if err != nil {
		return Frame{}, shortOr(err, short)
	}
	head := int64(len(b) - len(rest))
	if head+int64(entLen) > wire.MaxFrameBytes {
		return Frame{}, fmt.Errorf("frame of %d bytes", head+int64(entLen))
	}
	// ... entries | option map ]
	entEnd := head + int64(entLen)
	if b, short, err = d.readAt(entEnd+optionsMax, limit); err != nil {
		return Frame{}, err
	}
	if int64(len(b)) < entEnd {
		return Frame{}, errTruncated
	}
	n, rest, err := readOptions(b[entEnd:])
	if err != nil {
		return Frame{}, shortOr(err, short)
	}
	entries := b[head:entEnd]
	if err := wire.CheckEntries(entries, n); err != nil {
		return Frame{}, err
	}
	fr := Frame{Tag: d.cur.Tag, Entries: entries, N: n, size: int64(len(b) - len(rest))}
	if tag := b[1+tagHdr : tagEnd]; fr.Tag != string(tag) { // no allocation when the tag repeats
		fr.Tag = string(tag)
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

// readOptions reads a frame's option map: "size" is required; "chunk" and
// "compressed" are refused (a spill frame never has them); other keys are skipped.
func readOptions(b []byte) (size int, rest []byte, err error) {
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

// Close releases the segments and the lock; later appends return ErrClosed. Call it once
// the goroutine reading the spill has stopped.
func (d *Dir) Close() {
	d.mu.Lock()
	d.closed = true
	d.closeWriterLocked()
	d.mu.Unlock()
	d.closeReader()
	d.rbuf = nil
	_ = d.lock.Close() // drops the flock
}

// Bytes returns the size of all segments. Safe for concurrent use.
func (d *Dir) Bytes() int64 { return d.bytes.Load() }

// CorruptSegments counts the segments whose damaged tail was skipped. Safe for concurrent use.
func (d *Dir) CorruptSegments() uint64 { return d.corrupt.Load() }
