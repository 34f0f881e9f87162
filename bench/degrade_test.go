package bench

import (
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore"
	"go.uber.org/zap"
)

// The degrade-policy scenarios of issue 15, each for the default policy (DegradeAdaptive)
// and DegradeOff in the same run. They are timed by the clock, not by b.N: run them with
// -benchtime 1x (make bench does). Step 1 measures what the pipeline delivers flat out with
// DegradeOff, into a receiver that takes degradeReceiverRate entries a second (a fluentd
// whose output is the bottleneck): on 2 cores, against a receiver that takes all it gets,
// the logging goroutines themselves are the bottleneck and could not offer 3x of it. The
// paced scenarios offer shares of that capacity to the same receiver.
var (
	degradeLength = flag.Duration("bench.degrade", 10*time.Second, "how long BenchmarkDegrade's steady and skew scenarios log")
	degradeSeries = flag.String("bench.degrade-series", "", "BenchmarkDegrade writes the burst scenario's per-100ms series (CSV) to this file")
)

// degradeProducers log in the paced scenarios: enough goroutines that pacing, not the
// calls, sets the rate.
const degradeProducers = 32

// slowReceiverRate is the slow-receiver scenario's receiver, in entries a second;
// degradeReceiverRate the other scenarios'.
const (
	slowReceiverRate    = 200_000
	degradeReceiverRate = 400_000
)

var degradePolicies = []struct {
	name   string
	policy fluentcore.DegradePolicy
}{{"adaptive", fluentcore.DegradeAdaptive}, {"off", fluentcore.DegradeOff}}

