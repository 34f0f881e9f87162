package fluentcore_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/fluentcore/fluentcore"
	"github.com/fluentcore/fluentcore/forwardtest"
	"github.com/fluentcore/fluentcore/internal/testkit"
)

// Config.Transport.MaxEntryBytes end to end: an oversized info entry is dropped and counted
// (too_large); an oversized err entry arrives truncated and marked, within the cap; one
// that truncating its values can't save (too many fields) arrives cut short: marked, within
// the cap, its first fields in order. Nothing goes to the fallback.
func TestMaxEntryBytes(t *testing.T) {
	const maxEntry = 4096
	r := forwardtest.NewReceiver(t)
	reg := prometheus.NewRegistry()
	var fallback testkit.Lines
	core := newTestCore(t, r.Addr(), reg, func(c *fluentcore.Config) {
		c.Transport.MaxEntryBytes = maxEntry
		c.Spill.Fallback = &fallback
	})
	logger := zap.New(core)
	huge := strings.Repeat("0123456789", 2000)

	logger.Info("too big", zap.String("payload", huge))
	logger.Info("fits", zap.Int("n", 1))
	logger.Error("too big but kept", zap.String("payload", huge), zap.String("id", "e-1"),
		zap.Error(errors.New(strings.Repeat("cause ", 1000))))
	many := make([]zap.Field, 1500)
	for i := range many {
		many[i] = zap.Int("f"+strconv.Itoa(i), i)
	}
	logger.Error("too many fields", many...)
	if err := core.Sync(); err != nil {
		t.Fatal(err)
	}
	got, err := r.WaitForEntries(3, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var errRec, manyRec map[string]any
	for _, e := range got {
		switch e.Record["msg"] {
		case "too big":
			t.Error("oversized info entry was delivered")
		case "too big but kept":
			errRec = e.Record
		case "too many fields":
			manyRec = e.Record
		}
	}
	if manyRec == nil || manyRec["msgTruncated"] != true {
		t.Fatalf("entry with too many fields not delivered cut short and marked: %v", manyRec)
	}
	kept := 0
	for ; kept < len(many) && manyRec["f"+strconv.Itoa(kept)] != nil; kept++ {
		if manyRec["f"+strconv.Itoa(kept)] != int64(kept) {
			t.Fatalf("f%d = %v", kept, manyRec["f"+strconv.Itoa(kept)])
		}
	}
	// The head, the kept fields and the mark are the whole record: the first fields, in order.
	if kept == 0 || kept == len(many) || len(manyRec) != kept+3 {
		t.Errorf("cut short to %d keys with f0..f%d in order, of %d fields", len(manyRec), kept-1, len(many))
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
	// At most three frames arrived — the small info entry's and the two err entries', in one
	// frame or two — each with a few dozen bytes of framing around the entries.
	if b := r.Stats().Bytes; b > 2*maxEntry+240 {
		t.Errorf("receiver got %d bytes for two err entries within a %d-byte cap", b, maxEntry)
	}
	if v := testkit.Metric(t, reg, "fluentcore_dropped_entries_total", map[string]string{"stream": "info", "reason": "too_large"}); v != 1 {
		t.Errorf("dropped_entries_total{too_large} = %v", v)
	}
	// Operators see the truncation: both err entries were cut, the info one was dropped instead.
	if v := testkit.Metric(t, reg, "fluentcore_truncated_entries_total", map[string]string{"stream": "err"}); v != 2 {
		t.Errorf("truncated_entries_total{err} = %v, want 2", v)
	}
	if err := core.Close(); err != nil {
		t.Fatal(err)
	}
	st := core.Stats()
	if st.Err.Truncated != 2 || st.Info.Truncated != 0 {
		t.Errorf("truncated: err %d, info %d; want 2 and 0", st.Err.Truncated, st.Info.Truncated)
	}
	if st.Info.Dropped["too_large"] != 1 {
		t.Errorf("too_large drops = %d, want 1", st.Info.Dropped["too_large"])
	}
	if st.Err.Delivered != 2 || st.Err.Spilled != 0 || fallback.Len() != 0 {
		t.Errorf("err delivered %d, spilled %d, %d bytes to the fallback; want 2, 0, 0",
			st.Err.Delivered, st.Err.Spilled, fallback.Len())
	}
	fluentcore.IdentityHolds(t, st)
}
