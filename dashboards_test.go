package fluentcore

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore/forwardtest"
	"github.com/fluentcore/fluentcore/internal/outcome"
	"github.com/fluentcore/fluentcore/internal/testkit"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap"
	"go.yaml.in/yaml/v3"
)

// What fluentcore ships for operators: the Grafana dashboard (dashboards/grafana.json), the
// alert rules (dashboards/alerts.yml, unit-tested by dashboards/alerts_test.yml through
// `make alert-rules`) and the queries of docs/operations.md. The tests below check that they
// name only what the library exports, and that every panel and every documented query
// returns data from series shaped like the library's own.

// libraryMetrics returns the metric families a core exports after a delivery on each
// stream (so that the histogram and the per-server series exist).
func libraryMetrics(t *testing.T) []*dto.MetricFamily {
	t.Helper()
	r := forwardtest.NewReceiver(t)
	reg := prometheus.NewRegistry()
	core := New(Config{Addr: r.Addr(), Metrics: MetricsConfig{Registerer: reg}})
	log := zap.New(core)
	log.Info("one delivery, so the histogram has a series")
	log.Error("and one on the err stream")
	if err := core.Sync(); err != nil {
		t.Fatal(err)
	}
	defer core.Close()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return mfs
}

// shippedQuery is one PromQL expression fluentcore ships, and where.
type shippedQuery struct {
	where, expr string
	alert       bool // an alert rule's condition: empty while nothing is wrong
}

// shippedQueries returns every PromQL expression of the dashboard (its panels' targets, and
// its template variables' queries when template is set), the alert rules and
// docs/operations.md's ```promql blocks. A documented query that is an alert's condition
// (the same string, blanks aside) is marked as one.
func shippedQueries(t *testing.T, template bool) []shippedQuery {
	t.Helper()
	var qs []shippedQuery
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ RefID, Expr string }
		}
		Templating struct {
			List []struct {
				Name  string
				Query any
			}
		}
	}
	raw, err := os.ReadFile("dashboards/grafana.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("grafana.json: %v", err)
	}
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			qs = append(qs, shippedQuery{where: fmt.Sprintf("grafana.json panel %q %s", p.Title, tg.RefID), expr: tg.Expr})
		}
	}
	if template {
		for _, v := range dash.Templating.List {
			if q, ok := v.Query.(string); ok {
				qs = append(qs, shippedQuery{where: "grafana.json variable " + v.Name, expr: q})
			}
		}
	}
	var rules struct {
		Groups []struct {
			Rules []struct{ Alert, Expr string }
		}
	}
	raw, err = os.ReadFile("dashboards/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &rules); err != nil {
		t.Fatalf("alerts.yml: %v", err)
	}
	alertExprs := map[string]bool{}
	for _, g := range rules.Groups {
		for _, rule := range g.Rules {
			if rule.Alert == "" || rule.Expr == "" {
				t.Errorf("rule without alert name or expression: %+v", rule)
			}
			qs = append(qs, shippedQuery{where: "alerts.yml " + rule.Alert, expr: rule.Expr, alert: true})
			alertExprs[blanksOut(rule.Expr)] = true
		}
	}
	for _, q := range docQueries(t) {
		qs = append(qs, shippedQuery{where: "docs/operations.md", expr: q, alert: alertExprs[blanksOut(q)]})
	}
	return qs
}

