package forwardtest

import (
	"io"
	"testing"
	"time"
)

const benchEntries = 1000

// benchFrame is a PackedForward request of benchEntries entries, each an EventTime and a
// 10-field record shaped like a zap log entry.
func benchFrame() []byte {
	var payload []byte
	for i := range benchEntries {
		payload = append(payload, entry(et(1700000000+uint32(i), uint32(i)*1000), m(
			"level", "info",
			"logger", "shop.orders",
			"caller", "orders/handler.go:142",
			"msg", "order placed",
			"id", "ord-7f3a9c21",
			"items", i%7,
			"amount", 129.95,
			"paid", true,
			"user", "u-20931",
			"path", "/api/v1/orders",
		))...)
	}
	return req("shop", bin(payload), m("size", benchEntries))
}

// repeatReader yields the same bytes forever.
type repeatReader struct {
	p   []byte
	off int
}

func (r *repeatReader) Read(b []byte) (int, error) {
	n := 0
	for n < len(b) {
		c := copy(b[n:], r.p[r.off:])
		n += c
		r.off = (r.off + c) % len(r.p)
	}
	return n, nil
}

// BenchmarkCountOnly measures the count-only receiver on PackedForward requests of 1000
// entries with 10-field records. "decode" is the receiver's own cost per entry (framing,
// checking and counting, from an in-memory stream); "tcp" is end to end over loopback,
// including the client's writes.
func BenchmarkCountOnly(b *testing.B) {
	frame := benchFrame()
	perEntry := func(b *testing.B) {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchEntries), "ns/entry")
	}

	b.Run("decode", func(b *testing.B) {
		r, err := Start(CountOnly())
		if err != nil {
			b.Fatal(err)
		}
		defer r.Close()
		c := r.newConn(struct {
			io.Reader
			io.Writer
		}{&repeatReader{p: frame}, io.Discard}, 1, "bench")
		b.SetBytes(int64(len(frame)))
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			if !c.step() {
				b.Fatalf("step failed: %v", r.Violations())
			}
		}
		b.StopTimer()
		perEntry(b)
		if got := r.Len(); got != b.N*benchEntries {
			b.Fatalf("counted %d entries, want %d", got, b.N*benchEntries)
		}
	})

	b.Run("tcp", func(b *testing.B) {
		r := NewReceiver(b, CountOnly())
		c := dial(b, r.Addr())
		b.SetBytes(int64(len(frame)))
		b.ResetTimer()
		for range b.N {
			if _, err := c.Write(frame); err != nil {
				b.Fatal(err)
			}
		}
		if err := r.WaitFor(func(s Stats) bool { return s.Entries == int64(b.N*benchEntries) }, time.Minute); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		perEntry(b)
	})
}
