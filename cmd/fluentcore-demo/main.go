// Command fluentcore-demo runs a small HTTP service that logs through fluentcore, drives load
// against it for a few seconds, and prints what was logged, delivered and dropped per stream.
//
// With no flags it sends to an embedded Forward receiver (package forwardtest), so it runs
// anywhere; -fluent ADDR sends to a real fluentd or fluent-bit instead. Each handler logs
// under a tag of its own (docs/tags.md): the orders handler by a Tag option
// (demo.orders.info, demo.orders.err), the cache handler by its logger's name with
// TagFromName (demo.cache.info); the summary counts each tag.
//
// With -d 0 it runs until interrupted (Ctrl-C, SIGTERM), so that its -metrics endpoint can
// be scraped for as long as one likes; it then closes the core and prints its table.
//
//	go run ./cmd/fluentcore-demo                       # embedded receiver, 5s of load
//	go run ./cmd/fluentcore-demo -stall 2s             # receiver pauses: watch info degrade, err survive
//	go run ./cmd/fluentcore-demo -fluent tcp://127.0.0.1:24224 -metrics :9100 -d 0
//	go run github.com/fluentcore/fluentcore/cmd/fluentcore-demo@latest   # outside a clone
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/fluentcore/fluentcore"
	"github.com/fluentcore/fluentcore/forwardtest"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "fluentcore-demo:", err)
		os.Exit(1)
	}
}