// docQueries returns the ```promql blocks of docs/operations.md.
func docQueries(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile("docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	var qs []string
	for _, m := range regexp.MustCompile("(?s)```promql\n(.*?)```").FindAllStringSubmatch(string(raw), -1) {
		qs = append(qs, strings.TrimSpace(m[1]))
	}
	if len(qs) < 5 {
		t.Fatalf("docs/operations.md has only %d promql blocks", len(qs))
	}
	return qs
}

func blanksOut(s string) string { return strings.Join(strings.Fields(s), " ") }

// The shipped Grafana dashboard, alert rules and documented queries refer only to metrics,
// and label values, that the library exports.
func TestDashboardsReferToRealMetrics(t *testing.T) {
	exported := map[string]bool{}
	for _, mf := range libraryMetrics(t) {
		exported[mf.GetName()] = true
	}
	qs := shippedQueries(t, true)
	if len(qs) < 10 {
		t.Fatalf("found only %d expressions", len(qs))
	}
	metricRE := regexp.MustCompile(`fluentcore_[a-z_]+`)
	labelRE := regexp.MustCompile(`(stream|reason)\s*(=~|=)\s*"([^"]*)"`)
	streams := []string{"info", "err"}
	for _, q := range qs {
		for _, name := range metricRE.FindAllString(q.expr, -1) {
			base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")
			if !exported[name] && !exported[base] {
				t.Errorf("%s: %q refers to %s, which fluentcore does not export", q.where, q.expr, name)
			}
		}
		for _, m := range labelRE.FindAllStringSubmatch(q.expr, -1) {
			valid := streams
			if m[1] == "reason" {
				valid = nil
				for r := range outcome.NumReasons {
					valid = append(valid, r.String())
				}
			}
			for _, v := range strings.Split(m[3], "|") {
				if !slices.Contains(valid, v) {
					t.Errorf("%s: %q: %s value %q is not one fluentcore uses", q.where, q.expr, m[1], v)
				}
			}
		}
	}
}

// Every panel of the dashboard and every documented query returns data, through promtool,
// from series made of the library's own: each metric family a core exports, with its
// labels, given values shaped like a healthy instance (a:9100) beside one whose receiver is
// down from 5m to 10m (b:9100). Each query must return a non-empty result while both are
// healthy (4m), during the outage (8m) and after it (14m), and no NaN while healthy: a
// renamed metric or label, or a query that returns nothing ("No data"), fails. (An alert's
// condition is empty while nothing is wrong; alerts_test.yml tests those.) A few panels
// are held to what they must read: 0 for "no drops", not nothing.
func TestDashboardQueriesReturnData(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed (apt-get install prometheus): skipped, as make alert-rules does")
	}
	series := dashboardSeries(libraryMetrics(t))

	vars := strings.NewReplacer(`"$job"`, `".+"`, `"$instance"`, `".+"`,
		"$__rate_interval", "1m", "$__interval", "15s", "$__range", "10m")
	var b strings.Builder
	b.WriteString("rule_files: []\nevaluation_interval: 15s\ntests:\n  - interval: 15s\n    input_series:\n")
	for _, s := range series {
		fmt.Fprintf(&b, "      - series: '%s'\n        values: '%s'\n", s.name, s.values)
	}
	b.WriteString("    promql_expr_test:\n")
	check := func(expr, at string) {
		fmt.Fprintf(&b, "      - expr: %s\n        eval_time: %s\n        exp_samples: []\n", strconv.Quote(expr), at)
	}
	var checked int
	for _, q := range shippedQueries(t, false) {
		if q.alert {
			continue
		}
		expr := vars.Replace(q.expr)
		if strings.Contains(expr, "$") {
			t.Errorf("%s: a variable the test does not know: %s", q.where, q.expr)
			continue
		}
		for _, at := range []string{"4m", "8m", "14m"} {
			check("absent("+expr+")", at) // empty only if expr returns something
		}
		check("absent(("+expr+") == ("+expr+"))", "4m") // NaN != NaN
		checked++
	}
	// What some panels must read, not only that they read something.
	// panel returns a panel target's query with $instance set to instance (".+": all).
	panel := func(title, ref, instance string) string {
		for _, q := range shippedQueries(t, false) {
			if q.where == fmt.Sprintf("grafana.json panel %q %s", title, ref) {
				return vars.Replace(strings.ReplaceAll(q.expr, `"$instance"`, strconv.Quote(instance)))
			}
		}
		t.Fatalf("no panel %q target %s", title, ref)
		return ""
	}
	check(`absent((`+panel("Info shed %", "A", "a:9100")+`) == 0)`, "8m")  // nothing dropped: 0
	check(`absent((`+panel("Info shed %", "A", "b:9100")+`) > 0.9)`, "8m") // down: nearly all
	check(`absent((`+panel("Info shed %", "B", "b:9100")+`) > 0.9)`, "8m") // 1 - keep ratio
	check(`absent((`+panel("Info shed %", "B", ".+")+`) == 0)`, "4m")
	check(`absent((`+panel("Dropped /s by reason", "A", ".+")+`) == 0)`, "4m") // no drops: 0, not "No data"
	check(`absent((`+panel("Err spilled, replayed, dropped /s", "C", ".+")+`) == 0)`, "8m")
	check(`absent((`+panel("Seconds since the last delivery", "A", "b:9100")+`) > 120)`, "8m")
	check(panel("Seconds since the last delivery", "A", "c:9100"), "8m")             // never delivered: not time() - 0
	check(`absent((`+panel("Last delivery", "A", "c:9100")+`) == 0)`, "8m")          // but 0, shown as "never"
	check(`absent((`+panel("Last delivery", "A", "a:9100")+`) == 1000 * 480)`, "8m") // a date, in ms
	check(`absent((`+panel("Send in progress", "A", ".+")+`) == 0)`, "4m")
	check(`absent((`+panel("Send duration p99", "A", ".+")+`) < 0.01)`, "4m")
	check(`absent((`+panel("Degrade transitions in the range", "A", ".+")+`) == 0)`, "4m")

	dir := t.TempDir()
	file := filepath.Join(dir, "dashboard_queries_test.yml")
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(promtool, "test", "rules", file).CombinedOutput()
	if err != nil {
		t.Errorf("promtool test rules: %v: a shipped query returns nothing (or NaN, or not what it must) from the library's series; "+
			"each FAILED expr below is absent(<the query>):\n%s", err, out)
	}
	if checked < 20 {
		t.Errorf("only %d queries checked", checked)
	}
	t.Logf("%d queries evaluated, %d input series", checked, len(series))
}

