package fluentcore

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/fluentcore/fluentcore/forwardtest"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.yaml.in/yaml/v3"
)

// The shipped Grafana dashboard and alert rules refer only to metrics, and label values,
// that the library exports.
func TestDashboardsReferToRealMetrics(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	reg := prometheus.NewRegistry()
	core := New(Config{Addr: r.Addr(), Registerer: reg})
	zap.New(core).Info("one delivery, so the histogram has a series")
	if err := core.Sync(); err != nil {
		t.Fatal(err)
	}
	defer core.Close()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]bool{}
	for _, mf := range mfs {
		exported[mf.GetName()] = true
	}

	var exprs []string
	var dash struct {
		Panels []struct {
			Targets []struct{ Expr string }
		}
		Templating struct{ List []struct{ Query any } }
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
			exprs = append(exprs, tg.Expr)
		}
	}
	for _, v := range dash.Templating.List {
		if q, ok := v.Query.(string); ok {
			exprs = append(exprs, q)
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
	for _, g := range rules.Groups {
		for _, rule := range g.Rules {
			if rule.Alert == "" || rule.Expr == "" {
				t.Errorf("rule without alert name or expression: %+v", rule)
			}
			exprs = append(exprs, rule.Expr)
		}
	}
	if len(exprs) < 10 {
		t.Fatalf("found only %d expressions", len(exprs))
	}

	metricRE := regexp.MustCompile(`fluentcore_[a-z_]+`)
	labelRE := regexp.MustCompile(`(stream|reason)\s*(=~|=)\s*"([^"]*)"`)
	streams := []string{"info", "err"}
	for _, e := range exprs {
		for _, name := range metricRE.FindAllString(e, -1) {
			base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")
			if !exported[name] && !exported[base] {
				t.Errorf("%q refers to %s, which fluentcore does not export", e, name)
			}
		}
		for _, m := range labelRE.FindAllStringSubmatch(e, -1) {
			valid := streams
			if m[1] == "reason" {
				valid = dropReasonNames[:]
			}
			for _, v := range strings.Split(m[3], "|") {
				if !slices.Contains(valid, v) {
					t.Errorf("%q: %s value %q is not one fluentcore uses", e, m[1], v)
				}
			}
		}
	}
}
