package fluentcore_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/fluentcore/fluentcore"
	"github.com/fluentcore/fluentcore/forwardtest"
	"github.com/fluentcore/fluentcore/internal/testkit"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
)

// scrape returns what the usual handler, promhttp.Handler() on the default registry,
// serves.
func scrape(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(promhttp.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// With the default config the metrics are where promhttp.Handler() reads: the dropped
// counters are scraped with no setting. Two cores with the default config, and a reload
// (the new core made before the old one is closed), register without an error and share
// the series, whose counters never go backwards; Metrics.Disabled registers nothing. Not parallel:
// it reads the default registry, which other cores of this package may share while it
// runs (its counts are lower bounds for that reason).
func TestDefaultConfigMetricsOnTheUsualHandler(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	info := map[string]string{"stream": "info"}
	delivered := func() float64 {
		return testkit.Metric(t, prometheus.DefaultGatherer, "fluentcore_delivered_entries_total", info)
	}

	old := fluentcore.New(fluentcore.Config{Addr: r.Addr()})
	for range 3 {
		zap.New(old).Info("before the reload")
	}
	if err := old.Sync(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	body := scrape(t)
	for _, want := range []string{
		`fluentcore_dropped_entries_total{reason="queue_full",stream="info"}`,
		`fluentcore_delivered_entries_total{stream="info"}`,
	} {
		if !strings.Contains(body, want) {
			t.Fatalf("promhttp.Handler() does not serve %s:\n%s", want, body)
		}
	}
	d1 := delivered()
	if d1 < 3 {
		t.Fatalf("delivered %v, want at least the 3 logged", d1)
	}

	// The reload: a second core with the same (default) config, then the old one closed.
	next := fluentcore.New(fluentcore.Config{Addr: r.Addr()})
	zap.New(next).Info("after the reload")
	if err := next.Sync(); err != nil {
		t.Fatalf("second core on the default registry: %v", err)
	}
	if d2 := delivered(); d2 < d1+1 {
		t.Fatalf("delivered %v with both cores, want at least %v", d2, d1+1)
	}
	d2 := delivered()
	if err := old.Close(); err != nil {
		t.Fatalf("old core's Close: %v", err)
	}
	if d3 := delivered(); d3 < d2 {
		t.Fatalf("delivered went back from %v to %v when the old core closed", d2, d3)
	}
	zap.New(next).Info("still counted")
	if err := next.Sync(); err != nil {
		t.Fatal(err)
	}
	if d4 := delivered(); d4 < d2+1 {
		t.Fatalf("delivered %v after the old core closed, want at least %v", d4, d2+1)
	}
	if err := next.Close(); err != nil {
		t.Fatal(err)
	}

	// The opt-out: nothing of this core's on the default registry.
	quiet := fluentcore.New(fluentcore.Config{Addr: r.Addr(), Metrics: fluentcore.MetricsConfig{Disabled: true, ConstLabels: prometheus.Labels{"opted": "out"}}})
	zap.New(quiet).Info("not scraped")
	if err := quiet.Sync(); err != nil {
		t.Fatal(err)
	}
	if body := scrape(t); strings.Contains(body, `opted="out"`) {
		t.Fatal("Metrics.Disabled: the core's series are on the default registry")
	}
	if err := quiet.Close(); err != nil {
		t.Fatal(err)
	}
	if st := quiet.Stats(); st.Info.Delivered != 1 {
		t.Fatalf("Metrics.Disabled: Stats says %d delivered, want 1", st.Info.Delivered)
	}
	if err := (fluentcore.Config{Metrics: fluentcore.MetricsConfig{Disabled: true, Registerer: prometheus.NewRegistry()}}).Validate(); err == nil {
		t.Fatal("Metrics.Disabled with a Registerer: no Validate error")
	}
}