// inputSeries is one series of a promtool test: its name and labels, its values in
// promtool's notation.
type inputSeries struct{ name, values string }

// dashboardSeries gives each series of mfs values
// over 15 minutes at 15 s, for two instances of job shop: a:9100 healthy throughout, b:9100
// with its receiver down from 5m to 10m; and a third, c:9100, whose info stream has never
// delivered (its last success alone).
func dashboardSeries(mfs []*dto.MetricFamily) []inputSeries {
	type fam struct {
		name   string
		typ    dto.MetricType
		labels []map[string]string
	}
	var fams []fam
	for _, mf := range mfs {
		f := fam{name: mf.GetName(), typ: mf.GetType()}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			f.labels = append(f.labels, l)
		}
		fams = append(fams, f)
	}
	const steps, step = 60, 15.0 // 15 minutes at 15 s
	down := func(inst string, k int) bool { return inst == "b:9100" && k >= 20 && k < 40 }
	var out []inputSeries
	for _, f := range fams {
		for _, l := range f.labels {
			for _, inst := range []string{"a:9100", "b:9100"} {
				kinds := []string{""}
				if f.typ == dto.MetricType_HISTOGRAM {
					kinds = []string{"_count", "_sum"}
					for _, le := range histogramBounds(mfs, f.name) {
						kinds = append(kinds, "_bucket:"+le)
					}
				}
				for _, kind := range kinds {
					name, labels := f.name+kind, maps.Clone(l)
					if le, ok := strings.CutPrefix(kind, "_bucket:"); ok {
						name, labels["le"] = f.name+"_bucket", le
					}
					labels["job"], labels["instance"] = "shop", inst
					vals := make([]float64, steps+1)
					var sum float64
					for k := range vals {
						dn, after := down(inst, k), inst == "b:9100" && k >= 40
						if f.typ == dto.MetricType_GAUGE {
							vals[k] = gaugeValue(f.name, labels, dn, k, step, func() int {
								if inst == "b:9100" && k >= 20 {
									return 20
								}
								return -1
							}())
							continue
						}
						if k > 0 {
							sum += step * counterRate(name, labels, dn, after)
						}
						vals[k] = sum
					}
					out = append(out, inputSeries{name: name + formatLabels(labels), values: promtoolValues(vals)})
				}
			}
		}
	}
	for _, inst := range []string{"a:9100", "b:9100"} {
		out = append(out, inputSeries{name: `up{instance="` + inst + `",job="shop"}`, values: fmt.Sprintf("1x%d", steps)})
	}
	// c:9100's info stream has never delivered: its last success reads 0 throughout.
	out = append(out, inputSeries{
		name:   `fluentcore_last_send_success_timestamp_seconds{instance="c:9100",job="shop",server="tcp://fluentd:24224",stream="info"}`,
		values: fmt.Sprintf("0x%d", steps),
	})
	return out
}

