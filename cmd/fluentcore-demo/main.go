// Command fluentcore-demo runs a small HTTP service that logs through fluentcore, drives load
// against it for a few seconds, and prints what was logged, delivered and dropped per stream.
//
// With no flags it sends to an embedded Forward receiver (package forwardtest), so it runs
// anywhere; -fluent ADDR sends to a real fluentd or fluent-bit instead. Each handler logs
// under a tag of its own (docs/tags.md): the orders handler by a Tag option
// (demo.orders.info, demo.orders.err), the cache handler by its logger's name with
// Tags.FromName (demo.cache.info); the summary counts each tag.
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
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
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
	f, err := parseFlags(args, w)
	if errors.Is(err, flag.ErrHelp) {
		return nil // asked for, not a failure
	} else if err != nil {
		return err
	}
	// The metrics port first, before anything starts: a demo run for its metrics that
	// cannot serve them is a failed run, not one that carries on without them.
	metricsLn, err := listenMetrics(f.metricsAddr)
	if err != nil {
		return err
	}
	if metricsLn != nil {
		defer func() { _ = metricsLn.Close() }()
	}
	recv, addr, err := startReceiver(f)
	if err != nil {
		return err
	}
	if recv != nil {
		defer func() { _ = recv.Close() }()
	}
	reg := prometheus.NewRegistry()
	core, err := newCore(f, addr, reg, out)
	if err != nil {
		return err
	}
	d := &demo{out: out, core: core, logger: zap.New(core, zap.AddCaller())}
	mux := d.handlers(reg)

	srv, base, closeServers, err := serve(mux, metricsLn, out)
	if err != nil {
		return err
	}
	defer closeServers()
	howLong := f.duration.String()
	if f.duration == 0 {
		howLong = "until interrupted (Ctrl-C)"
	}
	fmt.Fprintf(out, "fluentcore-demo: service on %s, logging to %s, %d workers for %s\n",
		base, addr, f.workers, howLong)

	cancel := context.CancelFunc(func() {})
	if f.duration > 0 {
		ctx, cancel = context.WithTimeout(ctx, f.duration)
	}
	defer cancel()
	wg := d.load(ctx, base, f.workers)
	if fault, ok := receiverFaultOf(f, recv); ok {
		fault.start(ctx, out, faultAt(f.duration))
	}
	started := time.Now()
	d.progress(ctx, started)
	wg.Wait()
	// Let the handlers still running finish (and log) before the core closes.
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	_ = srv.Shutdown(sctx)
	scancel()
	closeErr := core.Close()
	if err := d.summary(recv, started); err != nil {
		return err
	}
	return closeErr
}

// serve serves mux on a local port, and on metricsLn too if there is one. It returns the
// service's server, its base URL, and a func that closes both servers.
func serve(mux *http.ServeMux, metricsLn net.Listener, out io.Writer) (*http.Server, string, func(), error) {
	ln, err := new(net.ListenConfig).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", nil, err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	if metricsLn == nil {
		return srv, "http://" + ln.Addr().String(), func() { _ = srv.Close() }, nil
	}
	msrv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = msrv.Serve(metricsLn) }()
	fmt.Fprintf(out, "fluentcore-demo: metrics on http://%s/metrics\n", metricsLn.Addr())
	return srv, "http://" + ln.Addr().String(), func() { _ = msrv.Close(); _ = srv.Close() }, nil
}

// demoFlags are the demo's command-line flags.
type demoFlags struct {
	fluent, metricsAddr, spill string
	duration, stall, down      time.Duration
	workers                    int
}

// parseFlags parses args; -h prints the usage to w and returns flag.ErrHelp.
func parseFlags(args []string, w io.Writer) (demoFlags, error) {
	var f demoFlags
	fs := flag.NewFlagSet("fluentcore-demo", flag.ContinueOnError)
	fs.StringVar(&f.fluent, "fluent", "", "Forward receiver address (tcp://host:port, tls://host:port, unix:///path); default: an embedded receiver")
	fs.StringVar(&f.metricsAddr, "metrics", "", "serve Prometheus /metrics on this address, e.g. :9100")
	fs.DurationVar(&f.duration, "d", 5*time.Second, "how long to drive load; 0 runs until interrupted (Ctrl-C)")
	fs.IntVar(&f.workers, "workers", 8, "concurrent HTTP clients")
	fs.DurationVar(&f.stall, "stall", 0, "pause the embedded receiver for this long, a third of the way in")
	fs.DurationVar(&f.down, "down", 0, "take the embedded receiver down (connections closed, port refused) for this long, a third of the way in")
	fs.StringVar(&f.spill, "spill", "", "durable err spill directory (Spill.Dir): err batches that have failed for 1 s go there and are replayed once the receiver is back; try it with -down 3s")
	fs.SetOutput(w) // -h prints its usage where the demo prints everything else
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if f.duration < 0 {
		return f, fmt.Errorf("-d %v: want a positive duration, or 0 to run until interrupted", f.duration)
	}
	return f, nil
}

