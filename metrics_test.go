package fluentcore

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/fluentcore/fluentcore/forwardtest"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
)

// The exposition of a fresh core's counters, compared whole.
func TestMetricsExposition(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	core := New(Config{Addr: r.Addr(), Tag: "m", NoMetrics: true}) // read after Close: not registered
	logger := zap.New(core)
	logger.Info("one")
	logger.Info("two")
	logger.Error("three")
	if err := core.Sync(); err != nil {
		t.Fatal(err)
	}
	core.Close()
	want := `
# HELP fluentcore_entries_total Entries at an enabled level that reached the core, including those dropped before encoding.
# TYPE fluentcore_entries_total counter
fluentcore_entries_total{stream="err"} 1
fluentcore_entries_total{stream="info"} 2
# HELP fluentcore_delivered_entries_total Entries the receiver has (written, or acknowledged when acks are on).
# TYPE fluentcore_delivered_entries_total counter
fluentcore_delivered_entries_total{stream="err"} 1
fluentcore_delivered_entries_total{stream="info"} 2
# HELP fluentcore_spilled_entries_total Entries set aside instead of delivered: appended to the durable spill (SpillDir), or written to ErrFallback.
# TYPE fluentcore_spilled_entries_total counter
fluentcore_spilled_entries_total{stream="err"} 0
# HELP fluentcore_dropped_entries_total Entries dropped, by reason.
# TYPE fluentcore_dropped_entries_total counter
fluentcore_dropped_entries_total{reason="encode_error",stream="err"} 0
fluentcore_dropped_entries_total{reason="spill_failed",stream="err"} 0
fluentcore_dropped_entries_total{reason="spill_full",stream="err"} 0
fluentcore_dropped_entries_total{reason="closed",stream="info"} 0
fluentcore_dropped_entries_total{reason="degraded",stream="info"} 0
fluentcore_dropped_entries_total{reason="encode_error",stream="info"} 0
fluentcore_dropped_entries_total{reason="queue_full",stream="info"} 0
fluentcore_dropped_entries_total{reason="sampled",stream="info"} 0
fluentcore_dropped_entries_total{reason="shutdown",stream="info"} 0
fluentcore_dropped_entries_total{reason="too_large",stream="info"} 0
# HELP fluentcore_buffer_capacity_bytes The stream's buffer budget in bytes.
# TYPE fluentcore_buffer_capacity_bytes gauge
fluentcore_buffer_capacity_bytes{stream="err"} 4.194304e+06
fluentcore_buffer_capacity_bytes{stream="info"} 8.388608e+06
`
	if err := testutil.CollectAndCompare(core.metrics, strings.NewReader(want),
		"fluentcore_entries_total", "fluentcore_delivered_entries_total",
		"fluentcore_spilled_entries_total", "fluentcore_dropped_entries_total",
		"fluentcore_buffer_capacity_bytes"); err != nil {
		t.Fatal(err)
	}
	if problems, err := testutil.CollectAndLint(core.metrics); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", err, problems)
	}
}

// The spill's metrics are the err stream's alone: the info stream never spills, so it has
// no such series (a zero there would read as "nothing spilled" rather than "cannot spill").
func TestSpillMetricsAreErrOnly(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	core := New(Config{Addr: r.Addr(), Tag: "m"})
	defer core.Close()
	want := `
# HELP fluentcore_spilled_entries_total Entries set aside instead of delivered: appended to the durable spill (SpillDir), or written to ErrFallback.
# TYPE fluentcore_spilled_entries_total counter
fluentcore_spilled_entries_total{stream="err"} 0
# HELP fluentcore_replayed_entries_total Spilled entries delivered from the durable spill (already counted as spilled).
# TYPE fluentcore_replayed_entries_total counter
fluentcore_replayed_entries_total{stream="err"} 0
# HELP fluentcore_spill_bytes Bytes of the durable spill's segment files.
# TYPE fluentcore_spill_bytes gauge
fluentcore_spill_bytes{stream="err"} 0
# HELP fluentcore_spill_corrupt_segments_total Spill segments whose damaged tail was skipped on replay.
# TYPE fluentcore_spill_corrupt_segments_total counter
fluentcore_spill_corrupt_segments_total{stream="err"} 0
`
	if err := testutil.CollectAndCompare(core.metrics, strings.NewReader(want),
		"fluentcore_spilled_entries_total", "fluentcore_replayed_entries_total",
		"fluentcore_spill_bytes", "fluentcore_spill_corrupt_segments_total"); err != nil {
		t.Fatal(err)
	}
}

// Cores joining and leaving the metrics on one Registerer at once, as reloads racing each
// other would: every join succeeds, no scrape fails, and once the last core has left
// nothing is registered. While one core stays throughout, they all join its collector and
// the counters, summed over every core that has been in it, never go backwards.
func TestMetricsSharedByCoresComingAndGoing(t *testing.T) {
	const goroutines, rounds = 8, 50
	one := func() Stats { return Stats{Info: StreamStats{Entries: 1}, Err: StreamStats{Entries: 1}} }
	labels := map[string]string{"app": "shop"}
	churn := func(reg *prometheus.Registry, joined func(*metrics)) error {
		var wg sync.WaitGroup
		errs := make(chan error, goroutines)
		for range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range rounds {
					m, mem, err := joinMetrics(reg, labels)
					if err != nil {
						errs <- err
						return
					}
					m.start(mem, one)
					joined(m)
					if _, err := reg.Gather(); err != nil {
						errs <- err
						return
					}
					m.leave(mem)
				}
			}()
		}
		wg.Wait()
		close(errs)
		return <-errs
	}
	entries := func(reg *prometheus.Registry) float64 { // -1: none, or the gather failed
		mfs, err := reg.Gather()
		if err != nil {
			return -1
		}
		for _, mf := range mfs {
			if mf.GetName() == "fluentcore_entries_total" {
				return mf.GetMetric()[0].GetCounter().GetValue()
			}
		}
		return -1
	}

	t.Run("no core stays", func(t *testing.T) {
		reg := prometheus.NewRegistry()
		if err := churn(reg, func(*metrics) {}); err != nil {
			t.Fatal(err)
		}
		if n, err := testutil.GatherAndCount(reg); err != nil || n != 0 {
			t.Fatalf("%d series after every core left, %v", n, err)
		}
	})
	t.Run("one core stays", func(t *testing.T) {
		reg := prometheus.NewRegistry()
		holder, mem, err := joinMetrics(reg, labels)
		if err != nil {
			t.Fatal(err)
		}
		holder.start(mem, one)
		var mu sync.Mutex
		var other []string
		last := 0.0
		err = churn(reg, func(m *metrics) {
			mu.Lock()
			defer mu.Unlock()
			if m != holder {
				other = append(other, fmt.Sprintf("%p", m))
			}
			if v := entries(reg); v < last {
				other = append(other, fmt.Sprintf("entries went back from %v to %v (-1: no series)", last, v))
			} else {
				last = v
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(other) > 0 {
			t.Fatalf("not the staying core's collector, or a counter went back: %v", other)
		}
		if got, want := entries(reg), float64(1+goroutines*rounds); got != want {
			t.Fatalf("entries %v, want one per core that has been in it, %v", got, want)
		}
		holder.leave(mem)
		if n, err := testutil.GatherAndCount(reg); err != nil || n != 0 {
			t.Fatalf("%d series after the last core left, %v", n, err)
		}
	})
}
