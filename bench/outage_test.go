package bench

import (
	"flag"
	"io"
	"net"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore"
	"go.uber.org/zap"
)

var outageWindow = flag.Duration("bench.outage", 3*time.Second, "longest the receiver stays stalled in BenchmarkOutage")

// BenchmarkOutage: the receiver stops reading and each contender keeps logging. b.N is the
// number of log calls made during the stall (make bench runs 200000); the stall ends after
// them or after -bench.outage, whichever comes first — a client that blocks its caller stays
// blocked until then. Reported: the latency of one log call (p50, p99, p99.9, max), the
// calls made, the entries refused or dropped (and said so), the heap retained after a GC at
// the end of the stall minus before it, whether the window ended before b.N calls were made
// (the caller was blocked), and, after the receiver resumes and the client flushes, the accepted entries lost.
func BenchmarkOutage(b *testing.B) {
	for _, c := range lineup() {
		if c.name == refName {
			continue // writes nowhere: nothing to stall
		}
		b.Run("contender="+c.name, func(b *testing.B) { outage(b, c.open(b, addingFields)) })
	}
}

func outage(b *testing.B, cl *client) {
	defer cl.close()
	// Connect and deliver a first few entries, so the stall hits a running client.
	const warm = 100
	for range warm {
		cl.log()
	}
	if cl.sync != nil {
		_ = cl.sync()
	}
	refused0 := cl.refused()
	// The warm-up entries count as delivered before the stall once they arrive, whenever
	// that is (a client may still hold a few of them).
	base := warm - int64(refused0)
	cl.recv.Wait(base, 200*time.Millisecond, 10*time.Second)

	lat := newLatencies(b.N)
	runtime.GC()
	heap0 := heapInUse()
	cl.recv.Stall()

	var stop atomic.Bool
	done := make(chan struct{})
	b.ResetTimer()
	go func() {
		defer close(done)
		for i := 0; i < b.N && !stop.Load(); i++ {
			lat.time(cl.log)
		}
	}()
	window := time.NewTimer(*outageWindow)
	select {
	case <-done:
		window.Stop()
	case <-window.C:
		stop.Store(true) // a call may still be blocked on the stalled receiver
	}
	b.StopTimer()
	runtime.GC()
	heap1 := heapInUse()
	refused := cl.refused() - refused0
	cl.recv.Resume()
	<-done // a blocked call completes once the receiver reads again

	calls := int64(len(lat.ns))
	blocked := 0.0
	if calls < int64(b.N) {
		blocked = 1 // the window ended first: calls waited on the receiver
	}
	ferr := cl.finish()
	accepted := calls - int64(refused)
	delivered := cl.recv.Wait(base+accepted, *deliveryQuiet, deliveryMax) - base
	if ferr != nil {
		b.Logf("flush: %v", ferr)
	}
	lat.report(b)
	b.ReportMetric(float64(calls), "calls")
	b.ReportMetric(float64(refused), "rejected")
	b.ReportMetric(float64(max(0, accepted-delivered)), "lost")
	b.ReportMetric(float64(int64(heap1)-int64(heap0)), "heap-B")
	b.ReportMetric(blocked, "blocked")
	if v := cl.recv.Violations(); v > 0 {
		b.ReportMetric(float64(v), "violations")
	}
}

// heapInUse is the heap held by live objects and not yet swept garbage (after runtime.GC: live).
func heapInUse() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkRefused: the default configuration logs flat out from 4 goroutines, one call in
// 101 an Error, with no Spill.Dir (err goes to Spill.Fallback after Spill.After), while the
// receiver refuses every connection (its port is closed: receiver=refused), and the same
// load at a receiver in its own process that takes all it gets (receiver=healthy): a call
// that cannot be delivered, its info entry shed or dropped, should cost no more than one
// that is, in wall time (ns/op) and in the client's CPU (cpu-ns/op). -bench.reverse runs
// the healthy one first.
func BenchmarkRefused(b *testing.B) {
	receivers := []string{"refused", "healthy"}
	if *reverse {
		receivers[0], receivers[1] = receivers[1], receivers[0]
	}
	for _, rc := range receivers {
		b.Run("receiver="+rc, func(b *testing.B) {
			var addr string
			if rc == "healthy" {
				r := mustStartReceiver(b, KindForward)
				defer r.Close()
				addr = r.Addr()
			} else {
				l, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					b.Fatal(err)
				}
				addr = "tcp://" + l.Addr().String()
				_ = l.Close() // refused from now on
			}
			refusedLoad(b, addr)
		})
	}
}

// refusedLoad is BenchmarkRefused's load against the receiver at addr.
func refusedLoad(b *testing.B, addr string) {
	core := newFluentcore(addr, func(c *fluentcore.Config) {
		c.Spill.Fallback = io.Discard
		c.Timeouts.Close = 100 * time.Millisecond // what Close delivers is not measured: do not wait for it
	})
	defer core.Close()
	logger := zap.New(core)
	const errText = "payment gateway: read tcp 10.0.0.7:443: connection reset by peer"
	var calls atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	cpu := processCPU()
	inGoroutines(4)(b, func() {
		if calls.Add(1)%101 == 0 {
			logger.Error("outage", zap.String("error", errText))
			return
		}
		LogFields(logger)
	})
	cpu = processCPU() - cpu
	b.StopTimer()
	st := core.Stats()
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(st.Info.DroppedTotal())/float64(b.N), "info-dropped/op")
	b.ReportMetric(float64(st.Err.Spilled)/float64(b.N), "err-spilled/op")
}
