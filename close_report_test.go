package fluentcore

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore/forwardtest"
	"go.uber.org/zap"
)

// Close in a stall (a receiver that accepts and reads nothing) cannot deliver what is
// buffered: it drops the info entries (shutdown) and spills the err ones to Spill.Fallback, and
// says how many twice, where an operator sees it without a scrape (the process exits after
// Close): in its error, and in a last record written to Spill.Fallback after the spilled
// entries, with the counts as fields. Both equal the counters.
func TestCloseReportsItsShutdownDropsInErrFallback(t *testing.T) {
	r := forwardtest.NewReceiver(t, forwardtest.WithReadBuffer(4<<10))
	var fallback bytes.Buffer // written by the sink, read once Close has returned
	core := New(Config{
		Addr:      r.Addr(),
		Metrics:   MetricsConfig{Disabled: true},
		Timeouts:  TimeoutsConfig{Close: 200 * time.Millisecond},
		Spill:     SpillConfig{Fallback: &fallback},
		Tag:       "app",
		Transport: TransportConfig{MaxBatchBytes: 16 << 10},
	})
	logger := zap.New(core)
	logger.Info("before the stall")
	if err := core.Sync(); err != nil {
		t.Fatal(err)
	}
	r.Stall()
	pad := strings.Repeat("p", 400)
	deadline := time.Now().Add(30 * time.Second)
	for core.Stats().Info.SendInProgress < 100*time.Millisecond { // a write blocks
		if time.Now().After(deadline) {
			t.Fatalf("no write blocked within 30s: %+v", core.Stats().Info)
		}
		for range 50 {
			logger.Info("into the stall", zap.String("pad", pad))
		}
	}
	for range 20 {
		logger.Info("held in memory", zap.String("pad", pad))
	}
	logger.Error("not acked")
	cerr := core.Close()
	st := core.Stats()
	dropped, spilled := st.Info.Dropped["shutdown"], st.Err.Spilled
	if dropped == 0 || spilled != 1 {
		t.Fatalf("dropped at shutdown %d, err spilled %d; want some, and 1", dropped, spilled)
	}
	want := fmt.Sprintf("fluentcore: close: not delivered in time: info entries dropped (shutdown): %d; err entries spilled to Spill.Fallback: 1", dropped)
	if cerr == nil || !strings.Contains(cerr.Error(), want) {
		t.Errorf("Close returned %v, want it to say %q", cerr, want)
	}

	lines := strings.Split(strings.TrimSpace(fallback.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("Spill.Fallback has %d lines, want the spilled err entry and the report:\n%s", len(lines), fallback.String())
	}
	var last struct {
		Tag    string
		Record map[string]any
	}
	if err := json.Unmarshal([]byte(lines[1]), &last); err != nil {
		t.Fatalf("Spill.Fallback's last line %q: %v", lines[1], err)
	}
	rec := last.Record
	if last.Tag != "app.err" || rec["msg"] != want || rec["level"] != "error" || rec["logger"] != "fluentcore" ||
		rec["shutdown_info_dropped"] != float64(dropped) || rec["shutdown_err_spilled"] != float64(1) {
		t.Errorf("Spill.Fallback's last record %s; want tag app.err, level error, logger fluentcore, msg %q, shutdown_info_dropped %d, shutdown_err_spilled 1",
			lines[1], want, dropped)
	}
	if !strings.Contains(lines[0], `"not acked"`) {
		t.Errorf("Spill.Fallback's first line %s, want the spilled err entry", lines[0])
	}
}
