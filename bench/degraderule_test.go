package bench

import (
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore"
	"github.com/fluentcore/fluentcore/forwardtest"
	"go.uber.org/zap"
)

// The degrade rule: the default policy sheds an entry only when, admitted, it or a later one
// would not have found room. Each scenario runs the default (DegradeAdaptive) and
// DegradeOff back to back in one round (the flat-out ones in short turns, alternated), in
// an order that alternates from round to round (-count), and reports both and their ratio,
// so that a ratio is measured in one run on the same machine state. They are timed by the
// clock, not by b.N: run them with -benchtime 1x.
//
//	cd bench && go test -run '^$' -bench '^BenchmarkDegradeRule$' -benchtime 1x -count 6 .
func BenchmarkDegradeRule(b *testing.B) {
	pair := func(b *testing.B, run func(b *testing.B, policy fluentcore.DegradePolicy) ruleResult) (adaptive, off ruleResult) {
		order := []fluentcore.DegradePolicy{fluentcore.DegradeAdaptive, fluentcore.DegradeOff}
		if round(b)%2 == 1 { // every other round of this scenario (-count)
			order[0], order[1] = order[1], order[0]
		}
		if !ruleWarm {
			// The process's first run is slower than any after it (its heap grows, its
			// pages fault in), and it would fall on the policy that goes first: a run of
			// the first scenario, its result not kept, before either is measured.
			ruleWarm = true
			run(b, fluentcore.DegradeOff)
		}
		for _, p := range order {
			r := run(b, p)
			if p == fluentcore.DegradeAdaptive {
				adaptive = r
			} else {
				off = r
			}
		}
		b.ReportMetric(float64(adaptive.dropped), "adaptive-dropped")
		b.ReportMetric(float64(off.dropped), "off-dropped")
		b.ReportMetric(float64(adaptive.delivered)/float64(max(off.delivered, 1)), "delivered-ratio")
		return adaptive, off
	}

	// 1 and 2: a burst logged flat out, at a receiver that reads 20 k entries/s through a
	// receive buffer of a fixed size (ruleReadBuffer): 80 % of the info budget (nothing may
	// be dropped), and 4× the budget (delivered against off).
	for _, share := range []float64{0.8, 4} {
		b.Run(fmt.Sprintf("scenario=burst%.0f%%", share*100), func(b *testing.B) {
			pair(b, func(b *testing.B, p fluentcore.DegradePolicy) ruleResult {
				return burstRun(b, KindReadBuffer(KindRate(KindForward, ruleReceiverRate), ruleReadBuffer), p, share, nil)
			})
		})
	}
	// 3: the same 4× burst at a receiver that reads eagerly and processes slowly: it queues
	// up to eagerQueue bytes of what it read and works through them at the same rate, as
	// fluentd's in_forward does in front of a slow output.
	b.Run("scenario=eager-burst400%", func(b *testing.B) {
		pair(b, func(b *testing.B, p fluentcore.DegradePolicy) ruleResult {
			return burstRun(b, "", p, 4, startEager)
		})
	})
	// 4: steady loads at 50 % and 80 % of what the pipeline carries flat out into a receiver
	// that takes all it gets (measured with DegradeOff first), alone and with a CPU-bound
	// neighbour process on the same cores. Nothing may be dropped.
	// 4b: bursty pacing at 30, 50 and 80 % of the same capacity: each of 8 or 64 goroutines
	// logs burstEntries entries at once, then sleeps until its share of the pace is due. The
	// bursts are small against the buffer: nothing may be dropped either.
	for _, neighbour := range []bool{false, true} {
		var capacity float64
		name := "alone"
		if neighbour {
			name = "neighbour"
		}
		b.Run("scenario=capacity/load="+name, func(b *testing.B) {
			stop := startNeighbour(b, neighbour)
			defer stop()
			run := startDegradeRun(b, KindForward, fluentcore.DegradeOff)
			defer run.close()
			run.drive(16, nil, scaled(2*time.Second))
			capacity = run.report(b)
		})
		for _, share := range []float64{0.5, 0.8} {
			b.Run(fmt.Sprintf("scenario=steady%.0f%%/load=%s", share*100, name), func(b *testing.B) {
				stop := startNeighbour(b, neighbour)
				defer stop()
				pair(b, func(b *testing.B, p fluentcore.DegradePolicy) ruleResult {
					run := startDegradeRun(b, KindForward, p)
					defer run.close()
					run.drive(degradeProducers, func(time.Duration) float64 { return share * capacity }, scaled(5*time.Second))
					run.report(b)
					st := run.core.Stats().Info
					b.ReportMetric(run.offeredRate, p.String()+"-offered/s")
					return ruleResult{dropped: st.DroppedTotal(), delivered: st.Delivered}
				})
			})
		}
		for _, g := range []int{8, 64} {
			for _, share := range []float64{0.3, 0.5, 0.8} {
				b.Run(fmt.Sprintf("scenario=bursty%.0f%%/goroutines=%d/load=%s", share*100, g, name), func(b *testing.B) {
					if capacity == 0 {
						b.Skip("the bursty loads are shares of the capacity, measured first: run scenario=capacity too")
					}
					stop := startNeighbour(b, neighbour)
					defer stop()
					pair(b, func(b *testing.B, p fluentcore.DegradePolicy) ruleResult {
						run := startDegradeRun(b, KindForward, p)
						defer run.close()
						start := time.Now()
						driveBursts(run.logger, g, share*capacity, scaled(3*time.Second))
						_ = run.core.Sync()
						st := run.core.Stats().Info
						b.ReportMetric(float64(st.Entries)/time.Since(start).Seconds(), p.String()+"-offered/s")
						return ruleResult{dropped: st.DroppedTotal(), delivered: st.Delivered}
					})
				})
			}
		}
	}
	// 6: flat out from 1, 8, 16, 256 and 1024 goroutines into a receiver that takes all it
	// gets, the two policies taking turns of ruleTurn within the round (alternated): delivered
	// against off, and the share of calls the default drops as queue_full.
	for _, g := range []int{1, 8, 16, 256, 1024} {
		b.Run(fmt.Sprintf("scenario=flat-out/goroutines=%d", g), func(b *testing.B) {
			adaptive, off := alternated(b, g, scaled(3*time.Second))
			b.ReportMetric(float64(adaptive.dropped), "adaptive-dropped")
			b.ReportMetric(float64(off.dropped), "off-dropped")
			b.ReportMetric(float64(adaptive.delivered)/float64(max(off.delivered, 1)), "delivered-ratio")
			b.ReportMetric(float64(adaptive.queueFull)/float64(max(adaptive.offered, 1)), "adaptive-queue-full-frac")
		})
	}
	// 6c: flat out from 8 goroutines with one CPU (GOMAXPROCS 1, as in a one-CPU container;
	// the receiver shares it): the writers must leave the sender its share under either
	// policy, so that degrade off delivers nearly what the default does.
	b.Run("scenario=flat-out-one-cpu/goroutines=8", func(b *testing.B) {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
		pair(b, func(b *testing.B, p fluentcore.DegradePolicy) ruleResult {
			run := startDegradeRun(b, KindForward, p)
			defer run.close()
			run.drive(8, nil, scaled(3*time.Second))
			run.report(b)
			st := run.core.Stats().Info
			return ruleResult{dropped: st.DroppedTotal(), delivered: st.Delivered}
		})
	})
	// 6b: flat out from 8 goroutines each, the default and degrade off side by side in one
	// process, each with its own receiver. The two share the cores at the same moments, so
	// the machine's drift falls on both, and the ratio of what each delivered is what the
	// policy costs; the pairs of 6 see the machine at two moments. Each round also runs a
	// control, degrade off against itself the same way, just before or after (in turns):
	// how far from 1 the ratio strays with no policy between the two, which is the noise
	// the default's ratio is read against.
	b.Run("scenario=flat-out-side-by-side/goroutines=8", func(b *testing.B) {
		var ratio, control float64
		if round(b)%2 == 0 {
			ratio, control = sideBySide(b, fluentcore.DegradeAdaptive, false), sideBySide(b, fluentcore.DegradeOff, true)
		} else {
			control, ratio = sideBySide(b, fluentcore.DegradeOff, false), sideBySide(b, fluentcore.DegradeAdaptive, true)
		}
		b.ReportMetric(ratio, "delivered-ratio")
		b.ReportMetric(control, "control-ratio")
	})
	// 5: start-up, logging at 5 % of capacity from the first call: a new core, not yet
	// connected, at a receiver that takes all it gets. Nothing may be dropped.
	b.Run("scenario=startup5%", func(b *testing.B) {
		pair(b, func(b *testing.B, p fluentcore.DegradePolicy) ruleResult {
			r := mustStartReceiver(b, KindForward)
			defer r.Close()
			core := newFluentcore(r.Addr(), func(c *fluentcore.Config) { c.Degrade.Policy = p })
			defer core.Close()
			run := &degradeRun{core: core, logger: zap.New(core), recv: r}
			run.drive(degradeProducers, func(time.Duration) float64 { return startupRate }, scaled(2*time.Second))
			_ = core.Sync()
			st := core.Stats().Info
			return ruleResult{dropped: st.DroppedTotal(), delivered: st.Delivered}
		})
	})
	// 7: skew: one Info message flat out from 4 goroutines, 200 rare ones at 2/s each, and a
	// Warn message at 2 k/s, into a receiver that decodes every entry and counts the rare and
	// Warn ones (they carry RareMark). Every one of them must arrive.
	b.Run("scenario=skew-warn", func(b *testing.B) {
		pair(b, func(b *testing.B, p fluentcore.DegradePolicy) ruleResult {
			run := startDegradeRun(b, KindRate(KindClock, degradeReceiverRate), p)
			defer run.close()
			var marked atomic.Int64
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				tick := time.NewTicker(5 * time.Millisecond)
				defer tick.Stop()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					case <-tick.C:
					}
					for k := range 2 { // 200 keys × 2/s: one every 2.5 ms
						run.logger.Info(fmt.Sprintf("%s%d", RareMark, (2*i+k)%200), ContextFields()...)
					}
					for range 10 { // 2 k/s
						run.logger.Warn(RareMark+"warn", ContextFields()...)
					}
					marked.Add(12)
				}
			}()
			run.drive(4, nil, scaled(5*time.Second))
			close(stop)
			wg.Wait()
			run.report(b)
			st := run.core.Stats().Info
			r := run.recv.(*remote)
			others, got := r.Marked()
			for last, at := others, time.Now(); others < int64(st.Delivered) && time.Since(at) < *deliveryQuiet; {
				time.Sleep(10 * time.Millisecond)
				if others, got = r.Marked(); others != last {
					last, at = others, time.Now()
				}
			}
			b.ReportMetric(float64(marked.Load()-got), p.String()+"-rare-and-warn-lost")
			return ruleResult{dropped: st.DroppedTotal(), delivered: st.Delivered}
		})
	})
	// 8: WeightKey over a sudden 10× burst: a steady half of a 20 k/s receiver, then ten
	// times that for a second, then half again. The receiver decodes every entry; the weights
	// of those logged in the burst (by their time) are summed against what was logged then,
	// over the whole burst and its first 100 ms.
	b.Run("scenario=weights-10x", func(b *testing.B) {
		w := weightRun(b)
		b.ReportMetric(w.burst, "weights/logged")
		b.ReportMetric(w.first, "weights/logged-first-100ms")
		b.ReportMetric(w.shed, "dropped/logged")
	})
}

