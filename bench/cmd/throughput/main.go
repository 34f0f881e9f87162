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
package main

import (
	"flag"
	"fmt"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fluentcore/fluentcore"
	"github.com/fluentcore/fluentcore/bench"
	"go.uber.org/zap"
)

func main() {
	bench.MaybeServe()
	d := flag.Duration("d", 10*time.Second, "how long to log")
	g := flag.Int("g", 64, "logging goroutines")
	policy := flag.String("degrade", "adaptive", "info degrade policy, by its name (adaptive, the default; off; sample; ...)")
	flag.Parse()
	if err := run(*d, *g, *policy); err != nil {
		fmt.Fprintln(os.Stderr, "throughput:", err)
		os.Exit(1)
	}
}

func run(d time.Duration, g int, policy string) error {
	cfg := fluentcore.Config{Info: fluentcore.StreamConfig{Tag: bench.Tag}}
	if err := cfg.Degrade.Policy.UnmarshalText([]byte(policy)); err != nil {
		return err
	}
	// The contender names of bench/: the default policy, and off.
	name := "fluentcore"
	if cfg.Degrade.Policy != (fluentcore.DegradeConfig{}).Policy {
		name = "fluentcore-degrade-" + cfg.Degrade.Policy.String()
	}
	r, err := bench.StartRemote(bench.KindForward)
	if err != nil {
		return err
	}
	defer r.Close()
	cfg.Addr = r.Addr()
	core := fluentcore.New(cfg)
	defer core.Close()
	l := zap.New(core)

	rcpu0, cpu0 := r.CPU(), cpuTime()
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
	serr := core.Sync()
	st := core.Stats().Info
	accepted := int64(st.Entries - st.DroppedTotal())
	delivered := r.Wait(accepted, time.Second, 2*time.Minute)
	elapsed := time.Since(start)
	cpu, rcpu := cpuTime()-cpu0, r.CPU()-rcpu0
	if serr != nil {
		fmt.Fprintln(os.Stderr, "sync:", serr)
	}

	n := calls.Load()
	perM := func(t time.Duration) float64 {
		if delivered == 0 {
			return 0
		}
		return t.Seconds() / float64(delivered) * 1e6
	}
	rate := float64(delivered) / elapsed.Seconds()
	rss := peakRSS()
	fmt.Printf("BenchmarkThroughput/goroutines=%d/contender=%s \t%d\t%.1f ns/op\t%.0f events/s\t%d delivered\t%d lost\t%d rejected\t%.3f cpu-s/Mentries\t%.3f recv-cpu-s/Mentries\t%d peak-rss-B\n",
		g, name, n, float64(logged.Nanoseconds())/float64(max(n, 1)), rate, delivered, max(0, accepted-delivered),
		st.DroppedTotal(), perM(cpu), perM(rcpu), rss)

	fmt.Fprintf(os.Stderr, "%s, %d goroutines, logging for %v (delivery done after %v)\n", name, g, d, elapsed.Round(time.Millisecond))
	fmt.Fprintf(os.Stderr, "  calls      %d\n  delivered  %d (%.0f events/s)\n  lost       %d\n", n, delivered, rate, max(0, accepted-delivered))
	fmt.Fprintf(os.Stderr, "  dropped    %d%s\n", st.DroppedTotal(), reasons(st.Dropped))
	fmt.Fprintf(os.Stderr, "  CPU        client %.3f s, receiver %.3f s per million entries delivered\n", perM(cpu), perM(rcpu))
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
