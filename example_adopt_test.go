package fluentcore_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fluentcore/fluentcore"
	"github.com/fluentcore/fluentcore/forwardtest"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
)

// A tag per logger: the entries of a logger made With a Tag go under Config.Tags.Template
// ("{tag}.{name}.{stream}"), so fluentd can route them with <match shop.audit.**>.
// Tags.FromName does the same from zap's logger names.
func ExampleTag() {
	receiver, _ := forwardtest.Start()
	defer receiver.Close()
	core := fluentcore.New(fluentcore.Config{Addr: receiver.Addr(), Tag: "shop", Tags: fluentcore.TagsConfig{FromName: true}})

	logger := zap.New(core)
	logger.With(fluentcore.Tag("audit")).Info("refund approved", zap.String("id", "r-7"))
	logger.Named("cache").Warn("cache slow")
	logger.Info("untagged")
	_ = core.Close()

	entries, _ := receiver.WaitForEntries(3, 5*time.Second)
	for _, e := range entries {
		fmt.Println(e.Tag, e.Record["msg"])
	}
	// Unordered output:
	// shop.audit.info refund approved
	// shop.cache.info cache slow
	// shop.info untagged
}

// TLS with a shared key: the address says tls://, the TLS config says whom to trust, and the
// key is a Secret, which no printer, log line or error ever shows.
func ExampleNewSecret() {
	cert, _ := forwardtest.NewTLSCert() // a throwaway CA; in production, your CA's pool
	receiver, _ := forwardtest.Start(forwardtest.WithTLS(cert.ServerConfig()), forwardtest.WithSharedKey("s3cret"))
	defer receiver.Close()

	cfg := fluentcore.Config{
		Addr: receiver.Addr(), // "tls://127.0.0.1:port"
		Tag:  "shop",
		Security: fluentcore.SecurityConfig{
			TLS:       cert.ClientConfig(),
			SharedKey: fluentcore.NewSecret("s3cret"), // or SharedKeyFile, or FLUENT_SECURITY_SHARED_KEY
		},
	}
	fmt.Println(strings.Contains(fmt.Sprintf("%+v", cfg), "s3cret"))
	core := fluentcore.New(cfg)
	zap.New(core).Info("over TLS")
	fmt.Println(core.Close())

	entries, _ := receiver.WaitForEntries(1, 5*time.Second)
	fmt.Println(entries[0].Tag, entries[0].Record["msg"])
	// Output:
	// false
	// <nil>
	// shop.info over TLS
}

// A durable err spill: err entries that cannot be delivered for Spill.After go to segment
// files in Spill.Dir, and are replayed, in order, once the receiver is back — also by the
// next process, if this one exits first.
func ExampleConfig_spillDir() {
	receiver, _ := forwardtest.Start()
	defer receiver.Close()
	_ = receiver.SetRefuse(true) // the receiver is down
	dir, _ := os.MkdirTemp("", "spill")
	defer os.RemoveAll(dir)

	core := fluentcore.New(fluentcore.Config{
		Addr:  receiver.Addr(),
		Tag:   "shop",
		Spill: fluentcore.SpillConfig{Dir: filepath.Join(dir, "fluentcore"), After: 100 * time.Millisecond},
	})
	zap.New(core).Error("payment failed", zap.String("id", "o-9"))
	// On disk once sends have failed for Spill.After.
	within(10*time.Second, func() bool { return core.Stats().Err.Spilled == 1 })
	fmt.Println("spilled", core.Stats().Err.Spilled)

	_ = receiver.SetRefuse(false) // back: the spill is replayed, and counted once acked
	entries, _ := receiver.WaitForEntries(1, 10*time.Second)
	fmt.Println(entries[0].Tag, entries[0].Record["msg"], entries[0].Record["id"])
	within(10*time.Second, func() bool { return core.Stats().Err.Replayed == 1 })
	_ = core.Close()
	fmt.Println("replayed", core.Stats().Err.Replayed)
	// Output:
	// spilled 1
	// shop.err payment failed o-9
	// replayed 1
}

// within polls cond until it holds or d has passed, and says which.
func within(d time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(d); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// OnEvent hears a stream's state changes as they happen: here, a Spill.Dir that cannot be
// used (a file stands where the directory should be), so err entries would go to
// Spill.Fallback. It is called on the sink's goroutine: keep it short.
func ExampleConfig_onEvent() {
	receiver, _ := forwardtest.Start()
	defer receiver.Close()
	blocker, _ := os.CreateTemp("", "not-a-dir")
	defer os.Remove(blocker.Name())
	_ = blocker.Close()

	events := make(chan fluentcore.Event, 8)
	core := fluentcore.New(fluentcore.Config{
		Addr:    receiver.Addr(),
		Spill:   fluentcore.SpillConfig{Dir: filepath.Join(blocker.Name(), "spill")},
		OnEvent: func(e fluentcore.Event) { events <- e },
	})
	defer core.Close()

	e := <-events
	fmt.Println(e.Stream, e.Kind, e.Err != nil)
	// Output: err spill_disabled true
}

// An HTTP service: one core for the process, its metrics on the service's /metrics, the
// handlers logging through a zap.Logger. With the default Registerer (nil), the metrics are
// where promhttp.Handler() finds them.
func Example_httpService() {
	receiver, _ := forwardtest.Start()
	defer receiver.Close()
	reg := prometheus.NewRegistry()
	core := fluentcore.New(fluentcore.Config{Addr: receiver.Addr(), Tag: "shop", Metrics: fluentcore.MetricsConfig{Registerer: reg}})
	defer core.Close()
	logger := zap.New(core)

	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/orders/{id}", func(w http.ResponseWriter, r *http.Request) {
		logger.Info("order placed", zap.String("id", r.PathValue("id")))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	resp, _ := http.Get(srv.URL + "/orders/o-1")
	resp.Body.Close()
	_ = core.Sync()
	resp, _ = http.Get(srv.URL + "/metrics")
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, `fluentcore_delivered_entries_total{stream="info"}`) {
			fmt.Println(line)
		}
	}
	// Output: fluentcore_delivered_entries_total{stream="info"} 1
}

// Every kind has its own name, and a value that is no kind says so.
func ExampleEventKind_String() {
	fmt.Println(fluentcore.EventDegraded, fluentcore.EventSpillFailed, fluentcore.EventKind(99))
	// Output: degraded spill_failed unknown
}
