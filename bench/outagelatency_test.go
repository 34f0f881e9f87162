package bench

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// BenchmarkOutageCallerLatency times Error and Info calls during a low-rate outage (issue
// 14): the receiver's address refuses connections, and one goroutine logs an entry of about
// 660 bytes every 5 ms (200/s), with the default Config. Each of b.N calls is timed; at
// -benchtime 4000x (20 s, about 2.6 MB) the buffers always have room (4 MiB err, 8 MiB
// info), which is the state the target is for: p99 ≤ 1 µs, and nothing dropped. Err
// entries go to Spill.Fallback once sends have failed for Spill.After (reported as spilled).
// zap's JSON core to io.Discard, paced the same, is the floor: a call every 5 ms finds cold
// caches whatever the logger.
func BenchmarkOutageCallerLatency(b *testing.B) {
	pad := strings.Repeat("x", 600)
	b.Run("level=error/contender="+refName, func(b *testing.B) {
		pacedLatency(b, newZapJSON(zapcore.AddSync(io.Discard)), zapcore.ErrorLevel, pad)
	})
	for _, lvl := range []zapcore.Level{zapcore.ErrorLevel, zapcore.InfoLevel} {
		b.Run("level="+lvl.String()+"/contender=fluentcore", func(b *testing.B) {
			core := fluentcore.New(fluentcore.Config{Addr: refusedAddr(b), Spill: fluentcore.SpillConfig{Fallback: io.Discard},
				Degrade: fluentcore.DegradeConfig{Policy: fluentcore.DegradeOff}})
			defer core.Close()
			pacedLatency(b, zap.New(core), lvl, pad)
			st := core.Stats()
			b.ReportMetric(float64(st.Err.DroppedTotal()+st.Info.DroppedTotal()), "lost-to-buffers")
			b.ReportMetric(float64(st.Err.Spilled), "spilled")
			b.ReportMetric(float64(st.Info.BufferedBytes+st.Err.BufferedBytes), "buffered-B")
		})
	}
}

// pacedLatency times b.N calls of l at lvl, one every 5 ms.
func pacedLatency(b *testing.B, l *zap.Logger, lvl zapcore.Level, pad string) {
	lat := newLatencies(b.N)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	b.ResetTimer()
	for i := range b.N {
		<-tick.C
		lat.time(func() { l.Log(lvl, "outage", zap.Int("i", i), zap.String("pad", pad)) })
	}
	b.StopTimer()
	lat.report(b)
	b.ReportMetric(timerOverhead(), "timer-ns")
}

// refusedAddr returns a loopback address where nothing listens: connections are refused.
func refusedAddr(b *testing.B) string {
	ln, err := new(net.ListenConfig).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return "tcp://" + addr
}
