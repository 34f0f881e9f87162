package bench

import (
	"flag"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Every timed loop ends with the client's flush (or close) and a wait until the receiver has
// counted every entry the client accepted; ns/op is that whole time divided by the calls.
// An entry is accepted unless the client refused it or dropped it and said so; accepted
// entries that never arrive are lost. Waiting ends when the count is reached, or when nothing
// has arrived for deliveryQuiet after the flush (then what is missing is lost: that idle time
// is inside the timer, so a lossy client's ns/op is up to deliveryQuiet/b.N too high).
var (
	deliveryQuiet = flag.Duration("bench.quiet", 100*time.Millisecond, "give up waiting for entries once none has arrived for this long")
	deliveryMax   = 2 * time.Minute
)

// parallelism is the b.SetParallelism of the parallel mode: 64 goroutines per GOMAXPROCS.
const parallelism = 64

func BenchmarkAddingFields(b *testing.B)       { runScenario(b, addingFields) }
func BenchmarkAccumulatedContext(b *testing.B) { runScenario(b, accumulatedContext) }
func BenchmarkWithoutFields(b *testing.B)      { runScenario(b, withoutFields) }
func BenchmarkSugar(b *testing.B)              { runScenario(b, sugar) }

func runScenario(b *testing.B, s scenario) {
	for _, mode := range []string{"single", "parallel"} {
		for _, c := range lineup() {
			if !c.runs(s) {
				continue
			}
			loop := single
			if mode == "parallel" {
				loop = parallel
			}
			b.Run("mode="+mode+"/contender="+c.name, func(b *testing.B) {
				measure(b, c.open(b, s), loop)
			})
		}
	}
}

// single makes b.N calls from one goroutine.
func single(b *testing.B, f func()) {
	for range b.N {
		f()
	}
}

// parallel makes b.N calls from RunParallel's goroutines.
func parallel(b *testing.B, f func()) {
	b.SetParallelism(parallelism)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			f()
		}
	})
}

// inGoroutines makes b.N calls from exactly g goroutines, which take them in chunks.
func inGoroutines(g int) func(b *testing.B, f func()) {
	return func(b *testing.B, f func()) {
		const chunk = 64
		n := int64(b.N)
		var next atomic.Int64
		var wg sync.WaitGroup
		for range g {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					hi := next.Add(chunk)
					lo := hi - chunk
					if lo >= n {
						return
					}
					for range min(hi, n) - lo {
						f()
					}
				}
			}()
		}
		wg.Wait()
	}
}

// measure makes b.N log calls with loop, flushes, waits for delivery and reports what
// arrived.
func measure(b *testing.B, cl *client, loop func(*testing.B, func())) {
	defer cl.close()
	b.ReportAllocs()
	rcpu0 := recvCPU(cl)
	b.ResetTimer()
	start, cpu0, sched0 := time.Now(), processCPU(), readSched()
	loop(b, cl.log)
	ferr := cl.finish()
	d := deliver(cl, int64(b.N), 0)
	elapsed, cpu, sched := time.Since(start), processCPU()-cpu0, readSched()
	b.StopTimer()
	if ferr != nil {
		b.Logf("flush: %v", ferr)
	}
	d.cpu, d.recvCPU = cpu, recvCPU(cl)-rcpu0
	d.report(b, elapsed)
	if cl.extra != nil {
		cl.extra(b, int64(b.N))
	}
	// How long runnable goroutines waited for a CPU: a background sender woken by its
	// socket waits this long behind the logging goroutines.
	b.ReportMetric(sched.quantileSince(sched0, 0.99), "sched-p99-ns")
}

func recvCPU(cl *client) time.Duration {
	if cl.recv == nil {
		return 0
	}
	return cl.recv.CPU()
}

// delivery is what became of the calls of one timed loop.
type delivery struct {
	calls, refused, accepted, delivered, lost, violations int64
	discard                                               bool // the client writes nowhere
	cpu, recvCPU                                          time.Duration
}

// deliver waits for the accepted entries of calls log calls to arrive at the receiver, which
// had already counted base entries before them.
func deliver(cl *client, calls, base int64) delivery {
	d := delivery{calls: calls, refused: int64(cl.refused())}
	d.accepted = calls - d.refused
	if cl.recv == nil {
		d.delivered, d.discard = d.accepted, true
		return d
	}
	d.delivered = cl.recv.Wait(base+d.accepted, *deliveryQuiet, deliveryMax) - base
	d.lost = max(0, d.accepted-d.delivered)
	d.violations = cl.recv.Violations()
	return d
}

func (d delivery) report(b *testing.B, elapsed time.Duration) {
	b.ReportMetric(float64(d.delivered)/elapsed.Seconds(), "events/s")
	b.ReportMetric(float64(d.delivered), "delivered")
	b.ReportMetric(float64(d.lost), "lost")
	b.ReportMetric(float64(d.refused), "rejected")
	if d.cpu > 0 {
		// CPU time of the client's process (encoding, its background goroutines, syscalls,
		// GC) per call: with two cores, wall time per call hides work done in parallel.
		b.ReportMetric(float64(d.cpu.Nanoseconds())/float64(d.calls), "cpu-ns/op")
	}
	if d.recvCPU > 0 && d.delivered > 0 {
		// The receiver's own cost, in its own process.
		b.ReportMetric(float64(d.recvCPU.Nanoseconds())/float64(d.delivered), "recv-ns/entry")
	}
	if d.violations > 0 {
		b.ReportMetric(float64(d.violations), "violations")
	}
}