// sideBySide runs p and degrade off at once, flat out from 8 goroutines each into a receiver
// of its own, p started first unless offFirst, and returns what p delivered against what
// off did. What p dropped is reported as adaptive-dropped (or control-dropped when p is
// degrade off too), what off dropped as adaptive-off-dropped (control-off-dropped).
func sideBySide(b *testing.B, p fluentcore.DegradePolicy, offFirst bool) float64 {
	policies := [2]fluentcore.DegradePolicy{p, fluentcore.DegradeOff}
	order := [2]int{0, 1}
	if offFirst {
		order = [2]int{1, 0}
	}
	var runs [2]*degradeRun
	for _, i := range order {
		runs[i] = startDegradeRun(b, KindForward, policies[i])
	}
	var wg sync.WaitGroup
	for _, i := range order {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runs[i].drive(8, nil, scaled(3*time.Second))
		}()
	}
	wg.Wait()
	var res [2]ruleResult
	for _, i := range order {
		res[i] = runs[i].finish(fluentcore.StreamStats{})
	}
	name := "adaptive"
	if p == fluentcore.DegradeOff {
		name = "control"
	}
	b.ReportMetric(float64(res[0].dropped), name+"-dropped")
	b.ReportMetric(float64(res[1].dropped), name+"-off-dropped")
	return float64(res[0].delivered) / float64(max(res[1].delivered, 1))
}

