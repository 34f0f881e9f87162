package fluentcore

import (
	"compress/gzip"

	"github.com/tinylib/msgp/msgp"
)

// maxFrameBytes is fluent-bit's in_forward buffer_max_size: a request (or a decompressed
// payload) larger than this makes it close the connection. Batches are at most
// maxBatchLimit (6,000,000) bytes, and gzip adds at most 5 bytes per 64 KiB stored block
// plus 18 bytes of header and trailer to incompressible input, so every frame fits; a test
// sends the worst case.
const maxFrameBytes = 6144000

// compressGzip is the one Config.Compression value besides "".
const compressGzip = "gzip"

// framer builds PackedForward frames — [tag, bin(entries), {"size", "chunk"?}] — or, with
// gzip, CompressedPackedForward frames whose bin is one gzip member and whose options say
// "compressed":"gzip". Its buffers are owned and reused from frame to frame, so once they
// have grown to the largest batch, framing allocates nothing. Not safe for concurrent use:
// each forwarder owns one.
type framer struct {
	hdr  []byte // [tag, bin header
	opt  []byte // the option map
	gzip bool
	zw   *gzip.Writer // created on first use, then Reset for every frame
	zbuf appendBuffer // the compressed entries
}

func newFramer(compression string) *framer {
	return &framer{hdr: make([]byte, 0, 64), opt: make([]byte, 0, 96), gzip: compression == compressGzip}
}

// appendBuffer is an io.Writer that appends to a slice it keeps, so its capacity is reused.
type appendBuffer struct{ b []byte }

func (a *appendBuffer) Write(p []byte) (int, error) {
	a.b = append(a.b, p...)
	return len(p), nil
}

// frame returns the three parts of the frame for n entries: header, payload (entries
// itself, or their gzip form) and option map. They stay valid until the next call.
func (f *framer) frame(tag string, entries []byte, n int, chunk string) (hdr, payload, opt []byte) {
	payload = entries
	compressed := ""
	if f.gzip {
		payload, compressed = f.compress(entries), compressGzip
	}
	f.hdr = append(f.hdr[:0], 0x93)
	f.hdr = msgp.AppendString(f.hdr, tag)
	f.hdr = msgp.AppendBytesHeader(f.hdr, uint32(len(payload)))
	f.opt, _ = forwardOptions{Size: n, Chunk: chunk, Compressed: compressed}.MarshalMsg(f.opt[:0]) // cannot fail
	return f.hdr, payload, f.opt
}

// compress returns entries as one gzip member. BestSpeed: the sender is one goroutine per
// stream, and log batches compress well even at the fastest level.
func (f *framer) compress(entries []byte) []byte {
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
