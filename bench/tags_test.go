package bench

import (
	"flag"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore"
	"github.com/fluentcore/fluentcore/forwardtest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// BenchmarkTags calls Core.Write flat out from RunParallel's goroutines (64 per GOMAXPROCS),
// as BenchmarkCoreWrite does (so allocs/op counts our code only), degrade off, the
// goroutines' cores spread over tags logger tags (core.With(fluentcore.Tag(…)), goroutine g
// on tag g mod tags); tags=0 is the core without logger tags, every entry under the stream's
// tag. Flush and delivery are inside the timer. Target (issue 28): tags=8 delivers at least
// 0.9 × tags=1's events/s, with 0 allocs/op.
func BenchmarkTags(b *testing.B) {
	for _, tags := range []int{0, 1, 8} {
		b.Run(fmt.Sprintf("tags=%d", tags), func(b *testing.B) {
			r := mustStartReceiver(b, KindForward)
			core := newFluentcore(r.Addr(), func(c *fluentcore.Config) { c.Degrade.Policy = fluentcore.DegradeOff })
			fields := ContextFields()
			cores := []zapcore.Core{core}
			if tags > 0 {
				cores = cores[:0]
				for i := range tags {
					cores = append(cores, core.With([]zapcore.Field{fluentcore.Tag(fmt.Sprint("t", i))}))
				}
			}
			var next atomic.Int64
			cl := &client{
				log:     func() {},
				finish:  core.Sync,
				refused: func() uint64 { return core.Stats().Info.DroppedTotal() },
				recv:    r,
				extra: func(b *testing.B, calls int64) {
					st := core.Stats().Info
					b.ReportMetric(float64(st.Delivered)/max(1, float64(st.SentBatches)), "entries/frame")
				},
				close: func() {
					_ = core.Close()
					_ = r.Close()
				},
			}
			measure(b, cl, func(b *testing.B, _ func()) {
				b.SetParallelism(parallelism)
				b.RunParallel(func(pb *testing.PB) {
					c := cores[int(next.Add(1)-1)%len(cores)]
					for pb.Next() {
						_ = c.Write(zapcore.Entry{Level: zapcore.InfoLevel, Time: time.Now(), Message: Message}, fields)
					}
				})
			})
		})
	}
}

var tagFloodLength = flag.Duration("bench.tagflood", 5*time.Second, "how long BenchmarkTagFlood and BenchmarkTagCardinality log")

// BenchmarkTagFlood (issue 28, target 2): one logger tag floods at 5 × what the receiver
// takes (an in-process forwardtest receiver reading tagFloodRate entries a second) while
// seven other tags log the same message at 1 % of it each, for -bench.tagflood; each degrade
// policy in turn. Reported: the seven's entries (rare-entries, the core's count), those
// dropped (rare-dropped) and those delivered that the receiver does not have; the flood's
// offered and delivered rates as shares of the receiver's. Target: with the default policy
// every entry of the seven is delivered (rare-dropped 0). Timed by the clock, not b.N: run
// it with -benchtime 1x.
func BenchmarkTagFlood(b *testing.B) {
	const rate = tagFloodRate
	for _, p := range degradePolicies {
		b.Run("policy="+p.name, func(b *testing.B) {
			r, err := forwardtest.Start(forwardtest.CountOnly(), forwardtest.WithReadRate(rate))
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			core := fluentcore.New(fluentcore.Config{Addr: r.Addr(), Tag: "bench", Degrade: fluentcore.DegradeConfig{Policy: p.policy}})
			defer core.Close()
			logger := zap.New(core)
			flood := logger.With(fluentcore.Tag("flood"))
			var rare [7]*zap.Logger
			for i := range rare {
				rare[i] = logger.With(fluentcore.Tag(fmt.Sprint("rare", i)))
			}
			var floodLogged, rareLogged atomic.Int64
			stop := make(chan struct{})
			var wg sync.WaitGroup
			// pace calls f every millisecond with the calls due at perSecond since start.
			pace := func(perSecond float64, f func(n int)) {
				defer wg.Done()
				start, done := time.Now(), 0 // before the ticker: no tick is older
				tick := time.NewTicker(time.Millisecond)
				defer tick.Stop()
				for {
					select {
					case <-stop:
						return
					case now := <-tick.C:
						if due := int(now.Sub(start).Seconds() * perSecond); due > done {
							f(due - done)
							done = due
						}
					}
				}
			}
			const floods = 4
			for range floods {
				wg.Add(1)
				go pace(5*rate/floods, func(n int) {
					for range n {
						flood.Info("request handled", zap.String("route", "/orders"), zap.Int("status", 200))
					}
					floodLogged.Add(int64(n))
				})
			}
			for _, l := range rare {
				wg.Add(1)
				go pace(rate/100, func(n int) {
					for range n {
						l.Info("request handled", zap.String("route", "/audit"), zap.Int("status", 200))
					}
					rareLogged.Add(int64(n))
				})
			}
			time.Sleep(*tagFloodLength)
			close(stop)
			wg.Wait()
			_ = core.Sync()
			st := core.Stats().Info
			if err := r.WaitFor(func(s forwardtest.Stats) bool { return s.Entries >= int64(st.Delivered) }, time.Minute); err != nil {
				b.Fatal(err)
			}
			got := r.TagCounts()
			var rareEntries, rareDropped, rareDelivered, rareGot int64
			for i := range rare {
				tag := fmt.Sprintf("bench.rare%d.info", i)
				ts := st.Tags[tag]
				rareEntries, rareDropped, rareDelivered = rareEntries+int64(ts.Entries), rareDropped+int64(ts.Dropped), rareDelivered+int64(ts.Delivered)
				rareGot += got[tag]
			}
			if rareDropped > 0 {
				b.Logf("rare entries dropped: the stream's drops %v; by tag %+v", st.Dropped, st.Tags)
			}
			secs := tagFloodLength.Seconds()
			b.ReportMetric(float64(rareLogged.Load()), "rare-logged")
			b.ReportMetric(float64(rareEntries), "rare-entries")
			b.ReportMetric(float64(rareDropped), "rare-dropped")
			b.ReportMetric(float64(rareDelivered-rareGot), "rare-delivered-not-received")
			b.ReportMetric(float64(floodLogged.Load())/secs/rate, "flood-offered/capacity")
			b.ReportMetric(float64(got["bench.flood.info"])/secs/rate, "flood-delivered/capacity")
			b.ReportMetric(float64(st.Tags["bench.flood.info"].Dropped), "flood-dropped")
		})
	}
}

// tagFloodRate is BenchmarkTagFlood's receiver, in entries a second.
const tagFloodRate = 100_000

// BenchmarkTagCardinality (issue 28, target 3): 10,000 distinct logger names
// (Config.Tags.FromName, logger.Named) logged round robin from 16 goroutines for
// -bench.tagflood, into a receiver that takes all it gets. Reported: the tags the receiver
// saw (Tags.Max, 64, and the stream's own), the entries past the cap (TagOverflow), the
// entries not accounted for (entries - delivered - dropped, after Sync: target 0), and the
// most heap in use above what it was before the first call, sampled every 10 ms (the info
// and err budgets are 12 MiB). Timed by the clock: run it with -benchtime 1x.
func BenchmarkTagCardinality(b *testing.B) {
	r, err := forwardtest.Start(forwardtest.CountOnly())
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	core := fluentcore.New(fluentcore.Config{Addr: r.Addr(), Tag: "bench", Tags: fluentcore.TagsConfig{FromName: true}})
	defer core.Close()
	logger := zap.New(core)
	const names = 10_000
	loggers := make([]*zap.Logger, names)
	for i := range loggers {
		loggers[i] = logger.Named(fmt.Sprint("user", i))
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	var peak atomic.Uint64
	stop := make(chan struct{})
	var wg, sampler sync.WaitGroup
	sampler.Add(1)
	go func() {
		defer sampler.Done()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				if ms.HeapInuse > peak.Load() {
					peak.Store(ms.HeapInuse)
				}
			}
		}
	}()
	var logged atomic.Int64
	var next atomic.Int64
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := int64(0)
			for {
				select {
				case <-stop:
					logged.Add(n)
					return
				default:
				}
				for range 64 {
					loggers[next.Add(1)%names].Info("request handled", zap.Int("status", 200))
				}
				n += 64
			}
		}()
	}
	time.Sleep(*tagFloodLength)
	close(stop)
	wg.Wait()
	sampler.Wait()
	_ = core.Sync()
	st := core.Stats().Info
	if err := r.WaitFor(func(s forwardtest.Stats) bool { return s.Entries >= int64(st.Delivered) }, time.Minute); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(logged.Load()), "logged")
	b.ReportMetric(float64(len(r.TagCounts())), "tags-received")
	b.ReportMetric(float64(st.TagOverflow), "overflow")
	b.ReportMetric(float64(int64(st.Entries)-int64(st.Delivered)-int64(st.DroppedTotal())), "unaccounted")
	b.ReportMetric(float64(logged.Load()-int64(st.Entries)), "not-entered")
	b.ReportMetric(float64(peak.Load()-min(base, peak.Load()))/(1<<20), "heap-peak-MiB")
	runtime.GC()
	runtime.ReadMemStats(&ms)
	b.ReportMetric((float64(ms.HeapInuse)-float64(base))/(1<<20), "heap-retained-MiB")
}