// BenchmarkDegrade reports, per scenario and policy: offered and delivered info entries a
// second, the share of offered entries dropped (any reason) and dropped as queue_full, and
// the scenario's own figures (see each).
func BenchmarkDegrade(b *testing.B) {
	var capacity float64
	b.Run("scenario=capacity/policy=off", func(b *testing.B) {
		// Step 1: flat out, 16 goroutines, 3 s, DegradeOff: what the pipeline delivers.
		run := startDegradeRun(b, KindRate(KindForward, degradeReceiverRate), fluentcore.DegradeOff)
		defer run.close()
		run.drive(16, nil, min(3*time.Second, *degradeLength))
		capacity = run.report(b)
	})
	if capacity == 0 {
		b.Skip("no capacity measured")
	}
	for _, share := range []float64{0.5, 0.8} {
		for _, p := range degradePolicies {
			b.Run(fmt.Sprintf("scenario=steady%.0f/policy=%s", share*100, p.name), func(b *testing.B) {
				// Step 2: producers paced to a share of the capacity: nothing to shed.
				run := startDegradeRun(b, KindRate(KindForward, degradeReceiverRate), p.policy)
				defer run.close()
				run.drive(degradeProducers, func(time.Duration) float64 { return share * capacity }, *degradeLength)
				run.report(b)
			})
		}
	}
	for _, p := range degradePolicies {
		b.Run("scenario=burst/policy="+p.name, func(b *testing.B) {
			// Step 3: 2 s at 3x capacity, then 5 s at half of it. Reported: what was
			// delivered during the burst as a share of the capacity, and how long after
			// the burst entries were still dropped.
			run := startDegradeRun(b, KindRate(KindForward, degradeReceiverRate), p.policy)
			defer run.close()
			burst := *degradeLength / 5 // 2 s, then 5 s, by default
			run.drive(degradeProducers, func(t time.Duration) float64 {
				if t < burst {
					return 3 * capacity
				}
				return capacity / 2
			}, burst*7/2)
			run.report(b)
			var inBurst, lastDrop float64
			for _, s := range run.series {
				if s.at <= burst {
					inBurst += s.delivered * seriesStep.Seconds()
				}
				if s.dropped > 0 {
					lastDrop = s.at.Seconds()
				}
			}
			b.ReportMetric(inBurst/(capacity*burst.Seconds()), "burst-delivered/capacity")
			b.ReportMetric(max(0, lastDrop-burst.Seconds())*1000, "drops-after-burst-ms")
			if *degradeSeries != "" && p.policy == fluentcore.DegradeAdaptive {
				run.writeSeries(b, *degradeSeries, capacity)
			}
		})
	}
	for _, p := range degradePolicies {
		b.Run("scenario=skew/policy="+p.name, func(b *testing.B) {
			// Step 4: one message flat out, and 200 rare ones at 2 a second each. The
			// receiver (a clock receiver, which decodes every entry) counts the rare entries
			// that arrive, by their RareMark; rare-lost is those logged less those.
			run := startDegradeRun(b, KindRate(KindClock, degradeReceiverRate), p.policy)
			defer run.close()
			var rare atomic.Int64
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				tick := time.NewTicker(5 * time.Millisecond) // 200 keys x 2/s: one every 2.5 ms
				defer tick.Stop()
				for i := 0; ; {
					select {
					case <-stop:
						return
					case <-tick.C:
					}
					for range 2 {
						rare.Add(1)
						run.logger.Info(fmt.Sprintf("%s%d", RareMark, i%200), ContextFields()...)
						i++
					}
				}
			}()
			run.drive(4, nil, *degradeLength)
			close(stop)
			wg.Wait()
			run.report(b)
			delivered := int64(run.core.Stats().Info.Delivered)
			r := run.recv.(*remote)
			others, marked := r.Marked()
			// The receiver reads at its rate: wait until it has what was delivered, or has
			// taken nothing for the quiet period.
			for last, at := others, time.Now(); others < delivered && time.Since(at) < *deliveryQuiet; {
				time.Sleep(10 * time.Millisecond)
				if others, marked = r.Marked(); others != last {
					last, at = others, time.Now()
				}
			}
			b.ReportMetric(float64(delivered-others), "lost")
			b.ReportMetric(float64(rare.Load()), "rare-logged")
			b.ReportMetric(float64(rare.Load()-marked), "rare-lost")
		})
	}
	for _, p := range degradePolicies {
		b.Run("scenario=slow-receiver/policy="+p.name, func(b *testing.B) {
			// Step 5: a receiver that takes 200 k info entries a second; flat-out info,
			// and an err entry every 5 ms whose latency the receiver clocks.
			run := startDegradeRun(b, KindRate(KindClock, slowReceiverRate), p.policy)
			defer run.close()
			stop := make(chan struct{})
			var errs atomic.Int64
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				tick := time.NewTicker(errEvery)
				defer tick.Stop()
				for {
					select {
					case <-stop:
						return
					case <-tick.C:
					}
					run.logger.Error(Message, ContextFields()...)
					errs.Add(1)
				}
			}()
			run.drive(16, nil, *degradeLength)
			close(stop)
			wg.Wait()
			run.report(b)
			r := run.recv.(*remote)
			got := r.Wait(errs.Load(), *deliveryQuiet, deliveryMax)
			lat, _ := r.Latencies()
			l := &latencies{ns: make([]int64, len(lat))}
			for i, d := range lat {
				l.ns[i] = d.Nanoseconds()
			}
			b.ReportMetric(l.quantile(0.99), "err-p99-ns")
			b.ReportMetric(float64(errs.Load()-got), "err-lost")
			b.ReportMetric(run.deliveredRate/slowReceiverRate, "delivered/receiver")
		})
	}
}

// degradeRun is one scenario's core, receiver and tallies.
type degradeRun struct {
	core   *fluentcore.Core
	logger *zap.Logger
	call   func() // what each producer calls; nil: LogFields(logger)
	recv   Counter
	series []degradeSample
	start  time.Time
	length time.Duration

	offeredRate, deliveredRate float64
}

// seriesStep is the bucket of a run's series.
const seriesStep = 100 * time.Millisecond

// degradeSample is one 100 ms bucket of a run: info entries offered, delivered, dropped
// (any reason) and dropped as queue_full, per second.
type degradeSample struct {
	at                                    time.Duration // end of the bucket, from the start
	offered, delivered, dropped, queueFul float64
}

func startDegradeRun(b *testing.B, kind string, policy fluentcore.DegradePolicy) *degradeRun {
	r := mustStartReceiver(b, kind)
	core := newFluentcore(r.Addr(), func(c *fluentcore.Config) {
		c.Degrade.Policy = policy
		c.Spill.Fallback = io.Discard
	})
	run := &degradeRun{core: core, logger: zap.New(core), recv: r}
	// Connected before the clock starts, as a service that has been running a while: the
	// scenarios are about load, not about the first dial.
	for range 100 {
		LogFields(run.logger)
	}
	if err := core.Sync(); err != nil {
		b.Fatal(err)
	}
	return run
}