// histogramBounds returns the bucket bounds of the histogram name in mfs, as Prometheus
// writes them in le, with +Inf.
func histogramBounds(mfs []*dto.MetricFamily, name string) []string {
	for _, mf := range mfs {
		if mf.GetName() != name || len(mf.GetMetric()) == 0 {
			continue
		}
		var les []string
		for _, b := range mf.GetMetric()[0].GetHistogram().GetBucket() {
			les = append(les, strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64))
		}
		return append(les, "+Inf")
	}
	return []string{"+Inf"}
}

// counterRate is the per-second increase of a counter series: entries logged, delivered
// while the receiver is up; queue_full and degraded drops, spills, send errors while it is
// down; spilled err entries replayed after; sends of 1 ms while it is up.
func counterRate(name string, l map[string]string, down, after bool) float64 {
	info := l["stream"] == "info"
	switch name {
	case "fluentcore_entries_total":
		if info {
			return 1000
		}
		return 10
	case "fluentcore_delivered_entries_total", "fluentcore_server_delivered_entries_total":
		switch {
		case down:
			return 0
		case info:
			return 1000
		}
		return 10
	case "fluentcore_dropped_entries_total":
		switch {
		case !down || !info:
			return 0
		case l["reason"] == "queue_full":
			return 900
		case l["reason"] == "degraded":
			return 90
		}
		return 0
	case "fluentcore_spilled_entries_total":
		if down {
			return 10
		}
		return 0
	case "fluentcore_replayed_entries_total":
		if after {
			return 5
		}
		return 0
	case "fluentcore_send_errors_total", "fluentcore_reconnects_total":
		if down {
			return 1
		}
		return 0
	case "fluentcore_degrade_transitions_total":
		return 0
	case "fluentcore_sent_batches_total", "fluentcore_send_duration_seconds_count":
		if down {
			return 0
		}
		return 2
	case "fluentcore_sent_bytes_total":
		if down {
			return 0
		}
		return 100_000
	case "fluentcore_send_duration_seconds_sum":
		if down {
			return 0
		}
		return 2 * 0.001
	case "fluentcore_send_duration_seconds_bucket":
		le, _ := strconv.ParseFloat(l["le"], 64)
		if down || le < 0.001 {
			return 0
		}
		return 2
	case "fluentcore_truncated_entries_total", "fluentcore_spill_corrupt_segments_total", "fluentcore_handshake_failures_total":
		return 0
	}
	return 1
}