// ruleTurn is how long each policy logs at a time in alternated.
const ruleTurn = 100 * time.Millisecond

// alternated runs the default and degrade off flat out from g goroutines each, with a
// receiver each, in turns of ruleTurn until each has logged for length: in the order ABBA
// BAAB..., which the next round of the scenario starts the other way round. The machine's
// speed drifts over a second by more than the policies differ by: turns this short put the
// drift on both. Each turn starts with its stream drained by the other's turn, and the
// stream counts keys throughout (its calm outlasts the other's turns).
func alternated(b *testing.B, g int, length time.Duration) (adaptive, off ruleResult) {
	policies := [2]fluentcore.DegradePolicy{fluentcore.DegradeAdaptive, fluentcore.DegradeOff}
	var runs [2]*degradeRun
	var before [2]fluentcore.StreamStats
	for i, p := range policies {
		runs[i] = startDegradeRun(b, KindForward, p)
		before[i] = runs[i].core.Stats().Info
	}
	first := round(b) % 2
	for t := range 2 * max(1, int(length/ruleTurn)) {
		runs[first^(t^t>>1)&1].drive(g, nil, ruleTurn)
	}
	return runs[0].finish(before[0]), runs[1].finish(before[1])
}

// finish waits for the run's entries to be delivered, closes it, and returns its info
// stream's outcome since before.
func (r *degradeRun) finish(before fluentcore.StreamStats) ruleResult {
	_ = r.core.Sync()
	st := r.core.Stats().Info
	r.close()
	return ruleResult{
		dropped:   st.DroppedTotal() - before.DroppedTotal(),
		delivered: st.Delivered - before.Delivered,
		offered:   st.Entries - before.Entries,
		queueFull: st.Dropped["queue_full"] - before.Dropped["queue_full"],
	}
}

