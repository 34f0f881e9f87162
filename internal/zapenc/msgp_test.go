package zapenc

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tinylib/msgp/msgp"
	"go.uber.org/multierr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/fluentcore/fluentcore/internal/msgpenc"
	"github.com/fluentcore/fluentcore/internal/testkit"
	"github.com/fluentcore/fluentcore/internal/wire"
)

// ---- marshalers and values used by the corpus ----

// objFunc is an ObjectMarshaler made of a function.
type objFunc func(zapcore.ObjectEncoder) error

func (f objFunc) MarshalLogObject(enc zapcore.ObjectEncoder) error { return f(enc) }

// arrFunc is an ArrayMarshaler made of a function.
type arrFunc func(zapcore.ArrayEncoder) error

func (f arrFunc) MarshalLogArray(enc zapcore.ArrayEncoder) error { return f(enc) }

// fieldsObj marshals as an object holding fs.
func fieldsObj(fs ...zapcore.Field) objFunc {
	return func(enc zapcore.ObjectEncoder) error {
		for _, f := range fs {
			f.AddTo(enc)
		}
		return nil
	}
}

// strStringer is a well-behaved Stringer.
type strStringer string

func (s strStringer) String() string { return string(s) }

// nilStringer panics on a nil receiver, which zap reports as "<nil>".
type nilStringer struct{ s string }

func (n *nilStringer) String() string { return n.s }

// panicStringer panics, which zap reports as "<key>Error".
type panicStringer struct{}

func (panicStringer) String() string { panic("stringer exploded") }

// verboseErr is a rich error whose %+v differs from Error(), like pkg/errors.
type verboseErr struct{ msg, detail string }

func (e verboseErr) Error() string { return e.msg }

func (e verboseErr) Format(s fmt.State, verb rune) {
	if verb == 'v' && s.Flag('+') {
		_, _ = io.WriteString(s, e.msg+"\n"+e.detail)
		return
	}
	_, _ = io.WriteString(s, e.msg)
}

// ptrErr panics on a nil receiver.
type ptrErr struct{ msg string }

func (e *ptrErr) Error() string { return e.msg }

// panicErr panics in Error().
type panicErr struct{}

func (panicErr) Error() string { panic("error exploded") }

var (
	entTime  = time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.UTC)
	errBoom  = errors.New("boom")
	verbose  = verboseErr{msg: "rich failure", detail: "at frame 1\nat frame 2"}
	jst      = time.FixedZone("JST", 9*3600)
	farTime  = time.Date(3000, 1, 2, 3, 4, 5, 6, time.UTC) // beyond UnixNano: TimeFullType
	huge     = strings.Repeat("0123456789abcdef", 1<<13)   // 128 KiB: str32
	hugeBad  = strings.Repeat("\xff", 30000)               // 90000 bytes once repaired
	badUTF8  = "a\xffb\xc3(c\xed\xa0\x80d"                 // lone byte, bad continuation, surrogate
	allBytes = func() []byte {
		b := make([]byte, 256)
		for i := range b {
			b[i] = byte(i)
		}
		return b
	}()
)

// allAppends calls every ArrayEncoder method (and AppendTimeLayout through zap's
// ISO8601 encoder when the config uses it).
var allAppends = arrFunc(func(a zapcore.ArrayEncoder) error {
	a.AppendBool(true)
	a.AppendByteString([]byte("bs\xff"))
	a.AppendComplex128(1 + 2i)
	a.AppendComplex64(-1 - 0.5i)
	a.AppendFloat64(1.25)
	a.AppendFloat64(math.NaN())
	a.AppendFloat32(0.1)
	a.AppendFloat32(float32(math.Inf(-1)))
	a.AppendInt(-1)
	a.AppendInt64(math.MinInt64)
	a.AppendInt32(math.MinInt32)
	a.AppendInt16(math.MinInt16)
	a.AppendInt8(math.MinInt8)
	a.AppendString("s\x00\n\"")
	a.AppendUint(1)
	a.AppendUint64(math.MaxUint64)
	a.AppendUint32(math.MaxUint32)
	a.AppendUint16(math.MaxUint16)
	a.AppendUint8(math.MaxUint8)
	a.AppendUintptr(0xdeadbeef)
	a.AppendDuration(1500 * time.Millisecond)
	a.AppendTime(entTime)
	if err := a.AppendArray(arrFunc(func(b zapcore.ArrayEncoder) error {
		b.AppendInt(1)
		return b.AppendArray(arrFunc(func(zapcore.ArrayEncoder) error { return nil }))
	})); err != nil {
		return err
	}
	if err := a.AppendObject(fieldsObj(zap.String("in", "obj"), zap.Namespace("ns"), zap.Int("x", 1))); err != nil {
		return err
	}
	if err := a.AppendReflected(map[string]any{"x": 1, "y": []int{1, 2}}); err != nil {
		return err
	}
	return a.AppendReflected(nil)
})

// allAdds calls every ObjectEncoder method.
var allAdds = objFunc(func(o zapcore.ObjectEncoder) error {
	_ = o.AddArray("arr", arrFunc(func(a zapcore.ArrayEncoder) error { a.AppendInt(7); return nil }))
	_ = o.AddObject("obj", fieldsObj(zap.Bool("t", true)))
	o.AddBinary("bin", []byte{0, 1, 2, 0xff})
	o.AddByteString("bs", []byte("bytes\xfe"))
	o.AddBool("bool", false)
	o.AddComplex128("c128", complex(math.Inf(1), math.NaN()))
	o.AddComplex64("c64", 3-4i)
	o.AddDuration("dur", -time.Minute)
	o.AddFloat64("f64", math.MaxFloat64)
	o.AddFloat32("f32", math.SmallestNonzeroFloat32)
	o.AddInt("int", math.MaxInt)
	o.AddInt64("i64", math.MaxInt64)
	o.AddInt32("i32", math.MaxInt32)
	o.AddInt16("i16", math.MaxInt16)
	o.AddInt8("i8", math.MaxInt8)
	o.AddString("str", "日本語 🎉 \uFFFD")
	o.AddTime("time", entTime.In(jst))
	o.AddUint("uint", math.MaxUint)
	o.AddUint64("u64", math.MaxUint64)
	o.AddUint32("u32", math.MaxUint32)
	o.AddUint16("u16", math.MaxUint16)
	o.AddUint8("u8", math.MaxUint8)
	o.AddUintptr("uptr", 1)
	if err := o.AddReflected("refl", struct {
		A int
		B string `json:"b"`
	}{1, "<&>"}); err != nil {
		return err
	}
	o.OpenNamespace("ns")
	o.AddString("inNS", "yes")
	return nil
})