// gaugeValue is a gauge series' value at step k; downSince is the step the receiver went
// down at, or -1.
func gaugeValue(name string, l map[string]string, down bool, k int, step float64, downSince int) float64 {
	info := l["stream"] == "info"
	pick := func(up, dn float64) float64 {
		if down {
			return dn
		}
		return up
	}
	switch name {
	case "fluentcore_buffer_bytes":
		return pick(100_000, 7_800_000)
	case "fluentcore_buffer_capacity_bytes":
		if info {
			return 8 << 20
		}
		return 4 << 20
	case "fluentcore_degraded", "fluentcore_dropping":
		return pick(0, 1)
	case "fluentcore_keep_ratio":
		return pick(1, 0.01)
	case "fluentcore_degrade_admit_ratio":
		return pick(1, 0.5)
	case "fluentcore_capacity_entries_per_second":
		return pick(5000, 0)
	case "fluentcore_server_connections":
		return pick(1, 0)
	case "fluentcore_pending_entries":
		if info {
			return pick(50, 150_000)
		}
		return pick(1, 50)
	case "fluentcore_oldest_pending_seconds":
		if down {
			return math.Min(float64(k-downSince)*step, 5)
		}
		return 0.3
	case "fluentcore_send_in_progress_seconds":
		return 0
	case "fluentcore_last_send_success_timestamp_seconds":
		if down {
			return float64(downSince) * step
		}
		return float64(k) * step
	case "fluentcore_spill_bytes":
		return pick(0, 1<<20)
	case "fluentcore_server_frames_in_flight":
		return 0
	}
	return 1
}

func formatLabels(l map[string]string) string {
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%q", k, l[k])
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// promtoolValues writes vals in promtool's notation: a run with a constant step as a+bxn.
func promtoolValues(vals []float64) string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	var parts []string
	for i := 0; i < len(vals); {
		j := i
		var d float64
		if i+1 < len(vals) {
			d = vals[i+1] - vals[i]
			for j = i + 1; j+1 < len(vals) && math.Abs(vals[j+1]-vals[j]-d) < 1e-9; j++ {
			}
		}
		switch n := j - i; {
		case n == 0:
			parts = append(parts, f(vals[i]))
		case d == 0:
			parts = append(parts, fmt.Sprintf("%sx%d", f(vals[i]), n))
		case d > 0:
			parts = append(parts, fmt.Sprintf("%s+%sx%d", f(vals[i]), f(d), n))
		default:
			parts = append(parts, fmt.Sprintf("%s-%sx%d", f(vals[i]), f(-d), n))
		}
		i = j + 1
	}
	return strings.Join(parts, " ")
}

// docs/operations.md shows every alert rule's condition as alerts.yml has it (blanks
// aside), so the page an operator reads is the rule that pages them.
func TestDocsShowTheShippedRules(t *testing.T) {
	documented := map[string]bool{}
	for _, q := range docQueries(t) {
		documented[blanksOut(q)] = true
	}
	n := 0
	for _, q := range shippedQueries(t, false) {
		if q.alert && !strings.HasPrefix(q.where, "docs/") {
			n++
			if !documented[blanksOut(q.expr)] {
				t.Errorf("%s: its expression is not in docs/operations.md:\n%s", q.where, q.expr)
			}
		}
	}
	if n < 10 {
		t.Errorf("only %d alert rules", n)
	}
}