// rounds counts each benchmark's rounds (-count) by name (round).
var rounds = map[string]int{}

// round counts a round of b and returns how many b ran before it, so that contenders taking
// turns also take turns going first.
func round(b *testing.B) int {
	n := rounds[b.Name()]
	rounds[b.Name()]++
	return n
}

// ruleWarm is set once the process has made the run that warms it up (see pair).
var ruleWarm bool

// ruleScale scales BenchmarkDegradeRule's durations and its bursts' info budget: make
// bench-smoke runs it at a tenth.
var ruleScale = flag.Float64("bench.rule-scale", 1, "BenchmarkDegradeRule's durations and burst budget, as a share of the full run's")

// scaled is d at ruleScale.
func scaled(d time.Duration) time.Duration { return time.Duration(float64(d) * *ruleScale) }

// ruleReceiverRate is the slow receiver of the burst scenarios, in entries a second.
const ruleReceiverRate = 20_000

// ruleReadBuffer is the burst receiver's kernel receive buffer, fixed at Linux's initial
// size: grown by the kernel, what it holds at the end of a burst differs from one run to
// the next by several of the stream's batches, more than the two policies differ by
// (bench/README.md, "The socket's share of a burst").
const ruleReadBuffer = 128 << 10

// startupRate is 5 % of what the pipeline carries flat out on this 2-core machine into a
// receiver that takes all it gets (about 2 M entries/s).
const startupRate = 100_000

// ruleResult is one policy's outcome in a scenario.
type ruleResult struct {
	dropped, delivered uint64
	offered, queueFull uint64 // entries offered, and dropped as queue_full (degradeRun.finish only)
}

