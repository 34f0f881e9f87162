package wire

import (
	"compress/gzip"

	"github.com/tinylib/msgp/msgp"
)

// MaxFrameBytes is fluent-bit's in_forward buffer_max_size: a request (or a decompressed
// payload) larger than this makes it close the connection. The root package keeps batches
// at most 6,000,000 bytes, and gzip adds at most 5 bytes per 64 KiB stored block plus 18
// bytes of header and trailer to incompressible input, so every frame fits; a test sends
// the worst case.
const MaxFrameBytes = 6144000

// Gzip is the one compression besides none.
const Gzip = "gzip"

// AppendFrameHeader appends the head of a PackedForward frame, [tag, bin header for
// payloadLen bytes. The payload and the option map (AppendOptions) follow it. It is the one
// place a frame header is built: the sender and the spill write the same bytes.
func AppendFrameHeader(dst []byte, tag string, payloadLen int) []byte {
	dst = append(dst, Array3)
	dst = msgp.AppendString(dst, tag)
	return msgp.AppendBytesHeader(dst, uint32(payloadLen))
}

// AppendOptions appends the option map that ends a frame of n entries: {"size": n}, plus
// "chunk" when an ack is asked for and "compressed" when the payload is compressed.
func AppendOptions(dst []byte, n int, chunk, compressed string) []byte {
	dst, _ = Options{Size: n, Chunk: chunk, Compressed: compressed}.MarshalMsg(dst) // cannot fail
	return dst
}

// Framer builds PackedForward frames — [tag, bin(entries), {"size", "chunk"?}] — or, with
// gzip, CompressedPackedForward frames whose bin is one gzip member and whose options say
// "compressed":"gzip". Its buffers are owned and reused from frame to frame, so once they
// have grown to the largest batch, framing allocates nothing. Not safe for concurrent use:
// each connection's sender owns one.
type Framer struct {
	hdr  []byte // [tag, bin header
	opt  []byte // the option map
	gzip bool
	zw   *gzip.Writer // created on first use, then Reset for every frame
	zbuf appendBuffer // the compressed entries
}

// NewFramer returns a Framer; compression is "" or Gzip (anything else means "").
func NewFramer(compression string) *Framer {
	return &Framer{hdr: make([]byte, 0, 64), opt: make([]byte, 0, 96), gzip: compression == Gzip}
}

// appendBuffer is an io.Writer that appends to a slice it keeps, so its capacity is reused.
type appendBuffer struct{ b []byte }

func (a *appendBuffer) Write(p []byte) (int, error) {
	a.b = append(a.b, p...)
	return len(p), nil
}

// Frame returns the three parts of the frame for n entries: header, payload (entries
// itself, or their gzip form) and option map. They stay valid until the next call.
func (f *Framer) Frame(tag string, entries []byte, n int, chunk string) (hdr, payload, opt []byte) {
	payload = entries
	compressed := ""
	if f.gzip {
		payload, compressed = f.compress(entries), Gzip
	}
	f.hdr = AppendFrameHeader(f.hdr[:0], tag, len(payload))
	f.opt = AppendOptions(f.opt[:0], n, chunk, compressed)
	return f.hdr, payload, f.opt
}

// compress returns entries as one gzip member. BestSpeed: one goroutine sends a stream, and
// log batches compress well even at the fastest level.
func (f *Framer) compress(entries []byte) []byte {
	f.zbuf.b = f.zbuf.b[:0]
	if f.zw == nil {
		f.zw, _ = gzip.NewWriterLevel(&f.zbuf, gzip.BestSpeed) // a valid level: no error
	} else {
		f.zw.Reset(&f.zbuf)
	}
	// Writes to an appendBuffer cannot fail, so neither can the gzip writer.
	_, _ = f.zw.Write(entries)
	_ = f.zw.Close()
	return f.zbuf.b
}
