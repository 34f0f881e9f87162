package bench

import (
	"io"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore"
	"go.uber.org/zap"
)

// errFlooders is the number of goroutines flooding the info stream in BenchmarkErrLatency.
const errFlooders = 16

// errEvery is the pace of err entries in BenchmarkErrLatency.
const errEvery = 5 * time.Millisecond

// BenchmarkErrLatency (issue 5): with errFlooders goroutines logging info entries flat out,
// one goroutine logs b.N err entries (Error, the same 10 fields), one every errEvery. The
// receiver notes when each err entry arrives; latency is arrival minus the entry's EventTime
// (the time of the log call). The err stream has its own connection, and its sender seals
// and sends err entries as soon as it is free (Transport.FlushInterval, 500ms by default, bounds only
// info), so expect milliseconds, and a tail set by how long the woken sender waits for a CPU
// among the flooders. Also reported: the info entries delivered per second meanwhile, the share of
// info calls dropped, and the p99 of the time runnable goroutines waited for a CPU (the
// runtime's /sched/latencies), which bounds how fast a woken sender gets to run.
//
// contender=fluentcore is the default, whose err stream waits for the receiver's acks;
// contender=fluentcore-err-acks-off is the same without them (Err.Acks: AcksOff), for what
// the acks cost.
func BenchmarkErrLatency(b *testing.B) {
	for _, c := range []struct {
		name string
		acks fluentcore.Acks
	}{{"fluentcore", fluentcore.AcksDefault}, {"fluentcore-err-acks-off", fluentcore.AcksOff}} {
		b.Run("contender="+c.name, func(b *testing.B) { errLatency(b, c.acks) })
	}
}

func errLatency(b *testing.B, acks fluentcore.Acks) {
	rc := mustStartReceiver(b, KindClock)
	defer rc.Close()
	r := rc.(*remote)
	core := newFluentcore(r.Addr(), func(c *fluentcore.Config) { c.Spill.Fallback, c.Err.Acks = io.Discard, acks })
	defer core.Close()
	l := zap.New(core)

	stop := startProducers(l, errFlooders, nil)
	tick := time.NewTicker(errEvery)
	sched0 := readSched()
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		<-tick.C
		l.Error(Message, ContextFields()...)
	}
	b.StopTimer()
	elapsed, sched := time.Since(start), readSched()
	tick.Stop()
	stop()
	if err := core.Sync(); err != nil {
		b.Logf("sync: %v", err)
	}
	got := r.Wait(int64(b.N), *deliveryQuiet, deliveryMax)
	lat, infos := r.Latencies()
	st := core.Stats()
	l2 := &latencies{ns: make([]int64, len(lat))}
	for i, d := range lat {
		l2.ns[i] = d.Nanoseconds()
	}
	l2.report(b)
	// How long runnable goroutines (the senders and the clock among them) waited for a
	// CPU meanwhile.
	b.ReportMetric(sched.quantileSince(sched0, 0.99), "sched-p99-ns")
	b.ReportMetric(float64(int64(b.N)-got), "err-lost")
	b.ReportMetric(float64(st.Err.Spilled), "err-spilled")
	b.ReportMetric(float64(infos)/elapsed.Seconds(), "info-events/s")
	if st.Info.Entries > 0 {
		b.ReportMetric(float64(st.Info.DroppedTotal())/float64(st.Info.Entries), "info-dropped-frac")
	}
}