// burstRun logs share × the info budget's worth of entries flat out from 4 goroutines into
// a receiver (kind, or start if set), then waits until the stream is drained, and returns
// what was dropped and delivered.
func burstRun(b *testing.B, kind string, p fluentcore.DegradePolicy, share float64, start func(testing.TB) Counter) ruleResult {
	var r Counter
	if start != nil {
		r = start(b)
	} else {
		r = mustStartReceiver(b, kind)
	}
	defer r.Close()
	budget := max(int(float64(fluentcore.DefaultInfoBufferBytes)**ruleScale), 1<<20)
	core := newFluentcore(r.Addr(), func(c *fluentcore.Config) {
		c.Degrade.Policy = p
		c.Spill.Fallback = io.Discard
		c.Timeouts.Sync = time.Minute
		c.Info.BufferBytes = budget
	})
	defer core.Close()
	logger := zap.New(core)
	for range 100 {
		LogFields(logger)
	}
	if err := core.Sync(); err != nil {
		b.Fatal(err)
	}
	st := core.Stats().Info
	entryBytes := float64(st.SentBytes) / float64(st.Delivered)
	n := int64(share * float64(budget) / entryBytes)
	var left atomic.Int64
	left.Store(n)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for left.Add(-1) >= 0 {
				LogFields(logger)
			}
		}()
	}
	wg.Wait()
	if err := core.Sync(); err != nil {
		b.Fatal(err)
	}
	end := core.Stats().Info
	return ruleResult{dropped: end.DroppedTotal() - st.DroppedTotal(), delivered: end.Delivered - st.Delivered}
}

// eagerQueue is how much the eager receiver holds, read but not yet processed.
const eagerQueue = 16 << 20

// startEager starts a receiver that reads everything as it comes, as long as it holds less
// than eagerQueue bytes unprocessed, and processes ruleReceiverRate entries a second of the
// benchmark's size: fluentd's in_forward in front of a slow output. It acknowledges nothing
// (the scenarios send without acks), so it needs no decoding.
func startEager(tb testing.TB) Counter {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	e := &eager{ln: ln, done: make(chan struct{})}
	go e.serve()
	return e
}

type eager struct {
	ln   net.Listener
	done chan struct{}
	wg   sync.WaitGroup
	read atomic.Int64
}

// eagerEntryBytes is about the size of LogFields' entry in a frame.
const eagerEntryBytes = 260

func (e *eager) serve() {
	for {
		c, err := e.ln.Accept()
		if err != nil {
			return
		}
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			defer c.Close()
			var queued atomic.Int64
			stop := make(chan struct{})
			defer close(stop)
			go func() { // the slow output: drains the queue at the rate
				t := time.NewTicker(time.Millisecond)
				defer t.Stop()
				for {
					select {
					case <-stop:
						return
					case <-t.C:
					}
					if q := queued.Add(-ruleReceiverRate * eagerEntryBytes / 1000); q < 0 {
						queued.Store(0)
					}
				}
			}()
			buf := make([]byte, 256<<10)
			for {
				for queued.Load() >= eagerQueue {
					select {
					case <-e.done:
						return
					case <-time.After(time.Millisecond):
					}
				}
				n, err := c.Read(buf)
				queued.Add(int64(n))
				e.read.Add(int64(n))
				if err != nil {
					return
				}
			}
		}()
	}
}

func (e *eager) Addr() string { return "tcp://" + e.ln.Addr().String() }

// The eager receiver rejects nothing, runs in the client's process, and is never stalled.
func (e *eager) Violations() int64  { return 0 }
func (e *eager) CPU() time.Duration { return 0 }
func (e *eager) Stall()             {}
func (e *eager) Resume()            {}

// Count is the bytes read, over the entry size: an estimate, for the Counter interface.
func (e *eager) Count() int64 { return e.read.Load() / eagerEntryBytes }

func (e *eager) Wait(want int64, quiet, max time.Duration) int64 { return e.Count() }

func (e *eager) Close() error {
	close(e.done)
	err := e.ln.Close()
	e.wg.Wait()
	return err
}

// neighbourEnv makes the test binary a CPU-bound neighbour: it spins on every core until its
// standard input closes.
const neighbourEnv = "FLUENTCORE_BENCH_NEIGHBOUR"

