package fluentcore

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"io"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore/forwardtest"
	"github.com/tinylib/msgp/msgp"
)

// testEntries returns n encoded entries [EventTime, {"i": i, "msg": msg}].
func testEntries(n int, msg string) []byte {
	var b []byte
	for i := range n {
		b = msgp.AppendArrayHeader(b, 2)
		b = appendEventTime(b, 1_700_000_000, uint32(i))
		b = msgp.AppendMapHeader(b, 2)
		b = msgp.AppendString(b, "i")
		b = msgp.AppendInt(b, i)
		b = msgp.AppendString(b, "msg")
		b = msgp.AppendString(b, msg)
	}
	return b
}

// splitFrame decodes [tag, entries, options] and returns the entries' raw msgpack type byte,
// their bytes and the options.
func splitFrame(t *testing.T, frame []byte) (tag string, lead byte, payload []byte, opts forwardOptions) {
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
	fr := newFramer("")
	entries := testEntries(3, "hello")
	h, p, o := fr.frame("shop.info", entries, 3, "")
	tag, lead, payload, opts := splitFrame(t, bytes.Join([][]byte{h, p, o}, nil))
	if tag != "shop.info" || !bytes.Equal(payload, entries) || opts != (forwardOptions{Size: 3}) {
		t.Fatalf("tag %q, options %+v, payload equal: %v", tag, opts, bytes.Equal(payload, entries))
	}
	if lead < 0xc4 || lead > 0xc6 {
		t.Fatalf("entries start with 0x%02x, want bin8/16/32", lead)
	}
}

func TestFrameGzipIsOneMemberAndReusesItsBuffers(t *testing.T) {
	fr := newFramer("gzip")
	entries := testEntries(500, "compressible compressible compressible")
	h, p, o := fr.frame("t", entries, 500, "tok")
	_, _, payload, opts := splitFrame(t, bytes.Join([][]byte{h, p, o}, nil))
	if opts != (forwardOptions{Size: 500, Chunk: "tok", Compressed: "gzip"}) {
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
	allocs := steadyAllocs(20, func() {
		_, _, _ = fr.frame("t", entries, 500, "tok")
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per gzip frame after warm-up, want 0", allocs)
	}
}

// The largest batch, incompressible, still makes a frame fluent-bit accepts: forwardtest
// enforces its 6144000-byte limit on the frame and on the decompressed entries.
func TestGzipFrameOfTheLargestIncompressibleBatchFits(t *testing.T) {
	r := forwardtest.NewReceiver(t, forwardtest.CountOnly())
	s := resolve(Config{Addr: r.Addr(), Compression: "gzip", MaxBatchBytes: maxBatchLimit, RequireAck: true})
	f := newForwarder(s)
	defer f.close()

	noise := make([]byte, maxBatchLimit-64)
	_, _ = rand.Read(noise)
	var entries []byte
	entries = msgp.AppendArrayHeader(entries, 2)
	entries = appendEventTime(entries, 1_700_000_000, 0)
	entries = msgp.AppendMapHeader(entries, 1)
	entries = msgp.AppendString(entries, "noise")
	entries = msgp.AppendBytes(entries, noise)
	if len(entries) > maxBatchLimit {
		t.Fatalf("test batch is %d bytes, over the limit", len(entries))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	size, _, err := f.send(ctx, "big", entries, 1)
	if err != nil {
		t.Fatal(err)
	}
	if size <= len(entries) || size > maxFrameBytes {
		t.Fatalf("frame of %d bytes (entries %d, limit %d)", size, len(entries), maxFrameBytes)
	}
	if err := r.WaitFor(func(st forwardtest.Stats) bool { return st.Acks == 1 }, 10*time.Second); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkFrame measures framing one 256 KiB batch, plain and gzip (the sender's cost per
// batch; compression ratio reported as compressed/plain).
func BenchmarkFrame(b *testing.B) {
	entries := testEntries(2600, "GET /orders/12345 200 user=ann latency=12ms")
	for _, compression := range []string{"", "gzip"} {
		name := "packed"
		if compression != "" {
			name = compression
		}
		b.Run(name, func(b *testing.B) {
			fr := newFramer(compression)
			b.SetBytes(int64(len(entries)))
			b.ReportAllocs()
			var n int
			for b.Loop() {
				_, p, _ := fr.frame("shop.info", entries, 2600, "")
				n = len(p)
			}
			b.ReportMetric(float64(n)/float64(len(entries)), "ratio")
		})
	}
}