// listenMetrics listens on the -metrics address; with none it returns a nil listener.
func listenMetrics(addr string) (net.Listener, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := new(net.ListenConfig).Listen(context.Background(), "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("-metrics %s: cannot serve /metrics there: %w", addr, err)
	}
	return ln, nil
}

// startReceiver starts the embedded receiver unless -fluent names one, and returns it (nil
// with -fluent) and the address to send to. The faults need the embedded receiver, one at a
// time.
func startReceiver(f demoFlags) (*forwardtest.Receiver, string, error) {
	if f.fluent != "" {
		if f.stall > 0 || f.down > 0 {
			return nil, "", errors.New("-stall and -down need the embedded receiver (drop -fluent)")
		}
		return nil, f.fluent, nil
	}
	if f.stall > 0 && f.down > 0 {
		return nil, "", errors.New("-stall and -down: one fault at a time")
	}
	recv, err := forwardtest.Start(forwardtest.CountOnly())
	if err != nil {
		return nil, "", err
	}
	return recv, recv.Addr(), nil
}

// newCore builds the demo's core, sending to addr, its metrics in reg, its events printed
// to out.
func newCore(f demoFlags, addr string, reg prometheus.Registerer, out io.Writer) (*fluentcore.Core, error) {
	cfg := fluentcore.Config{
		Addr:    addr,
		Tag:     "demo",
		Metrics: fluentcore.MetricsConfig{Registerer: reg},
		// logger.Named("cache") sends under demo.cache.info: a tag per handler, routed by
		// fluentd's <match demo.cache.**>.
		Tags: fluentcore.TagsConfig{FromName: true},
		// A small info budget, so that a few seconds of -stall show the info stream
		// degrading; production services keep the default (8 MiB).
		Info: fluentcore.InfoConfig{BufferBytes: 1 << 20},
		OnEvent: func(e fluentcore.Event) {
			fmt.Fprintf(out, "\n[event] %s stream %s\n", e.Stream, e.Kind)
		},
	}
	if f.spill != "" {
		// Spill.After 1 s rather than the default 5 s, so that a short -stall shows the
		// spill and its replay.
		cfg.Spill.Dir, cfg.Spill.After = f.spill, time.Second
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return fluentcore.New(cfg), nil
}

// demo is the service under load: its core and logger, the requests it has served, and
// where it prints.
type demo struct {
	out    io.Writer
	core   *fluentcore.Core
	logger *zap.Logger
	// Every request the service handles logs exactly one entry; served counts them on the
	// server's side, so a request the client gave up on at the end still counts.
	served atomic.Int64
}

// handlers is the service's mux: /metrics from reg, and the two handlers that log, each
// under its own tag.
func (d *demo) handlers(reg *prometheus.Registry) *http.ServeMux {
	orders := d.logger.With(fluentcore.Tag("orders")) // demo.orders.info and demo.orders.err
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/orders/{id}", func(w http.ResponseWriter, r *http.Request) {
		d.served.Add(1)
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
	sugar := d.logger.Named("cache").Sugar() // demo.cache.info
	mux.HandleFunc("/cache/{key}", func(w http.ResponseWriter, r *http.Request) {
		d.served.Add(1)
		key := r.PathValue("key")
		// Sugared: the rest of the code.
		if len(key)%7 == 0 {
			sugar.Warnw("cache slow", "key", key, "ms", len(key)*3)
		} else {
			sugar.Infow("cache miss", "key", key)
		}
	})
	return mux
}

// load starts workers clients that request random orders and cache keys from the service
// at base until ctx is done; the returned group waits for them.
func (d *demo) load(ctx context.Context, base string, workers int) *sync.WaitGroup {
	var wg sync.WaitGroup
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
	for w := 0; w < workers; w++ {
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
	return &wg
}

// faultAt is when a fault starts: a third of the way in; two seconds in when the demo runs
// until interrupted.
func faultAt(duration time.Duration) time.Duration {
	if duration == 0 {
		return 2 * time.Second
	}
	return duration / 3
}

// receiverFault is one fault of the embedded receiver: what the receiver does during it,
// how it begins and ends, what the receiver does after, and for how long.
type receiverFault struct {
	what, after string
	d           time.Duration
	begin       func()
	end         func() error
}

// receiverFaultOf is the fault the flags ask of recv (one at most, checked by
// startReceiver); ok is false for none.
func receiverFaultOf(f demoFlags, recv *forwardtest.Receiver) (fault receiverFault, ok bool) {
	switch {
	case recv != nil && f.stall > 0:
		return receiverFault{what: "stalls", after: "resumes", d: f.stall, begin: recv.Stall,
			end: func() error { recv.Resume(); return nil }}, true
	case recv != nil && f.down > 0:
		return receiverFault{what: "down", after: "back", d: f.down, begin: func() {
			_ = recv.SetRefuse(true)
			recv.CloseConnections()
		}, end: func() error { return recv.SetRefuse(false) }}, true
	}
	return receiverFault{}, false
}

// start runs the fault at the given time from now, for its duration, in a goroutine that
// ends with ctx at the latest, and prints when it begins and ends.
func (ft receiverFault) start(ctx context.Context, out io.Writer, at time.Duration) {
	go func() {
		select {
		case <-time.After(at):
		case <-ctx.Done():
			return
		}
		fmt.Fprintf(out, "\n[demo] receiver %s for %v\n", ft.what, ft.d)
		ft.begin()
		select {
		case <-time.After(ft.d):
		case <-ctx.Done():
		}
		if err := ft.end(); err != nil {
			fmt.Fprintf(out, "\n[demo] receiver cannot come back: %v\n", err)
			return
		}
		fmt.Fprintf(out, "\n[demo] receiver %s\n", ft.after)
	}()
}

// progress prints a line a second, every column per second, until ctx is done; the totals
// are in the summary.
func (d *demo) progress(ctx context.Context, started time.Time) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var last struct{ served, logged, delivered, dropped, spilled uint64 }
	fmt.Fprintln(d.out, "  time  requests/s  logged/s  delivered/s  dropped/s  spilled/s  degraded")
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			st := d.core.Stats()
			now := last
			now.served = uint64(d.served.Load())
			now.logged = st.Info.Entries + st.Err.Entries
			now.delivered = st.Info.Delivered + st.Err.Delivered
			now.dropped = st.Info.DroppedTotal() + st.Err.DroppedTotal()
			now.spilled = st.Err.Spilled
			degraded := "no"
			if st.Info.Degraded {
				degraded = "yes"
			}
			fmt.Fprintf(d.out, "  %3.0fs  %10d  %8d  %11d  %9d  %9d  %s\n", time.Since(started).Seconds(),
				now.served-last.served, now.logged-last.logged, now.delivered-last.delivered,
				now.dropped-last.dropped, now.spilled-last.spilled, degraded)
			last = now
		}
	}
}