func deepObj(n int) zapcore.ObjectMarshaler {
	if n == 0 {
		return fieldsObj(zap.Int("leaf", 1))
	}
	if n%3 == 0 {
		return fieldsObj(zap.Array("a", arrFunc(func(a zapcore.ArrayEncoder) error {
			return a.AppendObject(deepObj(n - 1))
		})), zap.Int("d", n))
	}
	return fieldsObj(zap.Object("o", deepObj(n-1)), zap.Namespace("n"), zap.Int("d", n))
}

// ---- the conformance corpus ----

// confCase is one entry of the conformance corpus.
type confCase struct {
	name   string
	ctx    [][]zapcore.Field    // successive With calls
	ent    func(*zapcore.Entry) // changes to baseEntry
	fields []zapcore.Field
	// zapFields, when set, are what zap's JSON encoder gets instead of fields: the
	// documented equivalent where we deliberately differ from encoding/json (time.Time and
	// time.Duration inside reflected values go through the configured encoders).
	zapFields []zapcore.Field
}

// ptr is the address of a copy of v: an entry built by a call, for appendEntry.
func ptr[T any](v T) *T { return &v }

func baseEntry() zapcore.Entry {
	return zapcore.Entry{Level: zapcore.InfoLevel, Time: entTime, Message: "hello"}
}

var testCaller = zapcore.EntryCaller{
	Defined:  true,
	PC:       1,
	File:     "/home/dev/go/src/github.com/acme/shop/orders/handler.go",
	Line:     42,
	Function: "github.com/acme/shop/orders.(*Handler).Serve",
}