// The stall of alerts_test.yml's 80 s scenario, driven for real: a receiver that accepts and
// stops reading. The info stream asks no acks, so its writes go into socket buffers until
// one times out (Timeouts.Write); the sender then reconnects and writes into the new
// connection's buffers, which count as delivered but are no progress:
// fluentcore_last_send_success_timestamp_seconds{stream="info"}, which
// FluentcoreReceiverNotAccepting keys on, stays at the last frame written before the first
// timeout, and moves again only once the receiver reads and writes still succeed
// Timeouts.Write after the last timeout. The err stream's entries, unacked, go to Spill.Fallback:
// fluentcore_spilled_entries_total{stream="err"}, which FluentcoreErrSpilled keys on, grows.
// The sink's clock is injected and moves in steps shorter than Timeouts.Write while the
// receiver stalls, as time moves through a real stall between two timeouts.
func TestStallFreezesLastSendSuccessAndSpillsErr(t *testing.T) {
	r := forwardtest.NewReceiver(t, forwardtest.WithReadBuffer(4<<10))
	clk := testkit.NewManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	const writeTimeout = 200 * time.Millisecond
	core := NewWithClock(fastRetry(Config{
		Addr:      r.Addr(),
		Metrics:   MetricsConfig{Disabled: true},
		Timeouts:  TimeoutsConfig{Write: writeTimeout, Ack: writeTimeout, Close: 100 * time.Millisecond},
		Spill:     SpillConfig{After: time.Millisecond, Fallback: io.Discard},
		Transport: TransportConfig{FlushInterval: time.Millisecond, MaxBatchBytes: 16 << 10},
	}), clk)
	defer core.Close()
	logger := zap.New(core)
	info, errs := map[string]string{"stream": "info"}, map[string]string{"stream": "err"}
	lastSuccess := func() float64 {
		return gauge(t, core, "fluentcore_last_send_success_timestamp_seconds", info)
	}
	logger.Info("before the stall")
	if err := core.Sync(); err != nil {
		t.Fatal(err)
	}
	if got, want := lastSuccess(), float64(clk.Now().UnixNano())/1e9; got != want {
		t.Fatalf("last success %v before the stall, want the clock's %v", got, want)
	}

	r.Stall()
	logger.Error("while the receiver reads nothing")
	st := sinkOf(core).streams[infoStream]
	pad := strings.Repeat("p", 400)
	logUntil := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("not %s within 30s: %+v", what, core.Stats().Info)
			}
			for range 50 {
				logger.Info("into the stall", zap.String("pad", pad))
			}
		}
	}
	logUntil("a write timed out", func() bool { return st.Stats().SendErrors > 0 })
	before := lastSuccess() // the last frame written into the first connection's buffers
	clk.Add(writeTimeout / 4)
	reconnects, delivered := st.Stats().Reconnects, st.Counts.Delivered.Load()
	logUntil("frames written into a new connection", func() bool {
		return st.Stats().Reconnects > reconnects && st.Counts.Delivered.Load() > delivered
	})
	clk.Add(writeTimeout / 4)
	reconnects, delivered = st.Stats().Reconnects, st.Counts.Delivered.Load()
	logUntil("frames written into another new connection", func() bool {
		return st.Stats().Reconnects > reconnects && st.Counts.Delivered.Load() > delivered
	})
	if got := lastSuccess(); got != before {
		t.Errorf("info last success %v after frames went into fresh connections of a stalled receiver, want %v: "+
			"writes into a receiver that reads nothing are no progress", got, before)
	}
	clk.Add(writeTimeout) // the err frame's ack overdue, on the clock
	waitUntil(t, "the err entry in Spill.Fallback", func() bool {
		return gauge(t, core, "fluentcore_spilled_entries_total", errs) == 1
	})

	r.Resume() // time moves on, past Timeouts.Write after the last timeout
	logUntil("info taken again", func() bool {
		if lastSuccess() == float64(clk.Now().UnixNano())/1e9 {
			return true
		}
		clk.Add(writeTimeout)
		return false
	})
}

// A stream that has never delivered reads "never" on the dashboard, not 57 years: "Last
// delivery" maps the gauge's 0 to the text, and shows the others as dates (the panel's
// query is in ms, for Grafana's dateTimeFromNow).
func TestLastDeliveryPanelShowsNever(t *testing.T) {
	var dash struct {
		Panels []struct {
			Title       string
			FieldConfig struct {
				Defaults struct {
					Unit     string
					Mappings []struct {
						Type    string
						Options map[string]struct{ Text string }
					}
				}
			}
		}
	}
	readDashboard(t, &dash)
	for _, p := range dash.Panels {
		if p.Title != "Last delivery" {
			continue
		}
		d := p.FieldConfig.Defaults
		if d.Unit != "dateTimeFromNow" {
			t.Errorf("Last delivery's unit %q, want dateTimeFromNow", d.Unit)
		}
		for _, m := range d.Mappings {
			if m.Type == "value" && m.Options["0"].Text == "never" {
				return
			}
		}
		t.Fatalf("Last delivery maps no 0 to \"never\": %+v", d.Mappings)
	}
	t.Fatal(`no panel "Last delivery"`)
}