// summary prints, once the core is closed, the table by stream, the table by tag (with what
// the embedded receiver, if any, got under each) and the closing line; it fails if the
// requests served and the entries logged differ, or a stream's counts do not add up.
func (d *demo) summary(recv *forwardtest.Receiver, started time.Time) error {
	st := d.core.Stats()
	tw := tabwriter.NewWriter(d.out, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(d.out)
	printStreams(tw, st)
	var got map[string]int64
	if recv != nil {
		_ = recv.WaitFor(func(s forwardtest.Stats) bool { return s.Entries >= int64(st.Info.Delivered+st.Err.Delivered) }, 5*time.Second)
		got = recv.TagCounts()
	}
	fmt.Fprintln(d.out)
	printTags(tw, st, got)
	served := d.served.Load()
	logged, delivered := st.Info.Entries+st.Err.Entries, st.Info.Delivered+st.Err.Delivered
	fmt.Fprintf(d.out, "\n%d requests served in %v, each logging one entry: %d logged, %d delivered",
		served, time.Since(started).Round(time.Millisecond), logged, delivered)
	if recv != nil {
		if err := recv.WaitFor(func(s forwardtest.Stats) bool { return s.Entries >= int64(delivered) }, 5*time.Second); err != nil {
			return err
		}
		fmt.Fprintf(d.out, "; the embedded receiver counted %d entries", recv.Len())
	}
	fmt.Fprintln(d.out)
	if uint64(served) != logged {
		return fmt.Errorf("%d requests served but %d entries logged", served, logged)
	}
	for _, s := range []fluentcore.StreamStats{st.Info, st.Err} {
		if s.Entries != s.Delivered+s.DroppedTotal()+s.Spilled {
			return fmt.Errorf("accounting identity broken: %+v", s)
		}
	}
	return nil
}

// printStreams prints the table by stream: its totals and its drops by reason.
func printStreams(tw *tabwriter.Writer, st fluentcore.Stats) {
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
}

// printTags prints the table by tag: what the core counted under each, and what the
// embedded receiver got (got, nil without one).
func printTags(tw *tabwriter.Writer, st fluentcore.Stats, got map[string]int64) {
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
}
