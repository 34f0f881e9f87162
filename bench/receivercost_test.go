package bench

import (
	"bytes"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/tinylib/msgp/msgp"
	"go.uber.org/zap/zapcore"
)

// frameEntries is the number of entries in each request BenchmarkReceiver writes.
const frameEntries = 1000

// BenchmarkReceiver measures the counting receivers on their own, fed prebuilt requests of
// the benchmark record over loopback TCP from one connection, in their own process as in
// every other benchmark: PackedForward requests of 1000 entries (what fluentcore sends),
// 1000 Message-mode requests (what the official, lestrrat and IBM clients send, one per
// entry), and 1000 JSON lines from zap's encoder. ns/entry is wall time per entry end to
// end; recv-ns/entry is the receiver process's CPU time per entry.
func BenchmarkReceiver(b *testing.B) {
	now := time.Now()
	var packed, message []byte
	var entries []byte
	for range frameEntries {
		entries = appendModelEntry(entries, now)
	}
	packed = msgp.AppendArrayHeader(packed, 3)
	packed = msgp.AppendString(packed, Tag)
	packed = msgp.AppendBytes(packed, entries)
	packed = msgp.AppendMapHeader(packed, 1)
	packed = msgp.AppendString(packed, "size")
	packed = msgp.AppendInt(packed, frameEntries)
	one := appendModelEntry(nil, now)
	for range frameEntries {
		message = msgp.AppendArrayHeader(message, 3)
		message = msgp.AppendString(message, Tag)
		message = append(message, one[1:]...) // the entry without its array header: time, record
	}
	var lines bytes.Buffer
	l := newZapJSON(zapcore.AddSync(&lines))
	for range frameEntries {
		LogFields(l)
	}

	for _, c := range []struct {
		name, kind string
		frame      []byte
	}{
		{"forward-packed", KindForward, packed},
		{"forward-message", KindForward, message},
		{"lines", KindLines, lines.Bytes()},
	} {
		b.Run("format="+c.name, func(b *testing.B) {
			r := mustStartReceiver(b, c.kind)
			defer r.Close()
			conn, err := net.Dial("tcp", strings.TrimPrefix(r.Addr(), "tcp://"))
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close()
			cpu0 := r.CPU()
			b.SetBytes(int64(len(c.frame)))
			b.ResetTimer()
			for range b.N {
				if _, err := conn.Write(c.frame); err != nil {
					b.Fatal(err)
				}
			}
			want := int64(b.N) * frameEntries
			got := r.Wait(want, time.Second, deliveryMax)
			b.StopTimer()
			if got != want {
				b.Fatalf("receiver counted %d entries, want %d (violations %d)", got, want, r.Violations())
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(want), "ns/entry")
			b.ReportMetric(float64((r.CPU()-cpu0).Nanoseconds())/float64(want), "recv-ns/entry")
		})
	}
}
