package wire

import (
	"bytes"
	"compress/gzip"
	"io"
	"testing"

	"github.com/fluentcore/fluentcore/internal/testkit"
	"github.com/tinylib/msgp/msgp"
)

// splitFrame decodes [tag, entries, options] and returns the entries' raw msgpack type byte,
// their bytes and the options.
func splitFrame(t *testing.T, frame []byte) (tag string, lead byte, payload []byte, opts Options) {
	t.Helper()
	n, b, err := msgp.ReadArrayHeaderBytes(frame)
	if err != nil || n != 3 {
		t.Fatalf("frame header: %d elements, %v", n, err)
	}
	if tag, b, err = msgp.ReadStringBytes(b); err != nil {
		t.Fatal(err)
	}
	lead = b[0]
	if payload, b, err = msgp.ReadBytesZC(b); err != nil {
		t.Fatalf("entries are not bin: %v", err)
	}
	if b, err = opts.UnmarshalMsg(b); err != nil || len(b) != 0 {
		t.Fatalf("options: %v, %d bytes left", err, len(b))
	}
	return tag, lead, payload, opts
}

func TestFramePackedForwardIsBin(t *testing.T) {
	fr := NewFramer("")
	entries := testkit.Entries(3, "hello")
	h, p, o := fr.Frame("shop.info", entries, 3, "")
	tag, lead, payload, opts := splitFrame(t, bytes.Join([][]byte{h, p, o}, nil))
	if tag != "shop.info" || !bytes.Equal(payload, entries) || opts != (Options{Size: 3}) {
		t.Fatalf("tag %q, options %+v, payload equal: %v", tag, opts, bytes.Equal(payload, entries))
	}
	if lead < 0xc4 || lead > 0xc6 {
		t.Fatalf("entries start with 0x%02x, want bin8/16/32", lead)
	}
}

func TestFrameGzipIsOneMemberAndReusesItsBuffers(t *testing.T) {
	fr := NewFramer("gzip")
	entries := testkit.Entries(500, "compressible compressible compressible")
	h, p, o := fr.Frame("t", entries, 500, "tok")
	_, _, payload, opts := splitFrame(t, bytes.Join([][]byte{h, p, o}, nil))
	if opts != (Options{Size: 500, Chunk: "tok", Compressed: "gzip"}) {
		t.Fatalf("options %+v", opts)
	}
	br := bytes.NewReader(payload)
	zr, err := gzip.NewReader(br)
	if err != nil {
		t.Fatal(err)
	}
	zr.Multistream(false) // read exactly one member
	plain, err := io.ReadAll(zr)
	if err != nil || !bytes.Equal(plain, entries) {
		t.Fatalf("first member: %d bytes, %v; want the %d entry bytes", len(plain), err, len(entries))
	}
	if br.Len() != 0 {
		t.Fatalf("%d bytes after the first gzip member", br.Len())
	}
	if len(payload) >= len(entries) {
		t.Fatalf("compressed %d bytes into %d", len(entries), len(payload))
	}

	// After one frame, framing and compressing a batch of the same size allocates nothing.
	allocs := testkit.SteadyAllocs(20, func() {
		_, _, _ = fr.Frame("t", entries, 500, "tok")
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per gzip frame after warm-up, want 0", allocs)
	}
}

// BenchmarkFrame measures framing one 256 KiB batch, plain and gzip (the sender's cost per
// batch; compression ratio reported as compressed/plain).
func BenchmarkFrame(b *testing.B) {
	entries := testkit.Entries(2600, "GET /orders/12345 200 user=ann latency=12ms")
	for _, compression := range []string{"", "gzip"} {
		name := "packed"
		if compression != "" {
			name = compression
		}
		b.Run(name, func(b *testing.B) {
			fr := NewFramer(compression)
			b.SetBytes(int64(len(entries)))
			b.ReportAllocs()
			var n int
			for b.Loop() {
				_, p, _ := fr.Frame("shop.info", entries, 2600, "")
				n = len(p)
			}
			b.ReportMetric(float64(n)/float64(len(entries)), "ratio")
		})
	}
}