func corpus() []confCase {
	var cs []confCase
	add := func(name string, fields ...zapcore.Field) {
		cs = append(cs, confCase{name: name, fields: fields})
	}
	add("no fields")
	add("strings", zap.String("s", "plain"), zap.String("empty", ""), zap.String("ctl", "\x00\x01\t\n\r\"\\/"),
		zap.String("unicode", "日本語 🎉"), zap.String("bad", badUTF8), zap.String("k\xfeey", "bad key"),
		zap.String("", "empty key"), zap.String("huge", huge), zap.String("hugeBad", hugeBad),
		zap.String("s31", strings.Repeat("x", 31)), zap.String("s32", strings.Repeat("x", 32)),
		zap.String("s256", strings.Repeat("y", 256)), zap.String("s65536", strings.Repeat("z", 65536)))
	add("bytes", zap.Binary("bin", allBytes), zap.Binary("binEmpty", nil), zap.ByteString("bs", []byte("ok")),
		zap.ByteString("bsBad", []byte(badUTF8)), zap.ByteString("bsNil", nil))
	add("bools", zap.Bool("t", true), zap.Bool("f", false))
	add("ints", zap.Int("int", 1), zap.Int64("min64", math.MinInt64), zap.Int64("max64", math.MaxInt64),
		zap.Int32("min32", math.MinInt32), zap.Int32("max32", math.MaxInt32), zap.Int16("min16", math.MinInt16),
		zap.Int8("min8", math.MinInt8), zap.Int8("max8", math.MaxInt8), zap.Int("zero", 0), zap.Int("neg", -33))
	add("uints", zap.Uint("uint", 7), zap.Uint64("max64", math.MaxUint64), zap.Uint32("max32", math.MaxUint32),
		zap.Uint16("max16", math.MaxUint16), zap.Uint8("max8", math.MaxUint8), zap.Uintptr("uptr", 0xc000123456),
		zap.Uint64("zero", 0))
	add("floats", zap.Float64("f", 12.345), zap.Float64("nan", math.NaN()), zap.Float64("inf", math.Inf(1)),
		zap.Float64("ninf", math.Inf(-1)), zap.Float64("max", math.MaxFloat64),
		zap.Float64("tiny", math.SmallestNonzeroFloat64), zap.Float64("negzero", math.Copysign(0, -1)),
		zap.Float64("whole", 3), zap.Float64("big", 1e21), zap.Float32("f32", 0.1),
		zap.Float32("f32max", math.MaxFloat32), zap.Float32("f32nan", float32(math.NaN())),
		zap.Float32("f32inf", float32(math.Inf(1))), zap.Float32("f32ninf", float32(math.Inf(-1))))
	add("complex", zap.Complex128("c", 1+2i), zap.Complex128("cneg", -1.5-2.5i),
		zap.Complex128("cnan", complex(math.NaN(), math.Inf(-1))), zap.Complex128("cinf", complex(math.Inf(1), math.Inf(1))),
		zap.Complex64("c64", 0.1+0.2i), zap.Complex128("cbig", complex(1e308, -1e-300)),
		zap.Complex128("creal", 3), zap.Complex128("cnegzero", complex(3, math.Copysign(0, -1))))
	add("durations and times", zap.Duration("d", 1500*time.Millisecond), zap.Duration("neg", -time.Nanosecond),
		zap.Duration("max", math.MaxInt64), zap.Time("t", entTime), zap.Time("tz", entTime.In(jst)),
		zap.Time("far", farTime), zap.Time("zero", time.Time{}), zap.Time("epoch", time.Unix(0, 0)))
	add("arrays", zap.Ints("ints", []int{1, -2, 3}), zap.Strings("strs", []string{"a", "", badUTF8}),
		zap.Bools("bools", nil), zap.Float64s("floats", []float64{1.5, math.NaN(), math.Inf(-1)}),
		zap.Durations("durs", []time.Duration{time.Second, 0}), zap.Times("times", []time.Time{entTime, farTime}),
		zap.Complex128s("cs", []complex128{1i}), zap.ByteStrings("bss", [][]byte{[]byte("x")}),
		zap.Uintptrs("ups", []uintptr{1}), zap.Stringers("stringers", []strStringer{"s1", "s2"}),
		zap.Array("all", allAppends))
	add("objects", zap.Object("all", allAdds), zap.Dict("dict", zap.String("a", "b"), zap.Dict("inner", zap.Int("c", 1))),
		zap.Object("empty", fieldsObj()), zap.Object("nilObj", nil), zap.Objects("objs", []objFunc{fieldsObj(zap.Int("i", 1)), fieldsObj()}))
	add("namespaces", zap.String("top", "1"), zap.Namespace("ns1"), zap.String("a", "in1"), zap.Namespace("ns2"),
		zap.String("b", "in2"), zap.Namespace("empty"))
	add("namespace inside object",
		zap.Object("obj", fieldsObj(zap.String("a", "1"), zap.Namespace("inner"), zap.String("b", "2"),
			zap.Object("deeper", fieldsObj(zap.Namespace("d"), zap.Int("x", 1))), zap.Namespace("inner2"), zap.Int("y", 2))),
		zap.String("after", "top level"))
	add("inline and skip", zap.Inline(fieldsObj(zap.String("inl", "x"), zap.Int("n", 1))), zap.Skip(),
		zap.Inline(fieldsObj(zap.Namespace("fromInline"), zap.String("in", "ns"))), zap.String("after", "inside fromInline"))
	add("stringers", zap.Stringer("ok", strStringer("fine")), zap.Stringer("nilptr", (*nilStringer)(nil)),
		zap.Stringer("panics", panicStringer{}), zap.Stringer("nilIface", nil), zap.Stringer("bad", strStringer(badUTF8)))
	add("errors", zap.Error(errBoom), zap.NamedError("verbose", verbose),
		zap.NamedError("multi", multierr.Combine(errors.New("m1"), verbose, errors.New("m3"))),
		zap.NamedError("multiNested", multierr.Combine(errBoom, multierr.Combine(errors.New("x"), errors.New("y")))),
		zap.NamedError("joined", errors.Join(errors.New("j1"), errors.New("j2"))),
		zap.NamedError("wrapped", fmt.Errorf("wrap: %w", verbose)),
		zap.NamedError("nilptr", (*ptrErr)(nil)), zap.NamedError("panics", panicErr{}),
		zap.Errors("errs", []error{errBoom, nil, verbose}), zap.Error(nil))
	add("failing marshalers",
		zap.Object("objFail", objFunc(func(o zapcore.ObjectEncoder) error {
			o.AddString("before", "x")
			o.OpenNamespace("open")
			o.AddInt("n", 1)
			return errBoom
		})),
		zap.Array("arrFail", arrFunc(func(a zapcore.ArrayEncoder) error {
			a.AppendInt(1)
			if err := a.AppendObject(objFunc(func(o zapcore.ObjectEncoder) error {
				o.AddString("half", "done")
				return errors.New("inner failed")
			})); err != nil {
				return err
			}
			a.AppendInt(2)
			return nil
		})),
		zap.Array("arrNested", arrFunc(func(a zapcore.ArrayEncoder) error {
			return a.AppendArray(arrFunc(func(b zapcore.ArrayEncoder) error {
				b.AppendString("x")
				return errors.New("deep array failed")
			}))
		})),
		zap.String("after", "still here"))
	add("reflected", zap.Reflect("struct", struct {
		Name  string
		Tags  []string
		Inner struct{ F float64 }
		Big   uint64
		Small int64
		Raw   json.RawMessage
		Bytes []byte
		Ptr   *int
		M     map[string]any
	}{"n<&>", []string{"a", badUTF8}, struct{ F float64 }{1.5}, math.MaxUint64, math.MinInt64,
		json.RawMessage(` {"z":1, "a":[1, 2.5, 1e3, 123456789012345678901234567890]} `), []byte{1, 2, 3}, nil,
		map[string]any{"k": nil, "b": true}}),
		zap.Any("anyMap", map[string]int{"b": 2, "a": 1}), zap.Reflect("nil", nil), zap.Reflect("str", "plain"),
		zap.Reflect("num", 3.25), zap.Reflect("unsupported", func() {}), zap.Reflect("chan", make(chan int)),
		zap.Reflect("nan", math.NaN()), zap.Stringp("nilp", nil),
		zap.Array("appendReflected", arrFunc(func(a zapcore.ArrayEncoder) error {
			if err := a.AppendReflected([]any{1, "two", nil}); err != nil {
				return err
			}
			return a.AppendReflected(func() {})
		})))
	// deepObj(23) is the deepest of its kind within msgpenc.MaxDepth: past the cap the record
	// differs from zap's on purpose (depth_test.go).
	add("deep nesting", zap.Object("deep", deepObj(23)), zap.String("after", "x"))
	add("duplicate keys", zap.String("dup", "first"), zap.Int("dup", 2), zap.String("msg", "field named msg"))

	cs = append(cs,
		confCase{name: "entry metadata", fields: []zapcore.Field{zap.Int("n", 1)}, ent: func(e *zapcore.Entry) {
			e.Level = zapcore.ErrorLevel
			e.LoggerName = "shop.orders"
			e.Caller = testCaller
			e.Stack = "goroutine 1 [running]:\nmain.main()\n\t/x/main.go:10 +0x1d"
		}},
		confCase{name: "short caller paths", ent: func(e *zapcore.Entry) {
			e.Caller = zapcore.EntryCaller{Defined: true, File: "handler.go", Line: 7, Function: ""}
		}},
		confCase{name: "one-dir caller path", ent: func(e *zapcore.Entry) {
			e.Caller = zapcore.EntryCaller{Defined: true, File: "orders/handler\xff.go", Line: -1}
		}},
		confCase{name: "levels and messages", ent: func(e *zapcore.Entry) {
			e.Level = zapcore.FatalLevel
			e.Message = badUTF8
		}},
		confCase{name: "unknown level", ent: func(e *zapcore.Entry) { e.Level = 42 }},
		confCase{name: "debug empty message", ent: func(e *zapcore.Entry) {
			e.Level = zapcore.DebugLevel
			e.Message = ""
		}},
		confCase{name: "zero time", ent: func(e *zapcore.Entry) { e.Time = time.Time{} }},
		confCase{
			name:   "context",
			ctx:    [][]zapcore.Field{{zap.String("svc", "shop"), zap.Int("pid", 1)}},
			fields: []zapcore.Field{zap.String("f", "x")},
		},
		confCase{
			name: "context chain with namespaces",
			ctx: [][]zapcore.Field{
				{zap.String("c1", "v"), zap.Namespace("n1"), zap.Int("i", 1)},
				{},
				{zap.Namespace("n2"), zap.Bool("b", true), zap.Object("o", fieldsObj(zap.Namespace("x"), zap.Int("y", 1)))},
				{zap.Error(errBoom), zap.Skip()},
			},
			fields: []zapcore.Field{zap.String("f", "x"), zap.Namespace("n3"), zap.Int("z", 3)},
			ent: func(e *zapcore.Entry) {
				e.Stack = "stack at top level"
				e.LoggerName = "named"
			},
		},
		confCase{
			name: "context of every kind",
			ctx: [][]zapcore.Field{
				{zap.Object("all", allAdds), zap.Array("arr", allAppends), zap.NamedError("multi", multierr.Combine(errBoom, verbose))},
				{zap.Inline(fieldsObj(zap.Namespace("inl"))), zap.Reflect("r", []int{1})},
			},
			fields: []zapcore.Field{zap.Float64("nan", math.NaN())},
		},
		confCase{
			name:   "context namespace, no entry fields",
			ctx:    [][]zapcore.Field{{zap.Namespace("only")}},
			ent:    func(e *zapcore.Entry) { e.Stack = "s" },
			fields: nil,
		},
	)
	return append(cs, reflectedCases()...)
}

