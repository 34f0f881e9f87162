package fluentcore

import (
	"bytes"
	"math"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore/internal/testkit"
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

// sameKeyInts is an ObjectMarshaler with n int fields under one key: a walk that allocates
// nothing of its own.
type sameKeyInts int

func (n sameKeyInts) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	for i := range int(n) {
		enc.AddInt("k", i)
	}
	return nil
}

// Within a budget, encoding stops at the limit: the entry is abandoned, what comes after the
// stop costs a walk at most and no memory — a marshaler nested past it is not called, a
// reflected map whose smallest encoding cannot fit is not collected — and the caller's
// buffer is not written past the limit.
func TestBudgetStopsEncodingAtTheLimit(t *testing.T) {
	huge := make(map[string]int, 200_000)
	for i := range 200_000 {
		huge["k"+strconv.Itoa(i)] = i
	}
	called := 0
	nested := objFunc(func(enc zapcore.ObjectEncoder) error { called++; return nil })
	enc := newMsgpEncoder(newEncoderConfig(defaultCfg()))
	for _, tc := range []struct {
		name  string
		field zapcore.Field
	}{
		{"object marshaler", zap.Object("big", sameKeyInts(1_000_000))},
		{"reflected map", zap.Any("big", huge)},
		{"long string", zap.String("big", strings.Repeat("x", 1<<20))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const limit = 4096
			dst := make([]byte, 0, 2*limit)
			fields := []zapcore.Field{zap.Int("before", 1), tc.field, zap.Object("after", nested)}
			// The least of three tries: the reading counts every goroutine's allocations.
			allocated := uint64(math.MaxUint64)
			for range 3 {
				runtime.GC()
				before := testkit.HeapAllocated()
				out := enc.encodeEntry(dst, nil, ptr(baseEntry()), fields, budget{limit: limit})
				allocated = min(allocated, testkit.HeapAllocated()-before)
				if !enc.abandoned || out != nil {
					t.Fatalf("an entry over its budget was not abandoned: %d bytes", len(out))
				}
			}
			if called != 0 {
				t.Error("a marshaler after the stop was called")
			}
			// The caller's buffer is never grown: nothing is written past the limit.
			if allocated > 64<<10 || cap(dst) != 2*limit {
				t.Errorf("encoding past the budget allocated %d bytes", allocated)
			}
			if enc.cur.depth != 0 || len(enc.stack) != 0 {
				t.Errorf("containers left open: depth %d, stack %d", enc.cur.depth, len(enc.stack))
			}
			// The encoder is whole for the next entry.
			if _, _, rec := decodeEntry(t, enc.appendEntry(nil, nil, ptr(baseEntry()), []zapcore.Field{zap.Int("n", 1)})); rec["n"] != int64(1) {
				t.Errorf("next entry: %v", rec)
			}
		})
	}
}