// maybeNeighbour turns the process into the neighbour if started as one; see TestMain.
func maybeNeighbour() {
	if os.Getenv(neighbourEnv) == "" {
		return
	}
	for range runtime.GOMAXPROCS(0) {
		go func() {
			x := 1.0
			for {
				x = math.Sqrt(x + 1)
			}
		}()
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

// startNeighbour starts the CPU-bound neighbour process if on, and returns its stop.
func startNeighbour(b *testing.B, on bool) (stop func()) {
	if !on {
		return func() {}
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), neighbourEnv+"=1")
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	return func() {
		_ = in.Close()
		_ = cmd.Wait()
	}
}

// weightBuffer is the weights scenario's info budget: about 12 k of its entries, a tenth of
// the burst.
const weightBuffer = 1 << 20

// weightResult is the weights' sum against what was logged: over the burst, and its first
// 100 ms.
type weightResult struct{ burst, first, shed float64 }

func weightRun(b *testing.B) weightResult {
	r, err := forwardtest.Start(forwardtest.WithLogf(nil), forwardtest.WithReadRate(ruleReceiverRate))
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	core := newFluentcore(r.Addr(), func(c *fluentcore.Config) {
		c.Degrade.WeightKey = "weight"
		c.Spill.Fallback = io.Discard
		c.Timeouts.Sync = time.Minute
		// A budget the burst overflows (the default holds the whole of it at this size),
		// and acks, so that the kernel's socket buffers do not take what the budget cannot.
		c.Info.BufferBytes = weightBuffer
		c.Info.Acks = fluentcore.AcksOn
	})
	defer core.Close()
	logger := zap.New(core)
	const base = ruleReceiverRate / 2
	start := time.Now()
	burstStart, burstEnd := start.Add(scaled(2*time.Second)), start.Add(scaled(3*time.Second))
	var inBurst, inFirst atomic.Int64
	run := &degradeRun{core: core, logger: logger, call: func() {
		now := time.Now()
		logger.Info("weighed", zap.Int("n", 1))
		if !now.Before(burstStart) && now.Before(burstEnd) {
			inBurst.Add(1)
			if now.Before(burstStart.Add(100 * time.Millisecond)) {
				inFirst.Add(1)
			}
		}
	}}
	run.drive(8, func(t time.Duration) float64 {
		if t >= scaled(2*time.Second) && t < scaled(3*time.Second) {
			return 10 * base
		}
		return base
	}, scaled(5*time.Second))
	// The weights are summed over the entries logged in the window: what was shed after its
	// last kept entry rides on the first one after it, outside, and is missed (a few).
	if err := core.Sync(); err != nil {
		b.Fatal(err)
	}
	delivered := int(core.Stats().Info.Delivered)
	entries, err := r.WaitForEntries(delivered, time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	var burst, first float64
	for _, e := range entries {
		w, _ := e.Record["weight"].(int64)
		if !e.Time.Before(burstStart) && e.Time.Before(burstEnd) {
			burst += float64(w)
			if e.Time.Before(burstStart.Add(100 * time.Millisecond)) {
				first += float64(w)
			}
		}
	}
	return weightResult{
		burst: burst / float64(inBurst.Load()), first: first / float64(max(inFirst.Load(), 1)),
		shed: float64(core.Stats().Info.DroppedTotal()) / float64(inBurst.Load()),
	}
}

// burstEntries is how many entries a goroutine of the bursty scenarios logs at each wake.
const burstEntries = 64

// driveBursts logs from goroutines for length, each burstEntries entries at a time and then
// asleep until its share of rate (entries a second, over all of them) is due: a paced load
// that comes in bursts, as request handlers log.
func driveBursts(logger *zap.Logger, goroutines int, rate float64, length time.Duration) {
	every := time.Duration(float64(time.Second) * burstEntries * float64(goroutines) / rate)
	start := time.Now()
	end := start.Add(length)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The goroutines' wakes are spread over the period, as independent callers' are.
			next := start.Add(every * time.Duration(g) / time.Duration(goroutines))
			for next.Before(end) {
				time.Sleep(time.Until(next))
				for range burstEntries {
					LogFields(logger)
				}
				next = next.Add(every)
			}
		}()
	}
	wg.Wait()
}