// lockedWriter serialises writes: the progress loop, the stall timer and OnEvent (on the
// sink's goroutine) all print.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// run runs the demo until its duration has passed or ctx is done (an interrupt), whichever
// comes first; a duration of 0 waits for ctx alone.
func run(ctx context.Context, args []string, w io.Writer) error {
	out := &lockedWriter{w: w}
	fs := flag.NewFlagSet("fluentcore-demo", flag.ContinueOnError)
	fluent := fs.String("fluent", "", "Forward receiver address (tcp://host:port, tls://host:port, unix:///path); default: an embedded receiver")
	metricsAddr := fs.String("metrics", "", "serve Prometheus /metrics on this address, e.g. :9100")
	duration := fs.Duration("d", 5*time.Second, "how long to drive load; 0 runs until interrupted (Ctrl-C)")
	workers := fs.Int("workers", 8, "concurrent HTTP clients")
	stall := fs.Duration("stall", 0, "pause the embedded receiver for this long, a third of the way in")
	down := fs.Duration("down", 0, "take the embedded receiver down (connections closed, port refused) for this long, a third of the way in")
	spill := fs.String("spill", "", "durable err spill directory (SpillDir): err batches that have failed for 1 s go there and are replayed once the receiver is back; try it with -down 3s")
	fs.SetOutput(w) // -h prints its usage where the demo prints everything else
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return nil // asked for, not a failure
	} else if err != nil {
		return err
	}
	if *duration < 0 {
		return fmt.Errorf("-d %v: want a positive duration, or 0 to run until interrupted", *duration)
	}

	// The metrics port first, before anything starts: a demo run for its metrics that
	// cannot serve them is a failed run, not one that carries on without them.
	var metricsLn net.Listener
	if *metricsAddr != "" {
		var err error
		if metricsLn, err = new(net.ListenConfig).Listen(context.Background(), "tcp", *metricsAddr); err != nil {
			return fmt.Errorf("-metrics %s: cannot serve /metrics there: %w", *metricsAddr, err)
		}
		defer func() { _ = metricsLn.Close() }()
	}

	var recv *forwardtest.Receiver
	addr := *fluent
	if addr == "" {
		var err error
		if recv, err = forwardtest.Start(forwardtest.CountOnly()); err != nil {
			return err
		}
		defer func() { _ = recv.Close() }()
		addr = recv.Addr()
	} else if *stall > 0 || *down > 0 {
		return errors.New("-stall and -down need the embedded receiver (drop -fluent)")
	}
	if *stall > 0 && *down > 0 {
		return errors.New("-stall and -down: one fault at a time")
	}

	reg := prometheus.NewRegistry()
	cfg := fluentcore.Config{
		Addr:       addr,
		Tag:        "demo",
		Registerer: reg,
		// logger.Named("cache") sends under demo.cache.info: a tag per handler, routed by
		// fluentd's <match demo.cache.**>.
		TagFromName: true,
		// A small info budget, so that a few seconds of -stall show the info stream
		// degrading; production services keep the default (8 MiB).
		Info: fluentcore.StreamConfig{BufferBytes: 1 << 20},
		OnEvent: func(e fluentcore.Event) {
			fmt.Fprintf(out, "\n[event] %s stream %s\n", e.Stream, e.Kind)
		},
	}
	if *spill != "" {
		// SpillAfter 1 s rather than the default 5 s, so that a short -stall shows the
		// spill and its replay.
		cfg.SpillDir, cfg.SpillAfter = *spill, time.Second
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	core := fluentcore.New(cfg)
	logger := zap.New(core, zap.AddCaller())

	orders := logger.With(fluentcore.Tag("orders")) // demo.orders.info and demo.orders.err

	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	// Every request the service handles logs exactly one entry; served counts them on the
	// server's side, so a request the client gave up on at the end still counts.
	var served atomic.Int64
	mux.HandleFunc("/orders/{id}", func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		id := r.PathValue("id")
		start := time.Now()
		// Desugared: the hot handler.
		if n, _ := strconv.Atoi(id); n%50 == 0 {
			orders.Error("payment failed", zap.String("id", id), zap.Error(errors.New("card declined")))
			http.Error(w, "payment failed", http.StatusPaymentRequired)
			return
		}
		orders.Info("order placed", zap.String("id", id), zap.String("method", r.Method),
			zap.Int("items", len(id)), zap.Duration("took", time.Since(start)))
	})
	sugar := logger.Named("cache").Sugar() // demo.cache.info
	mux.HandleFunc("/cache/{key}", func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		key := r.PathValue("key")
		// Sugared: the rest of the code.
		if len(key)%7 == 0 {
			sugar.Warnw("cache slow", "key", key, "ms", len(key)*3)
		} else {
			sugar.Infow("cache miss", "key", key)
		}
	})

	ln, err := new(net.ListenConfig).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer func() { _ = srv.Close() }()
	if metricsLn != nil {
		msrv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = msrv.Serve(metricsLn) }()
		defer func() { _ = msrv.Close() }()
		fmt.Fprintf(out, "fluentcore-demo: metrics on http://%s/metrics\n", metricsLn.Addr())
	}

	howLong := duration.String()
	if *duration == 0 {
		howLong = "until interrupted (Ctrl-C)"
	}
	fmt.Fprintf(out, "fluentcore-demo: service on http://%s, logging to %s, %d workers for %s\n",
		ln.Addr(), addr, *workers, howLong)

	cancel := context.CancelFunc(func() {})
	if *duration > 0 {
		ctx, cancel = context.WithTimeout(ctx, *duration)
	}
	defer cancel()
	// A fault starts a third of the way in; two seconds in when the demo runs until
	// interrupted.
	faultAt := *duration / 3
	if *duration == 0 {
		faultAt = 2 * time.Second
	}
	var wg sync.WaitGroup
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *workers}}
	base := "http://" + ln.Addr().String()
	for w := 0; w < *workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				n := rand.IntN(100_000)
				url := base + "/orders/" + strconv.Itoa(n)
				if rand.IntN(2) == 0 {
					url = base + "/cache/user-" + strconv.Itoa(n)
				}
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
				resp, err := client.Do(req)
				if err != nil {
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}
		}()
	}

	// One fault at most (checked above), a third of the way in, for its duration.
	fault := func(d time.Duration, what string, begin func(), end func() error, after string) {
		go func() {
			select {
			case <-time.After(faultAt):
			case <-ctx.Done():
				return
			}
			fmt.Fprintf(out, "\n[demo] receiver %s for %v\n", what, d)
			begin()
			select {
			case <-time.After(d):
			case <-ctx.Done():
			}
			if err := end(); err != nil {
				fmt.Fprintf(out, "\n[demo] receiver cannot come back: %v\n", err)
				return
			}
			fmt.Fprintf(out, "\n[demo] receiver %s\n", after)
		}()
	}
	switch {
	case recv != nil && *stall > 0:
		fault(*stall, "stalls", recv.Stall, func() error { recv.Resume(); return nil }, "resumes")
	case recv != nil && *down > 0:
		fault(*down, "down", func() {
			_ = recv.SetRefuse(true)
			recv.CloseConnections()
		}, func() error { return recv.SetRefuse(false) }, "back")
	}

	// The progress line is per second, every column; the totals are in the table at the end.
	started := time.Now()
	tick := time.NewTicker(time.Second)
	var last struct{ served, logged, delivered, dropped, spilled uint64 }
	fmt.Fprintln(out, "  time  requests/s  logged/s  delivered/s  dropped/s  spilled/s  degraded")
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-tick.C:
			st := core.Stats()
			now := last
			now.served = uint64(served.Load())
			now.logged = st.Info.Entries + st.Err.Entries
			now.delivered = st.Info.Delivered + st.Err.Delivered
			now.dropped = st.Info.DroppedTotal() + st.Err.DroppedTotal()
			now.spilled = st.Err.Spilled
			degraded := "no"
			if st.Info.Degraded {
				degraded = "yes"
			}
			fmt.Fprintf(out, "  %3.0fs  %10d  %8d  %11d  %9d  %9d  %s\n", time.Since(started).Seconds(),
				now.served-last.served, now.logged-last.logged, now.delivered-last.delivered,
				now.dropped-last.dropped, now.spilled-last.spilled, degraded)
			last = now
		}
	}
	tick.Stop()
	wg.Wait()
	// Let the handlers still running finish (and log) before the core closes.
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	_ = srv.Shutdown(sctx)
	scancel()
	closeErr := core.Close()

	st := core.Stats()
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(out)
	fmt.Fprintln(tw, "stream\tlogged\tdelivered\tdropped\tspilled\treplayed\tdrop reasons\t")
	for _, s := range []struct {
		name string
		st   fluentcore.StreamStats
	}{{"info", st.Info}, {"err", st.Err}} {
		reasons := ""
		for _, r := range slices.Sorted(maps.Keys(s.st.Dropped)) {
			if n := s.st.Dropped[r]; n > 0 {
				reasons += fmt.Sprintf("%s=%d ", r, n)
			}
		}
		if reasons == "" {
			reasons = "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\t\n", s.name, s.st.Entries, s.st.Delivered, s.st.DroppedTotal(), s.st.Spilled, s.st.Replayed, reasons)
	}
	_ = tw.Flush()
	// By tag: what the core counted, and what the embedded receiver got under each.
	var got map[string]int64
	if recv != nil {
		_ = recv.WaitFor(func(s forwardtest.Stats) bool { return s.Entries >= int64(st.Info.Delivered+st.Err.Delivered) }, 5*time.Second)
		got = recv.TagCounts()
	}
	fmt.Fprintln(out)
	fmt.Fprintln(tw, "tag\tlogged\tdelivered\tdropped\tspilled\treceived\t")
	for _, s := range []fluentcore.StreamStats{st.Info, st.Err} {
		for _, tag := range slices.Sorted(maps.Keys(s.Tags)) {
			ts := s.Tags[tag]
			if ts.Entries == 0 {
				continue // the cache handler logs no err entries
			}
			received := "-"
			if got != nil {
				received = strconv.FormatInt(got[tag], 10)
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t\n", tag, ts.Entries, ts.Delivered, ts.Dropped, ts.Spilled, received)
		}
	}
	_ = tw.Flush()
	delivered := st.Info.Delivered + st.Err.Delivered
	fmt.Fprintf(out, "\n%d requests served in %v, each logging one entry: %d logged, %d delivered",
		served.Load(), time.Since(started).Round(time.Millisecond), st.Info.Entries+st.Err.Entries, delivered)
	if recv != nil {
		if err := recv.WaitFor(func(s forwardtest.Stats) bool { return s.Entries >= int64(delivered) }, 5*time.Second); err != nil {
			return err
		}
		fmt.Fprintf(out, "; the embedded receiver counted %d entries", recv.Len())
	}
	fmt.Fprintln(out)
	if uint64(served.Load()) != st.Info.Entries+st.Err.Entries {
		return fmt.Errorf("%d requests served but %d entries logged", served.Load(), st.Info.Entries+st.Err.Entries)
	}
	for _, s := range []fluentcore.StreamStats{st.Info, st.Err} {
		if s.Entries != s.Delivered+s.DroppedTotal()+s.Spilled {
			return fmt.Errorf("accounting identity broken: %+v", s)
		}
	}
	return closeErr
}