func (r *degradeRun) close() {
	_ = r.core.Close()
	_ = r.recv.Close()
}

// drive logs from producers goroutines for length; rate, if set, is the total rate to offer
// at each moment (entries a second), and nil is flat out. It samples the info stream every
// 100 ms.
func (r *degradeRun) drive(producers int, rate func(time.Duration) float64, length time.Duration) {
	var tokens atomic.Int64 // paced: calls the producers may still make
	paced := &tokens
	if rate == nil {
		paced = nil
	}
	call := r.call
	if call == nil {
		call = func() { LogFields(r.logger) }
	}
	stop := startCallers(producers, paced, call)
	r.start, r.length = time.Now(), length
	last, lastAt := r.core.Stats().Info, time.Duration(0)
	credit := 0.0
	tick := time.NewTicker(time.Millisecond)
	for t := time.Duration(0); t < length; t = time.Since(r.start) {
		<-tick.C
		if rate != nil {
			// Tokens the producers could not use do not pile up: a rate they cannot
			// reach is offered as fast as they can, and no faster afterwards.
			credit += rate(t) * time.Millisecond.Seconds()
			whole := math.Floor(credit)
			credit -= whole
			if limit := int64(rate(t)/100) + 1; tokens.Add(int64(whole)) > limit { // 10 ms
				tokens.Store(limit)
			}
		}
		if t-lastAt >= seriesStep {
			st := r.core.Stats().Info
			d := (t - lastAt).Seconds()
			r.series = append(r.series, degradeSample{
				at:        t,
				offered:   float64(st.Entries-last.Entries) / d,
				delivered: float64(st.Delivered-last.Delivered) / d,
				dropped:   float64(st.DroppedTotal()-last.DroppedTotal()) / d,
				queueFul:  float64(st.Dropped["queue_full"]-last.Dropped["queue_full"]) / d,
			})
			last, lastAt = st, t
		}
	}
	tick.Stop()
	stop()
}

// startProducers starts goroutines that call LogFields until stop is called (stop waits
// for them): flat out if tokens is nil, else each call taking one of tokens.
func startProducers(logger *zap.Logger, goroutines int, tokens *atomic.Int64) (stop func()) {
	return startCallers(goroutines, tokens, func() { LogFields(logger) })
}

// startCallers is startProducers with the call to make.
func startCallers(goroutines int, tokens *atomic.Int64, call func()) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				if tokens != nil && tokens.Add(-1) < 0 {
					tokens.Add(1)
					time.Sleep(200 * time.Microsecond)
					continue
				}
				call()
			}
		}()
	}
	return func() {
		close(done)
		wg.Wait()
	}
}

// report reports the run's figures and returns the delivered info entries a second.
func (r *degradeRun) report(b *testing.B) float64 {
	elapsed := time.Since(r.start)
	_ = r.core.Sync()
	st := r.core.Stats().Info
	r.offeredRate = float64(st.Entries) / elapsed.Seconds()
	r.deliveredRate = float64(st.Delivered) / elapsed.Seconds()
	b.ReportMetric(r.offeredRate, "offered/s")
	b.ReportMetric(r.deliveredRate, "delivered/s")
	b.ReportMetric(float64(st.DroppedTotal())/float64(max(st.Entries, 1)), "dropped-frac")
	b.ReportMetric(float64(st.Dropped["queue_full"])/float64(max(st.Entries, 1)), "queue-full-frac")
	return r.deliveredRate
}

// writeSeries writes the run's series as CSV: seconds, then offered, delivered and shed
// (dropped) entries a second, and the capacity measured in step 1, for cmd/degradeplot.
func (r *degradeRun) writeSeries(b *testing.B, path string, capacity float64) {
	var sb strings.Builder
	sb.WriteString("t,offered,delivered,shed,queue_full,capacity\n")
	for _, s := range r.series {
		fmt.Fprintf(&sb, "%.1f,%.0f,%.0f,%.0f,%.0f,%.0f\n", s.at.Seconds(), s.offered, s.delivered, s.dropped-s.queueFul, s.queueFul, capacity)
	}
	if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
		b.Fatal(err)
	}
}