// An entry that truncating values cannot save is cut short: at most the limit, its head and
// stacktrace kept (long values cut and marked), its fields in order while they fit, the
// maps and arrays open at the cut closed with what they hold, a reflected value that does
// not fit left out whole, and the mark.
func TestCutShortKeepsTheHeadAndTheFirstFields(t *testing.T) {
	enc := newMsgpEncoder(newEncoderConfig(defaultCfg()))
	ent := baseEntry()
	ent.Level = zapcore.ErrorLevel
	ent.Message = strings.Repeat("m", 3000)
	ent.Caller = testCaller
	ent.Stack = strings.Repeat("goroutine 1 [running]:\n", 500)
	list := arrFunc(func(enc zapcore.ArrayEncoder) error {
		for i := range 100_000 {
			enc.AppendInt(i)
		}
		return nil
	})
	fields := []zapcore.Field{
		zap.String("id", "e-1"),
		zap.ByteString("body", bytes.Repeat([]byte("é"), 2000)),
		zap.Array("list", list),
		zap.Int("after", 1),
	}
	const limit = 8192
	out, fits := enc.cutShort(nil, &ent, fields, limit)
	if !fits || len(out) > limit {
		t.Fatalf("cut short to %d bytes (fits %v), limit %d", len(out), fits, limit)
	}
	if len(out) < limit-64 {
		t.Errorf("cut short to %d bytes, wasting the budget of %d", len(out), limit)
	}
	_, _, rec := decodeEntry(t, out)
	if rec["msgTruncated"] != true || rec["level"] != "error" || rec["id"] != "e-1" || rec["caller"] != "orders/handler.go:42" {
		t.Errorf("head or first fields lost: %v", rec)
	}
	valueCap := limit / cutValueShare
	for _, k := range []string{"msg", "stacktrace", "body"} {
		s, _ := rec[k].(string)
		want := map[string]string{"msg": ent.Message, "stacktrace": ent.Stack, "body": strings.Repeat("é", 2000)}[k]
		checkCut(t, k, []byte(s), []byte(want))
		if i := strings.Index(s, capMarker); i > valueCap {
			t.Errorf("%s keeps %d bytes, more than %d", k, i, valueCap)
		}
	}
	got, _ := rec["list"].([]any)
	if len(got) == 0 || len(got) == 100_000 {
		t.Fatalf("list cut to %d elements", len(got))
	}
	for i, v := range got {
		if v != int64(i) {
			t.Fatalf("list[%d] = %v", i, v)
		}
	}
	if _, ok := rec["after"]; ok {
		t.Error("a field after the cut was kept")
	}

	// A reflected value that does not fit is left out whole, and what follows it too.
	huge := make(map[string]int, 10_000)
	for i := range 10_000 {
		huge["k"+strconv.Itoa(i)] = i
	}
	out, fits = enc.cutShort(nil, &ent, []zapcore.Field{zap.Int("before", 1), zap.Any("huge", huge), zap.Int("after", 1)}, limit)
	_, _, rec = decodeEntry(t, out)
	if _, ok := rec["huge"]; ok || !fits || rec["before"] != int64(1) || rec["after"] != nil || rec["msgTruncated"] != true {
		t.Errorf("reflected map not left out whole: %d keys, before %v, after %v", len(rec), rec["before"], rec["after"])
	}
}

// An err entry that truncating its values can fit is cut exactly as capEntry cuts its whole
// encoding, though its long values were stored cut (precut): twenty of them, far more than
// cutScratch entries' worth; and wherever they sit, in a reflected struct whose header
// shrinks or in a value a user's encoder wrote twice.
func TestEncodeCappedMatchesCapEntry(t *testing.T) {
	type payload struct {
		Body  string `json:"body"`
		Empty string `json:"empty,omitempty"`
		N     int    `json:"n"`
	}
	big := strings.Repeat("0123456789", 30_000)
	twice := defaultCfg()
	twice.EncodeDuration = func(_ time.Duration, enc zapcore.PrimitiveArrayEncoder) {
		enc.AppendString(big)
		enc.AppendString(big[:200_000])
	}
	var many []zapcore.Field
	for i := range 20 {
		many = append(many, zap.String("s"+strconv.Itoa(i), big[:100_000+997*i]), zap.Int("n"+strconv.Itoa(i), i))
	}
	for _, tc := range []struct {
		name   string
		cfg    zapcore.EncoderConfig
		fields []zapcore.Field
	}{
		{"many long values", defaultCfg(), many},
		{"strings", defaultCfg(), []zapcore.Field{zap.String("a", big), zap.String("id", "e-1"), zap.Binary("b", []byte(big[:150_000])), zap.String("c", big[:100_000])}},
		{"reflected struct", defaultCfg(), []zapcore.Field{zap.Any("p", payload{Body: big, N: 1}), zap.String("c", big)}},
		{"user encoder", twice, []zapcore.Field{zap.Duration("d", time.Second), zap.String("c", big)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const limit = 64 << 10
			cfg := newEncoderConfig(tc.cfg)
			ent := baseEntry()
			ent.Stack = big[:70_000]
			whole := newMsgpEncoder(cfg).appendEntry(nil, nil, &ent, tc.fields)
			want, ok := newMsgpEncoder(cfg).capEntry(whole, limit)
			if !ok {
				t.Fatal("capEntry cannot cut the whole entry")
			}
			got, cut := newMsgpEncoder(cfg).encodeCapped(nil, nil, &ent, tc.fields, limit)
			if !cut || !bytes.Equal(got, want) {
				t.Errorf("cut from the values stored cut (%d bytes) differs from the cut of the whole entry (%d bytes)", len(got), len(want))
			}
			checkCapped(t, whole, got, limit, "msgTruncated")
		})
	}
}
