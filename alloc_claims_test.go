package fluentcore_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore"
	"github.com/fluentcore/fluentcore/forwardtest"
	"github.com/fluentcore/fluentcore/internal/testkit"
	"go.uber.org/multierr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// The allocation claim of docs/guarantees.md ("What a logging call allocates"), tested both
// ways: every case the page says allocates nothing measures 0 allocations per call, and
// every case it lists as allocating measures more than 0, so that a list gone stale (a path
// that stopped allocating, or one that started) fails here. The counts are process-wide
// (testing.AllocsPerRun), the in-process receiver's included: it allocates nothing per
// entry without acks (forwardtest.CountOnly).

// allocCase is one logging call and what the page says it allocates.
type allocCase struct {
	name string
	call func()
}

// allocCore returns a Core sending to a counting receiver, closed at the end of the test.
func allocCore(t *testing.T, cfg fluentcore.Config) *fluentcore.Core {
	t.Helper()
	r := forwardtest.NewReceiver(t, forwardtest.CountOnly())
	cfg.Addr, cfg.Metrics.Disabled = r.Addr(), true
	core := fluentcore.New(cfg)
	t.Cleanup(func() { _ = core.Close() })
	return core
}

// allocsOf warms a call up (first uses size the encoder's scratch) and returns its steady
// allocations per call.
func allocsOf(call func()) float64 {
	call()
	call()
	return testkit.SteadyAllocs(100, call)
}

// Values for the cases: marshalers and methods that allocate nothing themselves, and ones
// that do.
type (
	allocObject struct{ id string } // zapcore.ObjectMarshaler, allocation-free
	allocArray  []int               // zapcore.ArrayMarshaler, allocation-free
	allocName   string              // fmt.Stringer returning itself
	allocJSON   struct{ N int }     // json.Marshaler returning a new slice
	allocText   struct{}            // encoding.TextMarshaler returning a new slice
	allocFmtErr struct{}            // an error that is also a fmt.Formatter
	allocCode   int                 // an error with a value receiver, allocation-free
	allocRecord struct {            // a plain struct, reflected
		ID     int               `json:"id"`
		Name   string            `json:"name,omitempty"`
		At     time.Time         `json:"at"`
		Tags   []string          `json:"tags"`
		Extra  map[string]any    `json:"extra"`
		Labels map[string]string `json:"labels"`
		Err    error             `json:"err"`
	}
)

func (o allocObject) MarshalLogObject(e zapcore.ObjectEncoder) error {
	e.AddString("id", o.id)
	return nil
}

func (a allocArray) MarshalLogArray(e zapcore.ArrayEncoder) error {
	for _, n := range a {
		e.AppendInt(n)
	}
	return nil
}

func (n allocName) String() string               { return string(n) }
func (j allocJSON) MarshalJSON() ([]byte, error) { return fmt.Appendf(nil, `{"n":%d}`, j.N), nil }
func (allocText) MarshalText() ([]byte, error)   { return []byte("text"), nil }
func (allocCode) Error() string                  { return "not found" }
func (allocFmtErr) Error() string                { return "failed" }
func (allocFmtErr) Format(s fmt.State, _ rune)   { fmt.Fprint(s, "failed, in detail") }

var (
	errAlloc    = errors.New("card declined")
	allocRecVal = allocRecord{ID: 7, Name: "a", At: time.Unix(1e9, 0), Tags: []string{"x", "y"},
		Extra: map[string]any{"n": 1, "s": "t", "l": []int{1}}, Labels: map[string]string{"k": "v"}, Err: errAlloc}
)

