package fluentcore

import (
	"strings"
	"testing"

	"github.com/fluentcore/fluentcore/forwardtest"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
)

// The exposition of a fresh core's counters, compared whole.
func TestMetricsExposition(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	core := New(Config{Addr: r.Addr(), Tag: "m"})
	logger := zap.New(core)
	logger.Info("one")
	logger.Info("two")
	logger.Error("three")
	if err := core.Sync(); err != nil {
		t.Fatal(err)
	}
	core.Close()
	want := `
# HELP fluentcore_entries_total Entries at an enabled level that reached the core, including those dropped before encoding.
# TYPE fluentcore_entries_total counter
fluentcore_entries_total{stream="err"} 1
fluentcore_entries_total{stream="info"} 2
# HELP fluentcore_delivered_entries_total Entries the receiver has (written, or acknowledged when acks are on).
# TYPE fluentcore_delivered_entries_total counter
fluentcore_delivered_entries_total{stream="err"} 1
fluentcore_delivered_entries_total{stream="info"} 2
# HELP fluentcore_spilled_entries_total Entries set aside instead of delivered: appended to the durable spill (SpillDir), or written to ErrFallback.
# TYPE fluentcore_spilled_entries_total counter
fluentcore_spilled_entries_total{stream="err"} 0
fluentcore_spilled_entries_total{stream="info"} 0
# HELP fluentcore_dropped_entries_total Entries dropped, by reason.
# TYPE fluentcore_dropped_entries_total counter
fluentcore_dropped_entries_total{reason="encode_error",stream="err"} 0
fluentcore_dropped_entries_total{reason="spill_failed",stream="err"} 0
fluentcore_dropped_entries_total{reason="spill_full",stream="err"} 0
fluentcore_dropped_entries_total{reason="closed",stream="info"} 0
fluentcore_dropped_entries_total{reason="degraded",stream="info"} 0
fluentcore_dropped_entries_total{reason="encode_error",stream="info"} 0
fluentcore_dropped_entries_total{reason="queue_full",stream="info"} 0
fluentcore_dropped_entries_total{reason="sampled",stream="info"} 0
fluentcore_dropped_entries_total{reason="shutdown",stream="info"} 0
fluentcore_dropped_entries_total{reason="too_large",stream="info"} 0
# HELP fluentcore_buffer_capacity_bytes The stream's buffer budget in bytes.
# TYPE fluentcore_buffer_capacity_bytes gauge
fluentcore_buffer_capacity_bytes{stream="err"} 4.194304e+06
fluentcore_buffer_capacity_bytes{stream="info"} 8.388608e+06
`
	if err := testutil.CollectAndCompare(core.metrics, strings.NewReader(want),
		"fluentcore_entries_total", "fluentcore_delivered_entries_total",
		"fluentcore_spilled_entries_total", "fluentcore_dropped_entries_total",
		"fluentcore_buffer_capacity_bytes"); err != nil {
		t.Fatal(err)
	}
	if problems, err := testutil.CollectAndLint(core.metrics); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", err, problems)
	}
}
