package bench

import (
	"runtime/metrics"
	"slices"
	"testing"
	"time"
)

// latencies records the duration of single calls into a slice allocated up front, so that
// recording allocates nothing.
type latencies struct{ ns []int64 }

func newLatencies(n int) *latencies { return &latencies{ns: make([]int64, 0, n)} }

// time runs f and records how long it took.
func (l *latencies) time(f func()) {
	t0 := time.Now()
	f()
	l.ns = append(l.ns, int64(time.Since(t0)))
}

// quantile returns the q-quantile (nearest rank) of the recorded durations; it sorts them.
func (l *latencies) quantile(q float64) float64 {
	if len(l.ns) == 0 {
		return 0
	}
	slices.Sort(l.ns)
	i := int(q*float64(len(l.ns))+0.5) - 1
	return float64(l.ns[min(max(i, 0), len(l.ns)-1)])
}

// report adds p50, p99, p99.9 and max in ns.
func (l *latencies) report(b *testing.B) {
	b.ReportMetric(l.quantile(0.50), "p50-ns")
	b.ReportMetric(l.quantile(0.99), "p99-ns")
	b.ReportMetric(l.quantile(0.999), "p99.9-ns")
	b.ReportMetric(l.quantile(1), "max-ns")
}

// timerOverhead is the p50 of timing an empty call: the floor under every latency figure.
func timerOverhead() float64 {
	l := newLatencies(10000)
	for range 10000 {
		l.time(func() {})
	}
	return l.quantile(0.5)
}

// schedSnapshot is the runtime's histogram of how long goroutines waited in run queues.
type schedSnapshot struct{ h *metrics.Float64Histogram }

func readSched() schedSnapshot {
	s := []metrics.Sample{{Name: "/sched/latencies:seconds"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64Histogram {
		return schedSnapshot{}
	}
	return schedSnapshot{s[0].Value.Float64Histogram()}
}

// quantileSince returns the q-quantile, in ns, of the run-queue waits since s0 (the upper
// bound of the histogram bucket it falls in).
func (s schedSnapshot) quantileSince(s0 schedSnapshot, q float64) float64 {
	if s.h == nil || s0.h == nil || len(s.h.Counts) != len(s0.h.Counts) {
		return 0
	}
	var total uint64
	for i := range s.h.Counts {
		total += s.h.Counts[i] - s0.h.Counts[i]
	}
	if total == 0 {
		return 0
	}
	target := uint64(q * float64(total))
	var acc uint64
	for i := range s.h.Counts {
		acc += s.h.Counts[i] - s0.h.Counts[i]
		if acc >= target {
			return s.h.Buckets[i+1] * 1e9
		}
	}
	return s.h.Buckets[len(s.h.Buckets)-1] * 1e9
}