// allocationFree are the calls the page says allocate nothing: zap's typed fields, With
// fields and logger tags, and the reflected values of the kinds it names.
func allocationFree(core *fluentcore.Core) []allocCase {
	logger := zap.New(core)
	with := logger.With(zap.String("svc", "shop"), zap.Namespace("req"), zap.Int("id", 7))
	tagged := logger.With(fluentcore.Tag("audit"))
	var cases []allocCase
	add := func(name string, l *zap.Logger, fields ...zap.Field) {
		cases = append(cases,
			allocCase{name + "/info", func() { l.Info("order placed", fields...) }},
			allocCase{name + "/error", func() { l.Error("order failed", fields...) }})
	}
	add("scalars", logger, zap.String("s", "v"), zap.Int("i", 1234), zap.Int64("i64", -5), zap.Uint("u", 9),
		zap.Float64("f", 1.5), zap.Float32("f32", 2.5), zap.Bool("b", true), zap.Complex128("c", 1+2i),
		zap.Duration("d", time.Second), zap.Time("t", time.Unix(1e9, 5)), zap.Binary("bin", []byte{1, 2}),
		zap.ByteString("bs", []byte("x")), zap.Uintptr("p", 1), zap.String("bad", "a\xffb"))
	add("slices", logger, zap.Strings("ss", []string{"a", "b"}), zap.Ints("is", []int{1000, 2000}),
		zap.Bools("bs", []bool{true}), zap.Durations("ds", []time.Duration{time.Second}),
		zap.Times("ts", []time.Time{time.Unix(1e9, 0)}), zap.Float64s("fs", []float64{1.5}))
	add("namespace", logger, zap.Namespace("ns"), zap.String("in", "ns"))
	add("marshalers", logger, zap.Object("o", allocObject{"A-1"}), zap.Inline(allocObject{"A-2"}),
		zap.Array("a", allocArray{1, 2}))
	add("stringer-and-errors", logger, zap.Stringer("name", allocName("shop")), zap.Error(errAlloc),
		zap.NamedError("wrapped", fmt.Errorf("pay: %w", errAlloc)), zap.Errors("errs", []error{errAlloc}))
	add("any-typed", logger, zap.Any("i", 1234), zap.Any("s", "v"), zap.Any("ss", []string{"a"}), zap.Skip())
	add("reflected", logger, zap.Reflect("struct", allocRecVal), zap.Reflect("ptr", &allocRecVal),
		zap.Reflect("slice", []int{1, 2}), zap.Reflect("array", [2]string{"a", "b"}),
		zap.Reflect("anymap", map[string]any{"a": 1, "b": map[string]any{"c": "d"}}),
		zap.Reflect("strmap", map[string]string{"a": "b"}), zap.Reflect("bytes", []byte("x")),
		zap.Reflect("raw", json.RawMessage(`{"a":[1,2]}`)), zap.Reflect("obj", allocObject{"A-3"}),
		zap.Reflect("dur", time.Second), zap.Reflect("errs", []error{errAlloc}))
	add("with", with, zap.String("s", "v"))
	add("tag", tagged, zap.String("s", "v"))
	off := []zap.Field{zap.String("s", "v")}
	cases = append(cases, allocCase{"level-off", func() { logger.Debug("not logged", off...) }})
	ent := zapcore.Entry{Level: zapcore.InfoLevel, Time: time.Now(), Message: "m",
		Caller: zapcore.EntryCaller{Defined: true, File: "/src/shop/order.go", Line: 42, Function: "shop.Place"}}
	fs := []zap.Field{zap.String("s", "v")}
	cases = append(cases, allocCase{"entry-with-caller", func() { _ = core.Write(ent, fs) }})
	return cases
}

func TestAllocationClaimNone(t *testing.T) {
	core := allocCore(t, fluentcore.Config{})
	for _, c := range allocationFree(core) {
		if n := allocsOf(c.call); n != 0 {
			t.Errorf("%s: %v allocations per call; docs/guarantees.md says none", c.name, n)
		}
	}
}

// writeCase is a call of Core.Write with fields built once: what it allocates is
// fluentcore's, zap's Field.AddTo's or the values' own methods', never zap's logger's.
func writeCase(core *fluentcore.Core, name string, level zapcore.Level, fields ...zap.Field) allocCase {
	ent := zapcore.Entry{Level: level, Time: time.Now(), Message: "m"}
	return allocCase{name, func() { _ = core.Write(ent, fields) }}
}

