package fluentcore

import (
	"io"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore/forwardtest"
	"github.com/fluentcore/fluentcore/internal/testkit"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// With the receiver stalled, logging flat out does not grow the heap past the configured
// buffer budget (which New allocates up front).
func TestHeapStaysWithinBudgetWhileReceiverStalls(t *testing.T) {
	r := forwardtest.NewReceiver(t, forwardtest.CountOnly())
	r.Stall()
	const budget = 2 << 20 // info + err
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	core := New(fastRetry(Config{
		Addr: r.Addr(), Transport: TransportConfig{MaxBatchBytes: 64 << 10, RetryMax: 20 * time.Millisecond},
		Info: InfoConfig{BufferBytes: budget / 2}, Err: ErrConfig{BufferBytes: budget / 2, MaxWait: time.Millisecond},
		// A write that times out opens a new connection, whose socket buffers take another
		// few MiB: a timeout longer than the flood keeps it on one, so that it must drop.
		Timeouts: TimeoutsConfig{Write: time.Minute}, Spill: SpillConfig{Fallback: io.Discard},
	}))
	logger := zap.New(core)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50_000; i++ {
				logger.Info("flood", zap.Int("i", i), zap.String("user", "u-8f3a2b9c"), zap.Float64("latency", 12.5))
				if i%1000 == 0 {
					logger.Error("still failing", zap.Int("i", i))
				}
			}
		}()
	}
	wg.Wait()
	runtime.GC()
	runtime.ReadMemStats(&after)
	growth := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	// The budget, plus 1 MiB for everything else the core and the test own (goroutines,
	// encoders, the stalled receiver, timers).
	if limit := int64(budget + 1<<20); growth > limit {
		t.Fatalf("heap grew by %d bytes while the receiver stalled; limit %d", growth, limit)
	}
	st := core.Stats()
	if st.Info.Dropped["queue_full"]+st.Info.Dropped["degraded"]+st.Info.Dropped["sampled"] == 0 {
		t.Fatal("nothing dropped: the receiver was not stalled")
	}
	r.Resume()
	if err := core.Close(); err != nil {
		t.Fatal(err)
	}
	identityHolds(t, core.Stats())
}

// With the receiver down, a stream is full when its buffered bytes reach the budget, not when
// its batch buffers run out: the flush tick does not seal partly filled batches while the
// sender fails, and a writer without a free batch uses another shard's open batch. Err
// entries go to the fallback, and info entries are dropped, only once at least 90% of the
// budget is buffered (a sealed batch is at least 15/16 full). Before, every Transport.FlushInterval
// sealed one batch per shard, and err entries went to the fallback with the budget at a few
// percent.
func TestOutageFillsTheByteBudgetBeforeSpillingOrDropping(t *testing.T) {
	for _, id := range []streamID{errStream, infoStream} {
		t.Run(id.String(), func(t *testing.T) {
			var fb testkit.Lines
			reg := prometheus.NewRegistry()
			core := New(fastRetry(Config{
				Addr:      "tcp://127.0.0.1:1",
				Spill:     SpillConfig{Fallback: &fb},
				Transport: TransportConfig{MaxBatchBytes: 16 << 10, FlushInterval: 2 * time.Millisecond},
				Metrics:   MetricsConfig{Registerer: reg},
				Info:      InfoConfig{BufferBytes: 256 << 10},
				Err:       ErrConfig{BufferBytes: 256 << 10, MaxWait: time.Millisecond},
				Timeouts:  TimeoutsConfig{Close: 100 * time.Millisecond},
				Degrade:   DegradeConfig{Policy: DegradeOff},
			}))
			defer core.Close()
			logger := zap.New(core)
			pad := strings.Repeat("x", 600) // about 660 bytes an entry, as in the repro
			stats := func() StreamStats {
				if id == errStream {
					return core.Stats().Err
				}
				return core.Stats().Info
			}
			for i := 0; ; i++ {
				// The fill is read before each entry: the one that overflows has the err
				// sender move the whole buffer to the spill at once.
				before := stats()
				used := testkit.Metric(t, reg, "fluentcore_buffer_bytes", map[string]string{"stream": id.String()})
				capacity := testkit.Metric(t, reg, "fluentcore_buffer_capacity_bytes", map[string]string{"stream": id.String()})
				if id == errStream {
					logger.Error("outage", zap.Int("i", i), zap.String("pad", pad))
				} else {
					logger.Info("outage", zap.Int("i", i), zap.String("pad", pad))
				}
				st := stats()
				if st.Spilled > 0 || st.DroppedTotal() > 0 {
					if share := float64(before.BufferedBytes) / float64(before.CapacityBytes); share < 0.9 {
						t.Fatalf("entry %d was the first one %s, with %d of %d bytes buffered (%.0f%%) before it",
							i, map[bool]string{true: "spilled", false: "dropped"}[id == errStream], before.BufferedBytes, before.CapacityBytes, 100*share)
					}
					// What the operator sees: the gauges behind "Buffer fill" and
					// FluentcoreBufferNearlyFull (> 0.9, dashboards/alerts.yml) said full too.
					if used/capacity <= 0.9 {
						t.Errorf("fluentcore_buffer_bytes / fluentcore_buffer_capacity_bytes = %.0f / %.0f before the first drop: FluentcoreBufferNearlyFull would not fire", used, capacity)
					}
					return
				}
				if i > 1000 { // 660 KB offered to a 256 KiB budget
					t.Fatalf("nothing spilled or dropped after %d entries: %+v", i, st)
				}
				time.Sleep(200 * time.Microsecond) // let flush ticks fall between the entries
			}
		})
	}
}

// A receiver that accepts and never reads nor acks: the sender holds one batch for
// Timeouts.Ack, and the flush tick must not seal a partly filled batch per shard every
// Transport.FlushInterval meanwhile, or a low rate of errors runs out of batch buffers long before
// the budget's bytes and Error() waits, then falls back.
func TestStalledSenderDoesNotSealPartialBatches(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	var fb testkit.Lines
	core := New(Config{
		Addr: r.Addr(), Spill: SpillConfig{Fallback: &fb}, Info: InfoConfig{Acks: AcksOn}, Timeouts: TimeoutsConfig{Ack: 10 * time.Second, Close: 100 * time.Millisecond},
		Transport: TransportConfig{MaxBatchBytes: 4 << 10, FlushInterval: time.Millisecond}, Err: ErrConfig{BufferBytes: 64 << 10}, // 16 batches
	})
	defer core.Close()
	logger := zap.New(core)
	logger.Error("before the stall")
	if err := core.Sync(); err != nil {
		t.Fatal(err)
	}
	r.Stall()
	defer r.Resume()
	st := sinkOf(core).streams[errStream]
	// 300 entries of about 100 bytes (30 KB, half the budget), each a few flush ticks apart.
	for i := range 300 {
		logger.Error("stalled", zap.Int("i", i), zap.String("pad", strings.Repeat("x", 40)))
		time.Sleep(300 * time.Microsecond)
	}
	if w := st.Counts.Waits.Load(); w != 0 || fb.Records() != 0 {
		t.Errorf("with %d of %d bytes buffered, %d Error() calls waited for a batch and %d went to the fallback",
			st.Buffered(), st.Capacity(), w, fb.Records())
	}
}