// ---- configurations ----

// defaultCfg is what the core uses: zap's production config without a time key, since
// the time travels as EventTime.
func defaultCfg() zapcore.EncoderConfig {
	c := zap.NewProductionEncoderConfig()
	c.TimeKey = ""
	return c
}

// noopEncoders write nothing, so zap's fallbacks kick in.
func noopCfg() zapcore.EncoderConfig {
	c := defaultCfg()
	c.TimeKey = "ts"
	c.FunctionKey = "func"
	c.EncodeLevel = func(zapcore.Level, zapcore.PrimitiveArrayEncoder) {}
	c.EncodeTime = func(time.Time, zapcore.PrimitiveArrayEncoder) {}
	c.EncodeDuration = func(time.Duration, zapcore.PrimitiveArrayEncoder) {}
	c.EncodeCaller = func(zapcore.EntryCaller, zapcore.PrimitiveArrayEncoder) {}
	c.EncodeName = func(string, zapcore.PrimitiveArrayEncoder) {}
	return c
}

func configs() map[string]zapcore.EncoderConfig {
	custom := zapcore.EncoderConfig{
		MessageKey: "M", LevelKey: "L", TimeKey: "T", NameKey: "N", CallerKey: "C", FunctionKey: "F",
		StacktraceKey: "S", EncodeLevel: zapcore.CapitalLevelEncoder, EncodeTime: zapcore.ISO8601TimeEncoder,
		EncodeDuration: zapcore.StringDurationEncoder, EncodeCaller: zapcore.ShortCallerEncoder,
		EncodeName: zapcore.FullNameEncoder,
	}
	omit := zapcore.EncoderConfig{
		MessageKey: zapcore.OmitKey, LevelKey: "lvl", TimeKey: "time", NameKey: zapcore.OmitKey, CallerKey: "at",
		FunctionKey: zapcore.OmitKey, StacktraceKey: zapcore.OmitKey, EncodeLevel: zapcore.LowercaseColorLevelEncoder,
		EncodeTime: zapcore.RFC3339NanoTimeEncoder, EncodeDuration: zapcore.NanosDurationEncoder,
		EncodeCaller: zapcore.FullCallerEncoder,
	}
	userFuncs := defaultCfg()
	userFuncs.TimeKey = "epoch"
	userFuncs.EncodeTime = zapcore.EpochMillisTimeEncoder
	userFuncs.EncodeLevel = func(l zapcore.Level, enc zapcore.PrimitiveArrayEncoder) { enc.AppendInt(int(l)) }
	userFuncs.EncodeName = func(n string, enc zapcore.PrimitiveArrayEncoder) { enc.AppendString(strings.ToUpper(n)) }
	userFuncs.EncodeCaller = func(c zapcore.EntryCaller, enc zapcore.PrimitiveArrayEncoder) { enc.AppendString(c.Function) }
	userFuncs.EncodeDuration = zapcore.MillisDurationEncoder
	noLevel := defaultCfg()
	noLevel.EncodeLevel = nil
	noLevel.TimeKey = "t"
	noLevel.EncodeTime = nil // zap falls back to nanoseconds
	noLevel.EncodeDuration = nil
	return map[string]zapcore.EncoderConfig{
		"default": defaultCfg(), "production": zap.NewProductionEncoderConfig(),
		"development": zap.NewDevelopmentEncoderConfig(), "custom": custom, "omit": omit,
		"userFuncs": userFuncs, "noop": noopCfg(), "noLevel": noLevel,
	}
}

// ---- decoding and normalising ----

// decodeEntry checks that b is exactly one Forward Entry, [ext 0 (8 bytes), map], and
// returns its time and record.
func decodeEntry(t *testing.T, b []byte) (sec, nsec uint32, rec map[string]any) {
	t.Helper()
	rest, err := msgp.Skip(b)
	if err != nil || len(rest) != 0 {
		t.Fatalf("entry is not exactly one msgpack value: err=%v, %d trailing bytes", err, len(rest))
	}
	v, _, err := testkit.ReadIntf(b)
	if err != nil {
		t.Fatalf("decode entry: %v", err)
	}
	arr, ok := v.([]any)
	if !ok || len(arr) != 2 {
		t.Fatalf("entry is %T of len %d, want a 2-array", v, len(arr))
	}
	ext, ok := arr[0].(*msgp.RawExtension)
	if !ok || ext.Type != wire.EventTimeType || len(ext.Data) != 8 {
		t.Fatalf("entry time is %#v, want ext 0 of 8 bytes", arr[0])
	}
	if b[1] != 0xd7 {
		t.Errorf("entry time header %#x, want fixext8", b[1])
	}
	// Read it again the way a client that registers nothing must: explicitly.
	var et wire.EventTime
	if _, err := msgp.ReadExtensionBytes(b[1:], &et); err != nil {
		t.Fatalf("entry time as EventTime: %v", err)
	}
	rec, ok = arr[1].(map[string]any)
	if !ok {
		t.Fatalf("record is %T, want map", arr[1])
	}
	recBytes := b[1+10:]
	if rest, err := msgp.Skip(recBytes); err != nil || len(rest) != 0 {
		t.Fatalf("record is not exactly one value: %v, %d trailing", err, len(rest))
	}
	checkPlain(t, rec, "record")
	if et.Sec != binary.BigEndian.Uint32(ext.Data[:4]) || et.Nsec != binary.BigEndian.Uint32(ext.Data[4:]) {
		t.Fatalf("EventTime %+v disagrees with raw payload % x", et, ext.Data)
	}
	return et.Sec, et.Nsec, rec
}

// checkPlain fails on anything in a decoded record that isn't a plain msgpack type
// (extensions, msgp's complex or time types).
func checkPlain(t *testing.T, v any, path string) {
	t.Helper()
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			checkPlain(t, x, path+"."+k)
		}
	case []any:
		for i, x := range v {
			checkPlain(t, x, path+"["+strconv.Itoa(i)+"]")
		}
	case nil, bool, string, []byte, int64, uint64, float32, float64:
	default:
		t.Errorf("%s: %T is not a plain msgpack value", path, v)
	}
}