// allocatingInCore are the calls the page says allocate in fluentcore itself.
func allocatingInCore(core *fluentcore.Core) []allocCase {
	big := make([]byte, 100<<10) // over Transport.MaxEntryBytes, 64 KiB by default
	for i := range big {
		big[i] = 'x'
	}
	with := []zap.Field{zap.String("svc", "shop")}
	return []allocCase{
		writeCase(core, "reflected map[string]int", zapcore.InfoLevel, zap.Reflect("m", map[string]int{"a": 1, "b": 2})),
		writeCase(core, "reflected map[int]string", zapcore.InfoLevel, zap.Reflect("m", map[int]string{1000: "a", 2000: "b"})),
		// json.RawMessage's MarshalJSON allocates nothing (allocationFree reflects one):
		// what allocates here is the copy made to call it on a slice element.
		writeCase(core, "reflected marshaler in a slice", zapcore.InfoLevel, zap.Reflect("s", []json.RawMessage{[]byte(`1`)})),
		writeCase(core, "reflected marshaler behind a pointer", zapcore.InfoLevel, zap.Reflect("p", &struct{ O allocObject }{allocObject{"A-4"}})),
		writeCase(core, "reflected Error in a slice", zapcore.InfoLevel, zap.Reflect("e", []allocCode{404})),
		writeCase(core, "reflected NaN", zapcore.InfoLevel, zap.Reflect("f", []float64{math.NaN()})),
		writeCase(core, "reflected channel", zapcore.InfoLevel, zap.Reflect("c", make(chan int))),
		writeCase(core, "err entry over Transport.MaxEntryBytes", zapcore.ErrorLevel, zap.ByteString("big", big)),
		writeCase(core, "DPanic entry's flush", zapcore.DPanicLevel, zap.String("s", "v")),
		{"Core.With per call", func() { _ = core.With(with) }},
	}
}

// allocatingInMethods are the calls the page says allocate in the values' own methods or
// in zap's encoding of a field, run by fluentcore on each entry.
func allocatingInMethods(t *testing.T, core *fluentcore.Core) []allocCase {
	ec := zap.NewProductionEncoderConfig()
	ec.EncodeDuration = zapcore.StringDurationEncoder // time.Duration.String
	durCore := allocCore(t, fluentcore.Config{EncoderConfig: ec})
	return []allocCase{
		writeCase(core, "MarshalJSON", zapcore.InfoLevel, zap.Reflect("j", allocJSON{1})),
		writeCase(core, "MarshalText", zapcore.InfoLevel, zap.Reflect("t", allocText{})),
		writeCase(core, "String (net.IP)", zapcore.InfoLevel, zap.Stringer("ip", net.IPv4(10, 0, 0, 1))),
		writeCase(core, "Error (errors.Join)", zapcore.InfoLevel, zap.Error(errors.Join(errAlloc, errors.New("retry")))),
		writeCase(core, "zap.Objects of values", zapcore.InfoLevel, zap.Objects("os", []allocObject{{"A-1"}})),
		writeCase(core, "zap.Error of a fmt.Formatter", zapcore.InfoLevel, zap.Error(allocFmtErr{})),
		writeCase(core, "zap.Error of multierr", zapcore.InfoLevel, zap.Error(multierr.Combine(errAlloc, errors.New("retry")))),
		writeCase(durCore, "StringDurationEncoder", zapcore.InfoLevel, zap.Duration("d", time.Second)),
	}
}

// allocatingInZap are the calls the page says allocate in zap, before fluentcore sees the
// entry.
func allocatingInZap(core *fluentcore.Core) []allocCase {
	logger := zap.New(core)
	caller := zap.New(core, zap.AddCaller())
	stack := zap.New(core, zap.AddStacktrace(zapcore.ErrorLevel))
	sugar := logger.Sugar()
	fs := []zap.Field{zap.String("s", "v")}
	return []allocCase{
		{"fields built at the call", func() { logger.Info("m", zap.String("s", "v")) }},
		{"fields built at the call, level off", func() { logger.Debug("m", zap.String("s", "v")) }},
		{"AddCaller", func() { caller.Info("m", fs...) }},
		{"AddStacktrace", func() { stack.Error("m", fs...) }},
		{"Sugar Infow", func() { sugar.Infow("m", "s", "v") }},
		{"Sugar Infof", func() { sugar.Infof("m %s", "v") }},
		{"With per call", func() { logger.With(fs...).Info("m") }},
	}
}

func TestAllocationClaimExceptions(t *testing.T) {
	core := allocCore(t, fluentcore.Config{Spill: fluentcore.SpillConfig{Fallback: zapcore.AddSync(discardWriter{})}})
	groups := map[string][]allocCase{
		"fluentcore":      allocatingInCore(core),
		"values' methods": allocatingInMethods(t, core),
		"zap":             allocatingInZap(core),
	}
	for who, cases := range groups {
		for _, c := range cases {
			if n := allocsOf(c.call); n == 0 {
				t.Errorf("%s (%s): no allocation; docs/guarantees.md lists it as allocating: update the list", c.name, who)
			}
		}
	}
}

// discardWriter takes what the err fallback writes (the DPanic case may spill).
type discardWriter struct{}

func (discardWriter) Write(p []byte) (int, error) { return len(p), nil }