// The pages' thresholds follow the defaults they are reasoned from (docs/operations.md):
// FluentcoreReceiverNotAccepting waits out Timeouts.Ack and Timeouts.Write, the longest a
// healthy frame's ack or write may take, and still pages within an 80 s stall (its
// threshold, its for and a 15 s evaluation fit in it); FluentcoreErrPendingTooOld is
// past Timeouts.Ack and past Spill.After plus a hung write's Timeouts.Write.
func TestAlertThresholdsFollowTheDefaults(t *testing.T) {
	raw, err := os.ReadFile("dashboards/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct{ Alert, Expr, For string }
		}
	}
	if err := yaml.Unmarshal(raw, &rules); err != nil {
		t.Fatal(err)
	}
	// rule returns the threshold after metric's "> " in alert's expression, and its for.
	rule := func(alert, metric string) (threshold, hold time.Duration) {
		t.Helper()
		for _, g := range rules.Groups {
			for _, r := range g.Rules {
				if r.Alert != alert {
					continue
				}
				m := regexp.MustCompile(regexp.QuoteMeta(metric) + `[^>]*>\s*([0-9.]+)`).FindStringSubmatch(r.Expr)
				if m == nil {
					t.Fatalf("%s: no threshold on %s in %q", alert, metric, r.Expr)
				}
				v, err := strconv.ParseFloat(m[1], 64)
				if err != nil {
					t.Fatal(err)
				}
				if r.For != "" {
					if hold, err = time.ParseDuration(r.For); err != nil {
						t.Fatalf("%s: for %q: %v", alert, r.For, err)
					}
				}
				return time.Duration(v * float64(time.Second)), hold
			}
		}
		t.Fatalf("no rule %s", alert)
		return 0, 0
	}
	const stall, evaluation = 80 * time.Second, 15 * time.Second
	th, hold := rule("FluentcoreReceiverNotAccepting", "fluentcore_last_send_success_timestamp_seconds")
	if th < DefaultAckTimeout || th < DefaultWriteTimeout {
		t.Errorf("FluentcoreReceiverNotAccepting at %v: within Timeouts.Ack (%v) or Timeouts.Write (%v)", th, DefaultAckTimeout, DefaultWriteTimeout)
	}
	if th+hold+evaluation >= stall {
		t.Errorf("FluentcoreReceiverNotAccepting at %v for %v: a %v stall does not page", th, hold, stall)
	}
	th, _ = rule("FluentcoreErrPendingTooOld", "fluentcore_oldest_pending_seconds")
	if th < DefaultAckTimeout || th < DefaultSpillAfter+DefaultWriteTimeout {
		t.Errorf("FluentcoreErrPendingTooOld at %v: within Timeouts.Ack (%v) or Spill.After (%v) plus Timeouts.Write (%v)",
			th, DefaultAckTimeout, DefaultSpillAfter, DefaultWriteTimeout)
	}
}

// An err entry spilled in a stall whose frame the receiver acknowledged after all is in both
// places: the err panel of the range shows that count beside spilled, so that spilled is not
// read as missing at the receiver.
func TestErrRangePanelCountsDuplicates(t *testing.T) {
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	readDashboard(t, &dash)
	for _, p := range dash.Panels {
		if !strings.HasPrefix(p.Title, "Err in the range") {
			continue
		}
		for _, tg := range p.Targets {
			if strings.Contains(tg.Expr, "fluentcore_duplicated_entries_total") && strings.Contains(tg.Expr, `stream="err"`) {
				return
			}
		}
		t.Fatalf("%q has no target over fluentcore_duplicated_entries_total: %+v", p.Title, p.Targets)
	}
	t.Fatal(`no panel "Err in the range"`)
}

// readDashboard decodes the shipped Grafana dashboard into dash.
func readDashboard(t *testing.T, dash any) {
	t.Helper()
	raw, err := os.ReadFile("dashboards/grafana.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, dash); err != nil {
		t.Fatal(err)
	}
}