// zapRecord encodes the case with zap's JSON encoder, the reference.
func zapRecord(t *testing.T, cfg zapcore.EncoderConfig, c confCase, ent zapcore.Entry) map[string]any {
	t.Helper()
	enc := zapcore.NewJSONEncoder(cfg)
	for _, layer := range c.ctx {
		enc = enc.Clone()
		for _, f := range layer {
			f.AddTo(enc)
		}
	}
	fields := c.fields
	if c.zapFields != nil {
		fields = c.zapFields
	}
	buf, err := enc.EncodeEntry(ent, fields)
	if err != nil {
		t.Fatalf("zap EncodeEntry: %v", err)
	}
	defer buf.Free()
	dec := json.NewDecoder(bytes.NewReader(buf.Bytes()))
	dec.UseNumber()
	var rec map[string]any
	if err := dec.Decode(&rec); err != nil {
		t.Fatalf("zap wrote invalid JSON: %v\n%s", err, buf.Bytes())
	}
	return testkit.NormJSON(rec).(map[string]any)
}

// appendEntry is EncodeEntry with no budget and no owner: the whole entry, whatever its
// size.
func (e *Encoder) appendEntry(dst []byte, ctx *Context, ent *zapcore.Entry, fields []zapcore.Field) []byte {
	return e.EncodeEntry(dst, ctx, ent, fields, msgpenc.Budget{}, nil)
}

func buildContext(cfg *Config, layers [][]zapcore.Field) *Context {
	var ctx *Context
	for _, layer := range layers {
		ctx = cfg.NewContext(ctx, layer)
	}
	return ctx
}

// ---- tests ----

func TestEncoderMatchesZapJSON(t *testing.T) {
	for cfgName, zc := range configs() {
		cfg := NewConfig(zc)
		shared := New(cfg) // reused across cases: state must not leak
		for _, c := range corpus() {
			t.Run(cfgName+"/"+c.name, func(t *testing.T) {
				ent := baseEntry()
				if c.ent != nil {
					c.ent(&ent)
				}
				ctx := buildContext(cfg, c.ctx)
				prefix := []byte{0xc0, 0xc3} // earlier entries in the batch
				out := shared.appendEntry(append([]byte(nil), prefix...), ctx, &ent, c.fields)
				if !bytes.Equal(out[:len(prefix)], prefix) {
					t.Fatalf("prefix changed: % x", out[:len(prefix)])
				}
				if shared.Buf != nil {
					t.Error("encoder retains dst after appendEntry")
				}
				sec, nsec, rec := decodeEntry(t, out[len(prefix):])
				if wantSec, wantNsec := eventTimeOf(ent.Time); sec != wantSec || nsec != wantNsec {
					t.Errorf("EventTime %d.%09d, want %d.%09d", sec, nsec, wantSec, wantNsec)
				}
				want := zapRecord(t, zc, c, ent)
				if d := testkit.Diff(testkit.NormMsgp(rec), want, "record"); d != "" {
					t.Error(d)
				}
				// A fresh encoder writes the very same bytes.
				again := New(cfg).appendEntry(nil, ctx, &ent, c.fields)
				if !bytes.Equal(again, out[len(prefix):]) {
					t.Error("a fresh encoder wrote different bytes")
				}
			})
		}
	}
}

// TestEncoderKeyOrder checks the record's key order against zap's EncodeEntry.
func TestEncoderKeyOrder(t *testing.T) {
	zc := configs()["custom"]
	cfg := NewConfig(zc)
	ent := baseEntry()
	ent.LoggerName, ent.Caller, ent.Stack = "n", testCaller, "stack"
	ctx := cfg.NewContext(nil, []zapcore.Field{zap.String("ctx", "c")})
	out := New(cfg).appendEntry(nil, ctx, &ent, []zapcore.Field{zap.Int("field", 1)})
	var keys []string
	b := out[11:]
	sz, b, err := msgp.ReadMapHeaderBytes(b)
	if err != nil {
		t.Fatal(err)
	}
	for range sz {
		var k string
		if k, b, err = msgp.ReadStringBytes(b); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
		if b, err = msgp.Skip(b); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"L", "T", "N", "C", "F", "M", "ctx", "field", "S"}
	if strings.Join(keys, ",") != strings.Join(want, ",") {
		t.Errorf("keys %v, want %v", keys, want)
	}
}

func TestEncoderCustomConfigValues(t *testing.T) {
	zc := configs()["custom"]
	cfg := NewConfig(zc)
	ent := baseEntry()
	ent.Time = entTime.In(jst)
	ent.LoggerName, ent.Caller, ent.Level = "a.b", testCaller, zapcore.WarnLevel
	out := New(cfg).appendEntry(nil, nil, &ent, []zapcore.Field{zap.Duration("d", 90*time.Second)})
	_, _, rec := decodeEntry(t, out)
	want := map[string]any{
		"L": "WARN", "T": entTime.In(jst).Format("2006-01-02T15:04:05.000Z0700"), "N": "a.b",
		"C": "orders/handler.go:42", "F": testCaller.Function, "M": "hello", "d": (90 * time.Second).String(),
	}
	if d := testkit.Diff(rec, want, "record"); d != "" {
		t.Error(d)
	}
}

// TestEncoderMultiValueEncoders covers user encoders that append several values, where
// zap's JSON would be invalid: in a map the values become one array, in an array they
// stay separate elements (as zap JSON writes them there).
func TestEncoderMultiValueEncoders(t *testing.T) {
	zc := defaultCfg()
	zc.TimeKey = "ts"
	two := func(enc zapcore.PrimitiveArrayEncoder) {
		enc.AppendString("a")
		enc.AppendInt(1)
	}
	zc.EncodeLevel = func(_ zapcore.Level, enc zapcore.PrimitiveArrayEncoder) { two(enc) }
	zc.EncodeTime = func(_ time.Time, enc zapcore.PrimitiveArrayEncoder) { two(enc) }
	zc.EncodeName = func(_ string, enc zapcore.PrimitiveArrayEncoder) { two(enc) }
	zc.EncodeCaller = func(_ zapcore.EntryCaller, enc zapcore.PrimitiveArrayEncoder) { two(enc) }
	zc.EncodeDuration = func(_ time.Duration, enc zapcore.PrimitiveArrayEncoder) { two(enc) }
	cfg := NewConfig(zc)
	ent := baseEntry()
	ent.LoggerName, ent.Caller = "n", testCaller
	fields := []zapcore.Field{zap.Duration("d", time.Second), zap.Durations("ds", []time.Duration{1, 2}),
		zap.Time("t", entTime), zap.Reflect("r", struct {
			T  time.Time
			Ds []time.Duration
		}{entTime, []time.Duration{1}})}
	ctx := cfg.NewContext(nil, []zapcore.Field{zap.Duration("cd", 1)})
	_, _, rec := decodeEntry(t, New(cfg).appendEntry(nil, ctx, &ent, fields))
	pair := []any{"a", int64(1)}
	want := map[string]any{"level": pair, "ts": pair, "logger": pair, "caller": pair, "msg": "hello",
		"cd": pair, "d": pair, "ds": []any{"a", int64(1), "a", int64(1)}, "t": pair,
		"r": map[string]any{"T": pair, "Ds": []any{pair}}} // reflected arrays have a fixed size
	if d := testkit.Diff(testkit.NormMsgp(rec), testkit.NormMsgp(want), "record"); d != "" {
		t.Error(d)
	}
}

