package bench

import (
	"io"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// BenchmarkCallerLatency times single AddingFields log calls from one goroutine (issue 5):
//
//   - state=degraded: fluentcore with small buffers (Transport.MaxBatchBytes 16 KiB, info budget
//     64 KiB) and the receiver stalled until the info stream has degraded (Config.OnEvent
//     says so); then b.N calls are timed. Target: p99 ≤ 1 µs.
//   - state=full: the same with the degrade policy off, once entries are dropped as
//     queue_full.
//   - state=normal: fluentcore with the receiver reading, and zap's JSON core to io.Discard,
//     as the floors a degraded call is compared with.
//
// Each call is timed with two time.Now calls; timer-ns is that overhead alone (p50).
func BenchmarkCallerLatency(b *testing.B) {
	for _, fl := range []struct {
		name string
		log  func(*zap.Logger)
	}{{"per-call", LogFields}, {"prebuilt", logPrebuilt()}} {
		b.Run("fields="+fl.name, func(b *testing.B) { callerLatencyStates(b, fl.log) })
	}
}

// logPrebuilt returns a LogFields that passes the same fields from one slice built once:
// zap's variadic slice is then not allocated per call, so the garbage collector, which that
// allocation drives, is out of the figure and what is left is the logger's own path.
func logPrebuilt() func(*zap.Logger) {
	fields := ContextFields()
	return func(l *zap.Logger) { l.Info(Message, fields...) }
}

func callerLatencyStates(b *testing.B, logf func(*zap.Logger)) {
	small := func(c *fluentcore.Config) {
		c.Transport.MaxBatchBytes = 16 << 10
		c.Info.BufferBytes = 64 << 10
	}
	b.Run("state=degraded/contender=fluentcore", func(b *testing.B) {
		degraded := make(chan struct{}, 1)
		callerLatency(b, logf, func(c *fluentcore.Config) {
			small(c)
			c.OnEvent = func(e fluentcore.Event) {
				if e.Kind == fluentcore.EventDegraded {
					select {
					case degraded <- struct{}{}:
					default:
					}
				}
			}
		}, func(*fluentcore.Core) bool {
			select {
			case <-degraded:
				return true
			default:
				return false
			}
		})
	})
	b.Run("state=full/contender=fluentcore-degrade-off", func(b *testing.B) {
		callerLatency(b, logf, func(c *fluentcore.Config) {
			small(c)
			c.Degrade.Policy = fluentcore.DegradeOff
		}, func(core *fluentcore.Core) bool {
			return core.Stats().Info.Dropped["queue_full"] > 0
		})
	})
	b.Run("state=normal/contender=fluentcore", func(b *testing.B) {
		callerLatency(b, logf, nil, nil)
	})
	b.Run("state=normal/contender="+refName, func(b *testing.B) {
		l := newZapJSON(zapcore.AddSync(io.Discard))
		lat := newLatencies(b.N)
		b.ResetTimer()
		for range b.N {
			lat.time(func() { logf(l) })
		}
		b.StopTimer()
		lat.report(b)
		b.ReportMetric(timerOverhead(), "timer-ns")
	})
}

// callerLatency stalls the receiver and logs until ready says the core is in the state to
// measure (nil: measure at once, receiver reading), then times b.N calls.
func callerLatency(b *testing.B, logf func(*zap.Logger), mod func(*fluentcore.Config), ready func(*fluentcore.Core) bool) {
	r := mustStartReceiver(b, KindForward)
	defer r.Close()
	core := newFluentcore(r.Addr(), mod)
	defer core.Close()
	l := zap.New(core)
	if ready != nil {
		r.Stall()
		defer r.Resume() // before Close, so the core can deliver what it holds
		deadline := time.Now().Add(time.Minute)
		for !ready(core) {
			if time.Now().After(deadline) {
				b.Fatalf("not in the state to measure after a minute: %+v", core.Stats().Info)
			}
			for range 100 {
				logf(l)
			}
		}
	}
	dropped0 := core.Stats().Info.DroppedTotal()
	lat := newLatencies(b.N)
	b.ResetTimer()
	for range b.N {
		lat.time(func() { logf(l) })
	}
	b.StopTimer()
	lat.report(b)
	b.ReportMetric(float64(core.Stats().Info.DroppedTotal()-dropped0)/float64(b.N), "dropped/op")
	b.ReportMetric(timerOverhead(), "timer-ns")
}
