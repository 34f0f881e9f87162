package fluentcore_test

import (
	"bytes"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore"
	"github.com/fluentcore/fluentcore/forwardtest"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// The logger tags cost the room their entries take, not a batch each: however many tags
// log, the budget is bytes. These tests run the default buffer and batch sizes against a
// healthy receiver and want every entry delivered.

// budgetCore is a core with the default budget, batch size and flush interval.
func budgetCore(t *testing.T, addr string, mods ...func(*fluentcore.Config)) *fluentcore.Core {
	t.Helper()
	cfg := fluentcore.Config{
		Addr:    addr,
		Tag:     "shop",
		Level:   zapcore.DebugLevel,
		Metrics: fluentcore.MetricsConfig{Registerer: prometheus.NewRegistry()},
	}
	for _, mod := range mods {
		mod(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	core := fluentcore.New(cfg)
	t.Cleanup(func() { _ = core.Close() })
	return core
}

// allDelivered syncs core and waits until the receiver has want entries, then checks that
// the stats count want entries, all delivered, none dropped.
func allDelivered(t *testing.T, core *fluentcore.Core, r *forwardtest.Receiver, want int) {
	t.Helper()
	_ = core.Sync()
	st := core.Stats()
	var dropped uint64
	for _, s := range []fluentcore.StreamStats{st.Info, st.Err} {
		for _, v := range s.Dropped {
			dropped += v
		}
	}
	if dropped != 0 || st.Info.Spilled+st.Err.Spilled != 0 {
		t.Fatalf("%d of %d entries dropped (info %v, err %v), %d spilled", dropped, want, st.Info.Dropped, st.Err.Dropped, st.Info.Spilled+st.Err.Spilled)
	}
	if _, err := r.WaitForEntries(want, 20*time.Second); err != nil {
		t.Fatalf("receiver: %v (stats: %d delivered)", err, st.Info.Delivered+st.Err.Delivered)
	}
	if got := r.Len(); got != want {
		t.Fatalf("receiver has %d entries, want %d", got, want)
	}
}

// 64 tags at 20 k entries a second, in bursts of 100 from 4 goroutines, deliver every entry,
// as one tag does.
func TestManyTagsAtModestLoadDropNothing(t *testing.T) {
	for _, tags := range []int{1, 64} {
		t.Run(fmt.Sprint(tags, " tags"), func(t *testing.T) {
			r := forwardtest.NewReceiver(t, forwardtest.CountOnly())
			core := budgetCore(t, r.Addr())
			logger := zap.New(core)
			loggers := make([]*zap.Logger, tags)
			for i := range loggers {
				loggers[i] = logger.With(fluentcore.Tag(fmt.Sprintf("t%02d", i)))
			}
			// 20 k entries, a second at 20 k/s; a burst's entries spread over the tags.
			const goroutines, bursts, burst = 4, 50, 100
			var wg sync.WaitGroup
			for g := range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					tick := time.NewTicker(20 * time.Millisecond) // 5 k entries/s per goroutine
					defer tick.Stop()
					for range bursts {
						for i := range burst {
							loggers[(g*burst+i)%tags].Info("burst entry", zap.Int("g", g), zap.Int("i", i), zap.String("pad", "some text of an ordinary log line"))
						}
						<-tick.C
					}
				}()
			}
			wg.Wait()
			allDelivered(t, core, r, goroutines*bursts*burst)
		})
	}
}

// 40 loggers that log one entry each at start-up deliver all 40.
func TestFortyOneEntryLoggersAtStartUpDropNothing(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	core := budgetCore(t, r.Addr())
	logger := zap.New(core)
	for i := range 40 {
		logger.With(fluentcore.Tag(fmt.Sprintf("component%02d", i))).Info("started", zap.Int("i", i))
	}
	allDelivered(t, core, r, 40)
	if n := len(r.TagCounts()); n != 40 {
		t.Errorf("%d tags arrived, want 40", n)
	}
}

// One goroutine logging 1000 entries on each of 16 tags, the tags taken in turn, delivers
// every entry, each tag's in order.
func TestSixteenTagsFromOneGoroutineDropNothing(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	core := budgetCore(t, r.Addr())
	logger := zap.New(core)
	const tags, each = 16, 1000
	loggers := make([]*zap.Logger, tags)
	for i := range loggers {
		loggers[i] = logger.With(fluentcore.Tag(fmt.Sprintf("t%02d", i)))
	}
	for i := range each {
		for _, l := range loggers {
			l.Info("entry", zap.Int("i", i))
		}
	}
	allDelivered(t, core, r, tags*each)
	for tag, entries := range r.ByTag() {
		if len(entries) != each {
			t.Errorf("%s: %d entries, want %d", tag, len(entries), each)
		}
		for i, e := range entries {
			if v, _ := e.Record["i"].(int64); v != int64(i) {
				t.Fatalf("%s: entry %d has i=%v: out of order", tag, i, e.Record["i"])
			}
		}
	}
}

// lineCounter counts the lines written to it (Spill.Fallback writes one per entry).
type lineCounter struct{ n atomic.Int64 }

func (w *lineCounter) Write(p []byte) (int, error) {
	w.n.Add(int64(bytes.Count(p, []byte{'\n'})))
	return len(p), nil
}

// While one named logger floods the info stream of a receiver that takes 40 k entries a
// second, seven quiet named loggers' err entries are all delivered, none to Spill.Fallback,
// and their info entries too: the err stream delivers while its receiver takes entries,
// whatever the info stream and the tags do. Twenty runs (two with -short).
func TestQuietTagsErrDeliveredUnderAnInfoFlood(t *testing.T) {
	runs := 20
	if testing.Short() {
		runs = 2
	}
	for run := range runs {
		if !quietTagsUnderAFlood(t, run) {
			return
		}
	}
}

func quietTagsUnderAFlood(t *testing.T, run int) bool {
	t.Helper()
	const (
		quiet      = 7
		infoEach   = 400
		errEach    = 20
		floodFor   = 2 * time.Second
		floodProcs = 4
	)
	r := forwardtest.NewReceiver(t, forwardtest.CountOnly(), forwardtest.WithReadRate(40000))
	var fallback lineCounter
	core := budgetCore(t, r.Addr(), func(c *fluentcore.Config) {
		c.Tags.FromName = true
		c.Spill.Fallback = &fallback
	})
	logger := zap.New(core)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	flood := logger.Named("flood")
	for range floodProcs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				flood.Info("flood entry", zap.Int("i", i), zap.String("pad", "an ordinary line of a busy service"))
			}
		}()
	}
	var quietWG sync.WaitGroup
	for q := range quiet {
		quietWG.Add(1)
		go func() {
			defer quietWG.Done()
			l := logger.Named(fmt.Sprintf("quiet%d", q))
			// infoEach + errEach entries paced over the flood: one every floodFor/420.
			tick := time.NewTicker(floodFor / (infoEach + errEach))
			defer tick.Stop()
			for i := range infoEach + errEach {
				if i%((infoEach+errEach)/errEach) == 0 {
					l.Error("quiet err", zap.Int("i", i))
				} else {
					l.Info("quiet info", zap.Int("i", i))
				}
				<-tick.C
			}
		}()
	}
	quietWG.Wait()
	close(stop)
	wg.Wait()
	_ = core.Sync()
	wantErr := quiet * errEach
	wantInfo := quiet * infoEach
	tagWant := func(counts map[string]int64) (errs, infos int64) {
		for q := range quiet {
			errs += counts[fmt.Sprintf("shop.quiet%d.err", q)]
			infos += counts[fmt.Sprintf("shop.quiet%d.info", q)]
		}
		return errs, infos
	}
	err := r.WaitFor(func(forwardtest.Stats) bool {
		errs, infos := tagWant(r.TagCounts())
		return errs+fallback.n.Load() >= int64(wantErr) && infos >= int64(wantInfo)
	}, 30*time.Second)
	errs, infos := tagWant(r.TagCounts())
	st := core.Stats()
	if fallback.n.Load() != 0 || errs != int64(wantErr) {
		t.Errorf("run %d: %d of %d err entries delivered, %d to Spill.Fallback (err stats: %d spilled, dropped %v)", run, errs, wantErr, fallback.n.Load(), st.Err.Spilled, st.Err.Dropped)
		return false
	}
	if err != nil || infos != int64(wantInfo) {
		t.Errorf("run %d: %d of %d quiet info entries delivered (info dropped %v): %v", run, infos, wantInfo, st.Info.Dropped, err)
		return false
	}
	return true
}