// TestEncoderMisusedInterfaces covers marshalers that type-assert their encoder to the
// other interface, recover from panics midway or nest slots: zap's JSON can break there,
// ours must stay one valid record with str keys.
func TestEncoderMisusedInterfaces(t *testing.T) {
	zc := defaultCfg()
	zc.TimeKey = "ts"
	zc.EncodeTime = func(tm time.Time, enc zapcore.PrimitiveArrayEncoder) {
		enc.(zapcore.ObjectEncoder).AddString("k", "v") // two values into a slot
		enc.(zapcore.ArrayEncoder).AppendDuration(time.Second)
	}
	cfg := NewConfig(zc)
	fields := []zapcore.Field{
		zap.Object("appendsInObject", objFunc(func(o zapcore.ObjectEncoder) error {
			o.(zapcore.ArrayEncoder).AppendString("stray")
			o.AddInt("n", 1)
			return o.(zapcore.ArrayEncoder).AppendObject(fieldsObj(zap.Int("x", 1)))
		})),
		zap.Array("addsInArray", arrFunc(func(a zapcore.ArrayEncoder) error {
			a.(zapcore.ObjectEncoder).AddString("k", "v")
			a.(zapcore.ObjectEncoder).OpenNamespace("ns")
			a.(zapcore.ObjectEncoder).AddInt("inNS", 1)
			return nil
		})),
		zap.Object("recovered", objFunc(func(o zapcore.ObjectEncoder) (err error) {
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("recovered: %v", r)
				}
			}()
			o.AddString("ok", "1")
			return o.AddObject("half", objFunc(func(o zapcore.ObjectEncoder) error {
				o.AddString("a", "b")
				o.OpenNamespace("ns")
				_ = o.AddArray("arr", arrFunc(func(a zapcore.ArrayEncoder) error {
					a.AppendInt(1)
					panic("mid-array")
				}))
				return nil
			}))
		})),
		zap.Time("t", entTime),
		zap.String("last", "x"),
	}
	ctx := cfg.NewContext(nil, []zapcore.Field{fields[2], zap.String("c", "d")})
	_, _, rec := decodeEntry(t, New(cfg).appendEntry(nil, ctx, ptr(baseEntry()), fields))
	obj := rec["appendsInObject"].(map[string]any)
	if obj[""] == nil || obj["n"] != int64(1) {
		t.Errorf("stray appends in an object: %#v", obj)
	}
	if arr := rec["addsInArray"].([]any); len(arr) != 4 || arr[0] != "k" || arr[1] != "v" || arr[2] != "ns" {
		t.Errorf("adds in an array: %#v", arr)
	}
	// The panic mid-array is the array's error, returned to the marshaler that called
	// AddArray (which ignores it): the values before it stay, every container is closed,
	// and nothing reaches the user's own recover.
	half, _ := rec["recovered"].(map[string]any)["half"].(map[string]any)
	arr, _ := half["ns"].(map[string]any)["arr"].([]any)
	if rec["recoveredError"] != nil || len(arr) != 1 || half["a"] != "b" || rec["last"] != "x" || rec["c"] != "d" {
		t.Errorf("panic mid-array: %#v", rec)
	}
	if ts, ok := rec["ts"].([]any); !ok || len(ts) != 3 {
		t.Errorf("slot with mixed Add/Append: %#v", rec["ts"])
	}
}

func TestEventTimeClamps(t *testing.T) {
	cases := []struct {
		in        time.Time
		sec, nsec uint32
	}{
		{time.Time{}, 0, 0},
		{time.Unix(-1, 5), 0, 0},
		{time.Unix(0, 0), 0, 0},
		{entTime, uint32(entTime.Unix()), 123456789},
		{time.Unix(0xFFFFFFFD, 7), 0xFFFFFFFD, 7},
		{time.Unix(0xFFFFFFFE, 0), 0xFFFFFFFD, 999999999},
		{time.Unix(0xFFFFFFFF, 0), 0xFFFFFFFD, 999999999},
		{time.Unix(1<<40, 3), 0xFFFFFFFD, 999999999},
	}
	cfg := NewConfig(defaultCfg())
	enc := New(cfg)
	for _, c := range cases {
		ent := baseEntry()
		ent.Time = c.in
		sec, nsec, _ := decodeEntry(t, enc.appendEntry(nil, nil, &ent, nil))
		if sec != c.sec || nsec != c.nsec {
			t.Errorf("%v: EventTime %d.%d, want %d.%d", c.in, sec, nsec, c.sec, c.nsec)
		}
	}
}

