package fluentcore_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore"
	"github.com/fluentcore/fluentcore/forwardtest"
	"go.uber.org/zap/exp/zapslog"
	"go.uber.org/zap/zapcore"
)

// log/slog through zapslog: levels map to the right streams, attributes, groups and
// WithAttrs arrive exactly as zap's JSON encoder would write them through the same handler.
func TestSlogThroughZapslog(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	core := newTestCore(t, r.Addr(), nil)
	var twinOut bytes.Buffer
	tee := zapcore.NewTee(core, jsonTwin(&twinOut))

	logger := slog.New(zapslog.NewHandler(tee, zapslog.WithName("api"))).With("service", "shop")
	logger.Debug("debug", "i", 0)
	logger.Info("hello", "i", 1, slog.Group("req", "method", "GET", "bytes", 512))
	logger.WithGroup("db").Warn("slow query", "i", 2, "took", 150*time.Millisecond)
	logger.Error("failed", "i", 3, "err", "timeout")
	if err := core.Sync(); err != nil {
		t.Fatal(err)
	}
	got, err := r.WaitForEntries(4, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64]map[string]any{}
	dec := json.NewDecoder(&twinOut)
	dec.UseNumber()
	for dec.More() {
		var rec map[string]any
		if err := dec.Decode(&rec); err != nil {
			t.Fatal(err)
		}
		delete(rec, "ts")
		i, ok := rec["i"].(json.Number)
		if !ok { // inside the "db" group
			i = rec["db"].(map[string]any)["i"].(json.Number)
		}
		n, _ := i.Int64()
		want[n] = rec
	}
	for _, e := range got {
		i, ok := e.Record["i"].(int64)
		if !ok {
			i = e.Record["db"].(map[string]any)["i"].(int64)
		}
		if d := fluentcore.DiffValues(fluentcore.NormMsgp(e.Record), fluentcore.NormJSON(want[i]), ""); d != "" {
			t.Errorf("slog entry %d: %s\n got %v\nwant %v", i, d, e.Record, want[i])
		}
		wantTag := map[bool]string{false: "shop.info", true: "shop.err"}[i == 3]
		if e.Tag != wantTag {
			t.Errorf("slog entry %d: tag %q, want %q", i, e.Tag, wantTag)
		}
	}
}
