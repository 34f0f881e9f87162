package fluentcore

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	"github.com/fluentcore/fluentcore/internal/wire"
	"github.com/tinylib/msgp/msgp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// checkCapped checks that capped is orig cut down as capEntry documents: at most limit
// bytes, one valid entry with the same time, the marker key, and every value either as it
// was or a prefix of it followed by "…(truncated N bytes)" accounting for every byte.
func checkCapped(t *testing.T, orig, capped []byte, limit int, markerKey string) (cut int) {
	t.Helper()
	if len(capped) > limit {
		t.Fatalf("capped entry is %d bytes, limit %d", len(capped), limit)
	}
	sec, nsec, rec := decodeEntry(t, capped)
	osec, onsec, orec := decodeEntry(t, orig)
	if sec != osec || nsec != onsec {
		t.Errorf("time changed: %d.%d -> %d.%d", osec, onsec, sec, nsec)
	}
	if rec[markerKey] != true {
		t.Errorf("record lacks %q: true", markerKey)
	}
	delete(rec, markerKey)
	var walk func(got, want any, path string)
	walk = func(got, want any, path string) {
		switch w := want.(type) {
		case map[string]any:
			g, ok := got.(map[string]any)
			if !ok || len(g) != len(w) {
				t.Errorf("%s: map changed shape", path)
				return
			}
			for k := range w {
				walk(g[k], w[k], path+"."+k)
			}
		case []any:
			g, ok := got.([]any)
			if !ok || len(g) != len(w) {
				t.Errorf("%s: array changed shape", path)
				return
			}
			for i := range w {
				walk(g[i], w[i], path+"["+strconv.Itoa(i)+"]")
			}
		case string:
			g, ok := got.(string)
			if !ok {
				t.Errorf("%s: str became %T", path, got)
			} else if g != w {
				cut++
				checkCut(t, path, []byte(g), []byte(w))
			}
		case []byte:
			g, ok := got.([]byte)
			if !ok {
				t.Errorf("%s: bin became %T", path, got)
			} else if !bytes.Equal(g, w) {
				cut++
				checkCut(t, path, g, w)
			}
		default:
			if d := diff(normMsgp(got), normMsgp(want), path); d != "" {
				t.Error(d)
			}
		}
	}
	walk(rec, orec, "record")
	return cut
}

func checkCut(t *testing.T, path string, got, orig []byte) {
	t.Helper()
	i := bytes.LastIndex(got, []byte(capMarker))
	if i < 0 || !bytes.HasSuffix(got, []byte(" bytes)")) {
		t.Errorf("%s: changed without a marker: %.40q", path, got)
		return
	}
	n, err := strconv.Atoi(string(got[i+len(capMarker) : len(got)-len(" bytes)")]))
	if err != nil || !bytes.HasPrefix(orig, got[:i]) || i+n != len(orig) {
		t.Errorf("%s: kept %d bytes + marker for %d, original %d", path, i, n, len(orig))
	}
}

func TestCapEntry(t *testing.T) {
	cfg := newEncoderConfig(defaultCfg())
	enc := newMsgpEncoder(cfg)
	ent := baseEntry()
	ent.Level = zapcore.ErrorLevel
	ent.Stack = strings.Repeat("goroutine 1 [running]:\n\tmain.go:1\n", 2000)
	big := strings.Repeat("日本語", 20000) // multi-byte: cuts must keep whole characters
	fields := []zapcore.Field{
		zap.String("small", "kept as it is"),
		zap.String("big", big),
		zap.Binary("bin", bytes.Repeat([]byte{0xff, 0}, 30000)),
		zap.Strings("list", []string{strings.Repeat("x", 5000), "y", strings.Repeat("é", 3000)}),
		zap.Object("obj", fieldsObj(zap.String("deep", strings.Repeat("z", 40000)), zap.Int("n", 1))),
		zap.String(strings.Repeat("k", 300), "a long key stays whole"),
	}
	orig := enc.appendEntry(nil, nil, &ent, fields)
	prev := 0
	for _, limit := range []int{len(orig) - 1, 100_000, 64 << 10, 20_000, 4096, 1200} {
		capped, ok := enc.capEntry(orig, limit)
		if !ok {
			t.Fatalf("limit %d: could not cap a %d-byte entry", limit, len(orig))
		}
		cut := checkCapped(t, orig, capped, limit, "msgTruncated")
		if cut < prev {
			t.Errorf("limit %d: %d values cut, fewer than with a larger limit (%d)", limit, cut, prev)
		}
		prev = cut
		if limit >= 4096 && len(capped) < limit-64 {
			t.Errorf("limit %d: capped to %d bytes, wasting the budget", limit, len(capped))
		}
		_, _, rec := decodeEntry(t, capped)
		if rec["small"] != "kept as it is" || rec["msg"] != "hello" {
			t.Errorf("limit %d: short values were cut: %v %v", limit, rec["small"], rec["msg"])
		}
	}

	// Already small enough: returned as it is.
	if out, ok := enc.capEntry(orig, len(orig)); !ok || !bytes.Equal(out, orig) {
		t.Error("an entry within the limit was changed")
	}
	// Too many small values: no cut makes it fit.
	many := make([]zapcore.Field, 2000)
	for i := range many {
		many[i] = zap.Int("f"+strconv.Itoa(i), i)
	}
	small := enc.appendEntry(nil, nil, &ent, many)
	if _, ok := enc.capEntry(small, 4096); ok {
		t.Error("capEntry claims to fit 2000 fields in 4 KiB")
	}
	// Not an entry at all.
	if _, ok := enc.capEntry(msgp.AppendString(nil, strings.Repeat("x", 100)), 10); ok {
		t.Error("capEntry accepted a bare string")
	}

	// With the message key omitted the marker is "truncated".
	zc := defaultCfg()
	zc.MessageKey = zapcore.OmitKey
	enc2 := newMsgpEncoder(newEncoderConfig(zc))
	orig2 := enc2.appendEntry(nil, nil, &ent, fields[:2])
	capped, ok := enc2.capEntry(orig2, 2000)
	if !ok {
		t.Fatal("cannot cap")
	}
	checkCapped(t, orig2, capped, 2000, "truncated")
}

// TestCapEntryHeaderGrowth: a record of 15 pairs has a fixmap header in generated code;
// ours is map32, but capEntry must handle any header, so feed it a hand-made fixmap.
func TestCapEntryHeaderGrowth(t *testing.T) {
	b := []byte{0x92}
	b = wire.AppendEventTime(b, 1, 2)
	b = msgp.AppendMapHeader(b, 15)
	for i := range 15 {
		b = msgp.AppendString(b, "k"+strconv.Itoa(i))
		b = msgp.AppendString(b, strings.Repeat("v", 100*i))
	}
	enc := newMsgpEncoder(newEncoderConfig(defaultCfg()))
	capped, ok := enc.capEntry(b, 3000)
	if !ok {
		t.Fatal("cannot cap")
	}
	checkCapped(t, b, capped, 3000, "msgTruncated")
	if _, _, rec := decodeEntry(t, capped); len(rec) != 16 {
		t.Errorf("record has %d keys, want 16", len(rec))
	}
}