// TestContextSharedAndImmutable uses one context from many goroutines (run with -race)
// and checks that neither entries nor child contexts change it.
func TestContextSharedAndImmutable(t *testing.T) {
	cfg := NewConfig(defaultCfg())
	parent := cfg.NewContext(nil, []zapcore.Field{zap.String("a", "b"), zap.Namespace("ns"), zap.Int("n", 1)})
	if cfg.NewContext(parent, nil) != parent {
		t.Error("NewContext without fields should return the parent")
	}
	if cfg.NewContext(nil, nil) != nil {
		t.Error("NewContext(nil, nil) should be nil")
	}
	snapshot := append([]byte(nil), parent.buf...)
	want := New(cfg).appendEntry(nil, parent, ptr(baseEntry()), []zapcore.Field{zap.Int("f", 2)})
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			enc := New(cfg)
			for i := range 200 {
				_ = cfg.NewContext(parent, []zapcore.Field{zap.Namespace("child"), zap.Int("g", g)})
				got := enc.appendEntry(nil, parent, ptr(baseEntry()), []zapcore.Field{zap.Int("f", 2)})
				if !bytes.Equal(got, want) {
					errs <- fmt.Sprintf("goroutine %d, entry %d differs", g, i)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if !bytes.Equal(parent.buf, snapshot) {
		t.Error("context bytes changed after use")
	}
}

// ---- reflected values ----

// msgpValue is a msgp.Marshaler writing fixed bytes, with a different JSON form so the
// test can tell which path was taken.
type msgpValue struct{ raw []byte }

func (m *msgpValue) MarshalMsg(b []byte) ([]byte, error) { return append(b, m.raw...), nil }
func (m *msgpValue) MarshalJSON() ([]byte, error)        { return []byte(`"via json"`), nil }

// msgpFailing is a msgp.Marshaler that fails.
type msgpFailing struct{}

func (msgpFailing) MarshalMsg(b []byte) ([]byte, error) { return append(b, 0xc0), errBoom }

func TestReflectedMsgpMarshaler(t *testing.T) {
	cfg := NewConfig(defaultCfg())
	good := msgp.AppendInt64(msgp.AppendString(msgp.AppendMapHeader(nil, 1), "a"), 1)
	cases := []struct {
		name string
		v    any
		want any
	}{
		{"one value", &msgpValue{good}, map[string]any{"a": int64(1)}},
		{"two values", &msgpValue{append(append([]byte(nil), good...), 0xc0)}, "via json"},
		{"truncated", &msgpValue{good[:len(good)-1]}, "via json"},
		{"empty", &msgpValue{}, "via json"},
		{"extension", &msgpValue{wire.AppendEventTime(nil, 1, 2)}, "via json"},
		{"nested extension", &msgpValue{msgp.AppendComplex64(msgp.AppendArrayHeader(nil, 1), 1i)}, "via json"},
		{"invalid utf-8", &msgpValue{msgp.AppendString(nil, "\xff")}, "via json"},
		{"nil pointer", (*msgpValue)(nil), nil},
		{"error", msgpFailing{}, map[string]any{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			enc := New(cfg)
			_, _, rec := decodeEntry(t, enc.appendEntry(nil, nil, ptr(baseEntry()), []zapcore.Field{zap.Reflect("r", c.v)}))
			if d := testkit.Diff(testkit.NormMsgp(rec["r"]), testkit.NormMsgp(c.want), "r"); d != "" {
				t.Error(d)
			}
		})
	}
}

// reflectedOutput is a ReflectedEncoder writing fixed text.
type reflectedOutput struct {
	w    io.Writer
	text string
}

func (r reflectedOutput) Encode(any) error {
	_, err := io.WriteString(r.w, r.text)
	return err
}

func TestReflectedEncoderOutput(t *testing.T) {
	cases := []struct {
		text    string
		want    any
		wantErr bool
	}{
		{`{"b":1,"a":[true,null,"s"]}`, map[string]any{"b": int64(1), "a": []any{true, nil, "s"}}, false},
		{"18446744073709551615", uint64(math.MaxUint64), false},
		{"-9223372036854775808", int64(math.MinInt64), false},
		{"123456789012345678901234567890", 1.2345678901234568e29, false},
		{"2.5e-3", 0.0025, false},
		{"1e400", "1e400", false},
		{"", nil, true},
		{"1 2", nil, true},
		{`{"a":`, nil, true},
		{"nope", nil, true},
	}
	for _, c := range cases {
		t.Run(c.text, func(t *testing.T) {
			zc := defaultCfg()
			zc.NewReflectedEncoder = func(w io.Writer) zapcore.ReflectedEncoder { return reflectedOutput{w, c.text} }
			enc := New(NewConfig(zc))
			fields := []zapcore.Field{zap.Reflect("r", struct{}{}), zap.Array("a", arrFunc(func(a zapcore.ArrayEncoder) error {
				return a.AppendReflected(struct{}{})
			}))}
			_, _, rec := decodeEntry(t, enc.appendEntry(nil, nil, ptr(baseEntry()), fields))
			if c.wantErr {
				if _, ok := rec["r"]; ok || rec["rError"] == nil || rec["aError"] == nil {
					t.Errorf("want rError and aError only: %#v", rec)
				}
				if a := rec["a"].([]any); len(a) != 0 {
					t.Errorf("failed AppendReflected left %#v", a)
				}
				return
			}
			if d := testkit.Diff(testkit.NormMsgp(rec["r"]), testkit.NormMsgp(c.want), "r"); d != "" {
				t.Error(d)
			}
			if d := testkit.Diff(testkit.NormMsgp(rec["a"]), testkit.NormMsgp([]any{c.want}), "a"); d != "" {
				t.Error(d)
			}
		})
	}
}

// FuzzStringsMatchZap checks str values and keys against zap's JSON for any input.
func FuzzStringsMatchZap(f *testing.F) {
	for _, s := range []string{"", "plain", badUTF8, "\xff\xfe", "\xef\xbf\xbd", "\xf0\x9f\x8e", "\x00\x1f\"\\", "日本"} {
		f.Add(s)
	}
	zc := defaultCfg()
	cfg := NewConfig(zc)
	f.Fuzz(func(t *testing.T, s string) {
		c := confCase{fields: []zapcore.Field{zap.String(s, s), zap.ByteString("b", []byte(s))}}
		ent := baseEntry()
		ent.Message = s
		_, _, rec := decodeEntry(t, New(cfg).appendEntry(nil, nil, &ent, c.fields))
		if d := testkit.Diff(testkit.NormMsgp(rec), zapRecord(t, zc, c, ent), "record"); d != "" {
			t.Error(d)
		}
	})
}

// ---- allocations ----

// nonReflectedFields has one field of every FieldType except ReflectType (which may
// allocate by design).
func nonReflectedFields() map[string]zapcore.Field {
	return map[string]zapcore.Field{
		"ArrayMarshaler":  zap.Ints("ints", []int{1, 2, 3}),
		"ObjectMarshaler": zap.Object("obj", fieldsObj(zap.String("a", "b"), zap.Namespace("ns"), zap.Int("c", 1))),
		"Inline":          zap.Inline(fieldsObj(zap.Bool("inl", true))),
		"Binary":          zap.Binary("bin", []byte{1, 2, 3}),
		"Bool":            zap.Bool("bool", true),
		"ByteString":      zap.ByteString("bs", []byte("bytes")),
		"Complex128":      zap.Complex128("c128", 1+2i),
		"Complex64":       zap.Complex64("c64", 1+2i),
		"Duration":        zap.Duration("dur", time.Second),
		"Float64":         zap.Float64("f64", 12.345),
		"Float32":         zap.Float32("f32", 1.5),
		"Int64":           zap.Int64("i64", -1),
		"Int32":           zap.Int32("i32", -1),
		"Int16":           zap.Int16("i16", -1),
		"Int8":            zap.Int8("i8", -1),
		"String":          zap.String("str", "value"),
		"Time":            zap.Time("time", entTime),
		"TimeFull":        zap.Time("timeFull", farTime),
		"Uint64":          zap.Uint64("u64", 1),
		"Uint32":          zap.Uint32("u32", 1),
		"Uint16":          zap.Uint16("u16", 1),
		"Uint8":           zap.Uint8("u8", 1),
		"Uintptr":         zap.Uintptr("uptr", 1),
		"Namespace":       zap.Namespace("ns"),
		"Stringer":        zap.Stringer("stringer", strStringer("s")),
		"Error":           zap.Error(errBoom),
		"Skip":            zap.Skip(),
		"NaN":             zap.Float64("nan", math.NaN()),
		"InvalidUTF8":     zap.String("bad\xff", badUTF8),
	}
}

func TestEncoderZeroAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counts")
	}
	fields := nonReflectedFields()
	all := make([]zapcore.Field, 0, len(fields))
	for _, f := range fields {
		all = append(all, f)
	}
	devCfg := zap.NewDevelopmentEncoderConfig() // ISO8601 time key, short caller
	devCfg.EncodeDuration = zapcore.MillisDurationEncoder
	for cfgName, zc := range map[string]zapcore.EncoderConfig{"default": defaultCfg(), "development": devCfg} {
		cfg := NewConfig(zc)
		ctx := cfg.NewContext(nil, []zapcore.Field{zap.String("svc", "shop"), zap.Namespace("req"), zap.Int("id", 7)})
		enc := New(cfg)
		ent := baseEntry()
		ent.LoggerName, ent.Caller, ent.Stack = "shop", testCaller, "stack"
		dst := make([]byte, 0, 1<<20)
		check := func(name string, fs []zapcore.Field) {
			dst = enc.appendEntry(dst[:0], ctx, &ent, fs) // warm up scratch and stack
			if n := testkit.SteadyAllocs(100, func() { dst = enc.appendEntry(dst[:0], ctx, &ent, fs) }); n != 0 {
				t.Errorf("%s/%s: %v allocs per entry, want 0", cfgName, name, n)
			}
		}
		for name, f := range fields {
			check(name, []zapcore.Field{f})
		}
		check("all", all)
	}
}

