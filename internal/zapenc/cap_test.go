package zapenc

import (
	"bytes"
	"math"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/fluentcore/fluentcore/internal/msgpenc"
	"github.com/fluentcore/fluentcore/internal/testkit"
)

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
	enc := New(NewConfig(defaultCfg()))
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
				out := enc.EncodeEntry(dst, nil, ptr(baseEntry()), fields, msgpenc.Budget{Limit: limit}, nil)
				allocated = min(allocated, testkit.HeapAllocated()-before)
				if !enc.Abandoned() || out != nil {
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
	enc := New(NewConfig(defaultCfg()))
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
	out, fits := enc.CutShort(nil, &ent, fields, limit)
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
	valueCap := limit / msgpenc.CutValueShare
	for _, k := range []string{"msg", "stacktrace", "body"} {
		s, _ := rec[k].(string)
		want := map[string]string{"msg": ent.Message, "stacktrace": ent.Stack, "body": strings.Repeat("é", 2000)}[k]
		testkit.CheckCut(t, k, []byte(s), []byte(want))
		if i := strings.Index(s, msgpenc.CapMarker); i > valueCap {
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
	out, fits = enc.CutShort(nil, &ent, []zapcore.Field{zap.Int("before", 1), zap.Any("huge", huge), zap.Int("after", 1)}, limit)
	_, _, rec = decodeEntry(t, out)
	if _, ok := rec["huge"]; ok || !fits || rec["before"] != int64(1) || rec["after"] != nil || rec["msgTruncated"] != true {
		t.Errorf("reflected map not left out whole: %d keys, before %v, after %v", len(rec), rec["before"], rec["after"])
	}
}

// An err entry that truncating its values can fit is cut exactly as Cap cuts its whole
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
			cfg := NewConfig(tc.cfg)
			ent := baseEntry()
			ent.Stack = big[:70_000]
			whole := New(cfg).appendEntry(nil, nil, &ent, tc.fields)
			want, ok := New(cfg).Cap(whole, limit)
			if !ok {
				t.Fatal("Cap cannot cut the whole entry")
			}
			got, cut := New(cfg).EncodeCapped(nil, nil, &ent, tc.fields, limit)
			if !cut || !bytes.Equal(got, want) {
				t.Errorf("cut from the values stored cut (%d bytes) differs from the cut of the whole entry (%d bytes)", len(got), len(want))
			}
			testkit.CheckCapped(t, whole, got, limit, "msgTruncated")
		})
	}
}
