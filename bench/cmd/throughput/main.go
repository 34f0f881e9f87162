// Command throughput logs through fluentcore flat out for a while and prints what was
// delivered: events/s, CPU seconds per million entries (client and receiver, each in its own
// process) and the client's peak RSS.
//
//	go -C bench run ./cmd/throughput -d 10s -g 64
//
// The receiver is forwardtest's count-only receiver in a child process (this binary,
// re-executed), so client and receiver share the machine's cores as an application and
// fluentd would. The result is printed as one line of Go benchmark format on stdout (make
// bench feeds it to the table) and as a summary on stderr. Exit status 1 if a receiver
// cannot be started.
//
// The client's CPU is profiled while it runs and split by owner: the sink's goroutines
// (senders, ack readers, clock), the logging goroutines, and the runtime's background work.
// -cpuprofile keeps the profile for go tool pprof. -contender zap-json-discard runs the same
// loggers on zap's JSON core writing to io.Discard instead, for its CPU per entry: the
// encoding cost every zap user pays, with no delivery at all.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fluentcore/fluentcore"
	"github.com/fluentcore/fluentcore/bench"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

func main() {
	bench.MaybeServe()
	d := flag.Duration("d", 10*time.Second, "how long to log")
	g := flag.Int("g", 64, "logging goroutines")
	policy := flag.String("degrade", "adaptive", "info degrade policy, by its name (adaptive, the default; off; sample; ...)")
	contender := flag.String("contender", "fluentcore", "fluentcore, or zap-json-discard (zap's JSON core to io.Discard, for its CPU per entry)")
	cpuprofile := flag.String("cpuprofile", "", "write the client's CPU profile to this file")
	flag.Parse()
	if err := run(*d, *g, *policy, *contender, *cpuprofile); err != nil {
		fmt.Fprintln(os.Stderr, "throughput:", err)
		os.Exit(1)
	}
}

func run(d time.Duration, g int, policy, contender, cpuprofile string) error {
	var (
		name  string
		l     *zap.Logger
		r     bench.Counter // the receiver; nil for zap-json-discard
		flush func() (accepted, rejected, batches int64, dropped string)
	)
	switch contender {
	case "fluentcore":
		cfg := fluentcore.Config{Info: fluentcore.InfoConfig{Tag: bench.Tag}}
		if err := cfg.Degrade.Policy.UnmarshalText([]byte(policy)); err != nil {
			return err
		}
		// The contender names of bench/: the default policy, and off.
		name = "fluentcore"
		if cfg.Degrade.Policy != (fluentcore.DegradeConfig{}).Policy {
			name = "fluentcore-degrade-" + cfg.Degrade.Policy.String()
		}
		var err error
		if r, err = bench.StartRemote(bench.KindForward); err != nil {
			return err
		}
		defer r.Close()
		cfg.Addr = r.Addr()
		core := fluentcore.New(cfg)
		defer core.Close()
		l = zap.New(core)
		flush = func() (int64, int64, int64, string) {
			if err := core.Sync(); err != nil {
				fmt.Fprintln(os.Stderr, "sync:", err)
			}
			st := core.Stats().Info
			return int64(st.Entries - st.DroppedTotal()), int64(st.DroppedTotal()), int64(st.SentBatches), reasons(st.Dropped)
		}
	case "zap-json-discard":
		name = contender
		l = zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(io.Discard), zap.InfoLevel))
	default:
		return fmt.Errorf("unknown contender %q (fluentcore or zap-json-discard)", contender)
	}

	prof, err := startProfile()
	if err != nil {
		return err
	}
	rcpu := func() time.Duration { // the receiver's CPU; none for zap's core
		if r == nil {
			return 0
		}
		return r.CPU()
	}
	rcpu0 := rcpu()
	cpu0 := cpuTime()
	start := time.Now()
	var stop atomic.Bool
	var calls atomic.Int64
	var wg sync.WaitGroup
	for range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var n int64
			for !stop.Load() {
				bench.LogFields(l)
				n++
			}
			calls.Add(n)
		}()
	}
	time.Sleep(d) // the measurement's duration, not a wait for a result
	stop.Store(true)
	wg.Wait()
	logged := time.Since(start)
	n := calls.Load()
	accepted, rejected, batches, dropped := n, int64(0), int64(0), ""
	delivered := n // zap's core to io.Discard: every call is done with when it returns
	if r != nil {
		accepted, rejected, batches, dropped = flush()
		delivered = r.Wait(accepted, time.Second, 2*time.Minute)
	}
	elapsed := time.Since(start)
	cpu := cpuTime() - cpu0
	recvCPU := rcpu() - rcpu0
	sh, err := prof.stop(cpuprofile)
	if err != nil {
		return err
	}

	perEntry := func(ns int64) float64 { // ns per delivered entry
		if delivered == 0 {
			return 0
		}
		return float64(ns) / float64(delivered)
	}
	perM := func(t time.Duration) float64 { return perEntry(int64(t)) / 1e3 } // s per million entries
	perBatch := 0.0                                                           // zap's core has no batches
	if batches > 0 {
		perBatch = float64(delivered) / float64(batches)
	}
	rate := float64(delivered) / elapsed.Seconds()
	rss := peakRSS()
	fmt.Printf("BenchmarkThroughput/goroutines=%d/contender=%s \t%d\t%.1f ns/op\t%.0f events/s\t%d delivered\t%d lost\t%d rejected\t%.3f cpu-s/Mentries\t%.3f recv-cpu-s/Mentries\t%.1f delivery-cpu-ns/entry\t%.1f logging-cpu-ns/entry\t%.1f other-cpu-ns/entry\t%.0f entries/batch\t%d peak-rss-B\n",
		g, name, n, float64(logged.Nanoseconds())/float64(max(n, 1)), rate, delivered, max(0, accepted-delivered),
		rejected, perM(cpu), perM(recvCPU), perEntry(sh.delivery), perEntry(sh.logging), perEntry(sh.other), perBatch, rss)

	fmt.Fprintf(os.Stderr, "%s, %d goroutines, logging for %v (delivery done after %v)\n", name, g, d, elapsed.Round(time.Millisecond))
	fmt.Fprintf(os.Stderr, "  calls      %d\n  delivered  %d (%.0f events/s)\n  lost       %d\n", n, delivered, rate, max(0, accepted-delivered))
	fmt.Fprintf(os.Stderr, "  dropped    %d%s\n", rejected, dropped)
	fmt.Fprintf(os.Stderr, "  CPU        client %.3f s, receiver %.3f s per million entries delivered\n", perM(cpu), perM(recvCPU))
	fmt.Fprintf(os.Stderr, "  profile    per delivered entry: delivery %.0f ns, logging %.0f ns, other %.0f ns\n", perEntry(sh.delivery), perEntry(sh.logging), perEntry(sh.other))
	fmt.Fprintf(os.Stderr, "  peak RSS   client %.1f MiB\n", float64(rss)/(1<<20))
	return nil
}

func reasons(m map[string]uint64) string {
	keys := make([]string, 0, len(m))
	for k, v := range m {
		if v > 0 {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	s := ""
	for _, k := range keys {
		s += fmt.Sprintf(" %s=%d", k, m[k])
	}
	if s != "" {
		s = " (" + s[1:] + ")"
	}
	return s
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// peakRSS is this process's maximum resident set size in bytes (Linux reports KiB).
func peakRSS() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Maxrss << 10
}
