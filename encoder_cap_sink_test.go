package fluentcore_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore"
	"github.com/fluentcore/fluentcore/forwardtest"
	"github.com/fluentcore/fluentcore/internal/testkit"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// Config.MaxEntryBytes end to end: an oversized info entry is dropped and counted
// (too_large); an oversized err entry arrives truncated and marked, within the cap; one
// that truncation can't save goes to the fallback whole.
func TestMaxEntryBytes(t *testing.T) {
	const maxEntry = 4096
	r := forwardtest.NewReceiver(t)
	reg := prometheus.NewRegistry()
	var fallback testkit.Lines
	core := newTestCore(t, r.Addr(), reg, func(c *fluentcore.Config) {
		c.MaxEntryBytes = maxEntry
		c.ErrFallback = &fallback
	})
	logger := zap.New(core)
	huge := strings.Repeat("0123456789", 2000)

	logger.Info("too big", zap.String("payload", huge))
	logger.Info("fits", zap.Int("n", 1))
	logger.Error("too big but kept", zap.String("payload", huge), zap.String("id", "e-1"),
		zap.Error(errors.New(strings.Repeat("cause ", 1000))))
	many := make([]zap.Field, 1500)
	for i := range many {
		many[i] = zap.Int("f", i)
	}
	logger.Error("too many fields", many...)
	if err := core.Sync(); err != nil {
		t.Fatal(err)
	}
	got, err := r.WaitForEntries(2, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var errRec map[string]any
	for _, e := range got {
		switch e.Record["msg"] {
		case "too big":
			t.Error("oversized info entry was delivered")
		case "too big but kept":
			errRec = e.Record
		}
	}
	if errRec == nil {
		t.Fatalf("truncated err entry not delivered: %v", got)
	}
	if errRec["msgTruncated"] != true || errRec["id"] != "e-1" || errRec["level"] != "error" {
		t.Errorf("err record not marked or lost short values: %v", errRec)
	}
	for _, k := range []string{"payload", "error"} {
		s, _ := errRec[k].(string)
		if !strings.Contains(s, "…(truncated ") || len(s) >= maxEntry {
			t.Errorf("%s not truncated and marked: %d bytes, ends %q", k, len(s), s[max(0, len(s)-30):])
		}
	}
	// Two frames arrived: the small info entry's and this one's, each with a few dozen
	// bytes of framing around the entries.
	if b := r.Stats().Bytes; b > maxEntry+160 {
		t.Errorf("receiver got %d bytes for a %d-byte cap", b, maxEntry)
	}
	if v := testkit.Metric(t, reg, "fluentcore_dropped_entries_total", map[string]string{"stream": "info", "reason": "too_large"}); v != 1 {
		t.Errorf("dropped_entries_total{too_large} = %v", v)
	}
	// Operators see the truncation: one err entry was cut, the info one was dropped instead.
	if v := testkit.Metric(t, reg, "fluentcore_truncated_entries_total", map[string]string{"stream": "err"}); v != 1 {
		t.Errorf("truncated_entries_total{err} = %v, want 1", v)
	}
	if err := core.Close(); err != nil {
		t.Fatal(err)
	}
	st := core.Stats()
	if st.Err.Truncated != 1 || st.Info.Truncated != 0 {
		t.Errorf("truncated: err %d, info %d; want 1 and 0", st.Err.Truncated, st.Info.Truncated)
	}
	if st.Info.Dropped["too_large"] != 1 {
		t.Errorf("too_large drops = %d, want 1", st.Info.Dropped["too_large"])
	}
	if st.Err.Delivered != 1 || st.Err.Spilled != 1 {
		t.Errorf("err delivered %d, spilled %d; want 1 and 1", st.Err.Delivered, st.Err.Spilled)
	}
	if !strings.Contains(fallback.String(), `"too many fields"`) {
		t.Errorf("entry truncation can't save is not in the fallback: %.200q", fallback.String())
	}
	fluentcore.IdentityHolds(t, st)
}