// Err entries of several tags share batches, each sent as a frame per tag under its own
// ack token: every entry is delivered and counted once, also when the acks are withheld
// and the frames sent again, and each tag's entries keep their order.
func TestErrFramesOfSharedBatchesAreEachAcked(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	var fallback lineCounter
	core := newTestCore(t, r.Addr(), nil, func(c *fluentcore.Config) {
		c.Timeouts.Ack = 200 * time.Millisecond
		c.Spill.After = time.Minute
		c.Spill.Fallback = &fallback
	})
	logger := zap.New(core)
	// Entries per tag in the rounds with and without acks. While no ack comes, a frame holds
	// its whole batch, and the err sender seals a batch as soon as it is free: the round
	// without acks logs fewer entries than the err stream has batches, so that it fits
	// however the entries are sealed.
	const tags, each, withheld = 8, 50, 1
	loggers := make([]*zap.Logger, tags)
	for i := range loggers {
		loggers[i] = logger.With(fluentcore.Tag(fmt.Sprintf("t%d", i)))
	}
	round := func(k, each int) {
		for i := range each {
			for _, l := range loggers {
				l.Error("err", zap.Int("round", k), zap.Int("i", i))
			}
		}
	}
	delivered := func(n uint64) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for core.Stats().Err.Delivered < n && time.Now().Before(deadline) {
			_ = core.Sync()
		}
		st := core.Stats().Err
		if st.Delivered != n || st.Spilled != 0 || fallback.n.Load() != 0 {
			t.Fatalf("err delivered %d, want %d; spilled %d, %d to the fallback", st.Delivered, n, st.Spilled, fallback.n.Load())
		}
	}
	round(0, each)
	delivered(tags * each)
	// Few enough entries to fit the err buffer while no ack comes: none is spilled for want
	// of room, and each frame is sent again after Timeouts.Ack until its ack comes.
	r.SetAckFault(forwardtest.AckWithhold)
	round(1, withheld)
	if err := r.WaitFor(func(s forwardtest.Stats) bool { return s.Entries >= tags*(each+withheld) }, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	r.SetAckFault(forwardtest.AckOK)
	delivered(tags * (each + withheld))
	for tag, entries := range r.ByTag() {
		next := [2]int64{}
		for _, e := range entries {
			k, _ := e.Record["round"].(int64)
			i, _ := e.Record["i"].(int64)
			if i == next[k] {
				next[k]++
			} else if i > next[k] {
				t.Fatalf("%s: round %d entry %d came before %d", tag, k, i, next[k])
			}
		}
		if next != [2]int64{each, withheld} {
			t.Errorf("%s: rounds reached %v, want %d and %d", tag, next, each, withheld)
		}
	}
	if st := core.Stats().Err; st.Pending != 0 {
		t.Errorf("err pending %d after every entry was acked", st.Pending)
	}
}