// ---- benchmarks ----

// standardRecord is the entry every encoder benchmark in the project uses.
func standardRecord() (zapcore.Entry, []zapcore.Field) {
	ent := zapcore.Entry{Level: zapcore.InfoLevel, Time: entTime, Message: "request handled"}
	return ent, []zapcore.Field{
		zap.String("method", "GET"),
		zap.String("path", "/api/v1/users/12345/orders"),
		zap.Int("status", 200),
		zap.Float64("latency_ms", 12.345),
		zap.Int64("bytes", 5120),
		zap.String("user_id", "u-8f3a2b9c"),
		zap.String("trace_id", "4bf92f3577b34da6a3ce929d0e0e4736"),
		zap.Bool("ok", true),
		zap.Int("retries", 0),
		zap.String("region", "ap-northeast-1"),
	}
}

func TestStandardRecordMatchesZap(t *testing.T) {
	ent, fields := standardRecord()
	cfg := NewConfig(defaultCfg())
	_, _, rec := decodeEntry(t, New(cfg).appendEntry(nil, nil, &ent, fields))
	if d := testkit.Diff(testkit.NormMsgp(rec), zapRecord(t, defaultCfg(), confCase{fields: fields}, ent), "record"); d != "" {
		t.Error(d)
	}
	if len(rec) != 12 {
		t.Errorf("record has %d keys, want level, msg and 10 fields", len(rec))
	}
}

func BenchmarkEncodeEntry(b *testing.B) {
	ent, fields := standardRecord()
	enc := New(NewConfig(defaultCfg()))
	dst := make([]byte, 0, 4096)
	b.ReportAllocs()
	for b.Loop() {
		dst = enc.appendEntry(dst[:0], nil, &ent, fields)
	}
	b.SetBytes(int64(len(dst)))
}

func BenchmarkZapJSONEncodeEntry(b *testing.B) {
	ent, fields := standardRecord()
	enc := zapcore.NewJSONEncoder(defaultCfg())
	b.ReportAllocs()
	var n int
	for b.Loop() {
		buf, _ := enc.EncodeEntry(ent, fields)
		n = buf.Len()
		buf.Free()
	}
	b.SetBytes(int64(n))
}

// benchFields is one field of each type for the per-type benchmarks, by name.
func benchFields() ([]string, map[string]zapcore.Field) {
	fields := nonReflectedFields()
	fields["Reflect"] = zap.Reflect("r", struct{ A, B int }{1, 2})
	names := make([]string, 0, len(fields))
	for name := range fields {
		names = append(names, name)
	}
	sort.Strings(names)
	return names, fields
}

func BenchmarkEncodeField(b *testing.B) {
	ent := baseEntry()
	enc := New(NewConfig(defaultCfg()))
	names, fields := benchFields()
	for _, name := range names {
		fs := []zapcore.Field{fields[name]}
		b.Run(name, func(b *testing.B) {
			dst := make([]byte, 0, 4096)
			b.ReportAllocs()
			for b.Loop() {
				dst = enc.appendEntry(dst[:0], nil, &ent, fs)
			}
		})
	}
}

// BenchmarkZapJSONEncodeField is BenchmarkEncodeField with zap's JSON encoder.
func BenchmarkZapJSONEncodeField(b *testing.B) {
	ent := baseEntry()
	enc := zapcore.NewJSONEncoder(defaultCfg())
	names, fields := benchFields()
	for _, name := range names {
		fs := []zapcore.Field{fields[name]}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				buf, _ := enc.EncodeEntry(ent, fs)
				buf.Free()
			}
		})
	}
}

// BenchmarkEncodeEntryWithContext is the standard record logged by a With child.
func BenchmarkEncodeEntryWithContext(b *testing.B) {
	ent, fields := standardRecord()
	cfg := NewConfig(defaultCfg())
	ctx := cfg.NewContext(nil, fields[:5])
	enc := New(cfg)
	dst := make([]byte, 0, 4096)
	b.ReportAllocs()
	for b.Loop() {
		dst = enc.appendEntry(dst[:0], ctx, &ent, fields[5:])
	}
}

func BenchmarkZapJSONEncodeEntryWithContext(b *testing.B) {
	ent, fields := standardRecord()
	enc := zapcore.NewJSONEncoder(defaultCfg())
	for _, f := range fields[:5] {
		f.AddTo(enc)
	}
	b.ReportAllocs()
	for b.Loop() {
		buf, _ := enc.EncodeEntry(ent, fields[5:])
		buf.Free()
	}
}
