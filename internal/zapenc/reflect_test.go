package zapenc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tinylib/msgp/msgp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/fluentcore/fluentcore/internal/testkit"
)

// ---- types for the reflected corpus: encoding/json's rules, case by case ----

type embBase struct {
	ID     int `json:"id"`
	Name   string
	hidden int
}

type EmbExported struct {
	Level  string `json:"level"`
	Shared string
}

type embConflictA struct {
	X int
	Y int `json:"y"`
}

type embConflictB struct {
	X int
	Z int
}

// EmbTagA and EmbTagB both tag a field "t": embedded at the same depth, it cancels out.
// The struct embedding both is built with reflect.StructOf, since go vet rightly flags
// such a struct in source.
type EmbTagA struct {
	T int `json:"t"`
	U int
}

type EmbTagB struct {
	T int `json:"t"`
	V int
}

func tagConflictValue() any {
	t := reflect.StructOf([]reflect.StructField{
		{Name: "EmbTagA", Type: reflect.TypeFor[EmbTagA](), Anonymous: true},
		{Name: "EmbTagB", Type: reflect.TypeFor[EmbTagB](), Anonymous: true},
		{Name: "W", Type: reflect.TypeFor[int](), Tag: `json:"w"`},
	})
	v := reflect.New(t).Elem()
	v.Field(0).Set(reflect.ValueOf(EmbTagA{1, 2}))
	v.Field(1).Set(reflect.ValueOf(EmbTagB{3, 4}))
	v.Field(2).SetInt(5)
	return v.Interface()
}

type EmbInt int

type embInner struct{ Inner string }

// textKey is a TextMarshaler usable as a map key.
type textKey struct{ A, B string }

func (k textKey) MarshalText() ([]byte, error) { return []byte(k.A + "/" + k.B), nil }

// addrJSON has MarshalJSON on its pointer: encoding/json uses it only where the value is
// addressable.
type addrJSON struct{ V int }

func (a *addrJSON) MarshalJSON() ([]byte, error) { return []byte(`"addr"`), nil }

// valJSON has MarshalJSON on its value, writing JSON that needs converting.
type valJSON struct{ n int }

func (v valJSON) MarshalJSON() ([]byte, error) {
	return fmt.Appendf(nil, " {\"n\": %d, \"s\": \"a\\u00e9\\ud83c\\udf89\\n\", \"l\": [true, false, null, -0.5e-3]} ", v.n), nil
}

type reflOuter struct {
	embBase
	*EmbExported
	embConflictA
	embConflictB
	EmbInt
	Named   embInner `json:"named"`
	Name    string
	Omit    string   `json:",omitempty"`
	OmitPtr *int     `json:"omitPtr,omitempty"`
	OmitZ   embInner `json:",omitzero"`
	OmitZT  textKey  `json:"omitZT,omitzero"`
	Dash    int      `json:"-"`
	//lint:ignore SA5008 encoding/json names this field "-", which the corpus checks
	DashName int     `json:"-,"` //nolint:staticcheck // encoding/json's "-," names the field "-": the case under test
	Quoted   int64   `json:",string"`
	QuotedS  string  `json:",string"`
	QuotedF  float64 `json:"qf,string"`
	QuotedB  *bool   `json:",string"`
	QuotedN  *int    `json:",string"`
	//lint:ignore SA5008 an invalid name: encoding/json falls back to the field's name
	BadTag   int `json:"b\\ad"` //nolint:staticcheck // a malformed tag is the case under test
	Unicode  int `json:"ünï"`
	private  int
	Iface    any
	IfacePtr any
	Bytes    []byte
	NilBytes []byte
	Arr      [3]uint8
	Num      json.Number
	NumEmpty json.Number
	Raw      json.RawMessage
	Val      valJSON
	Text     textKey
	IntMap   map[int]string
	UintMap  map[uint8]bool
	TextMap  map[textKey]int
	Nested   map[string]map[string][]int
	PtrPtr   **int
	Slice    []embBase
	NilSlice []int
	NilMap   map[string]int
	Addr     addrJSON
	AddrMap  map[string]addrJSON
	AddrSl   []addrJSON
	AddrArr  [1]addrJSON
	F32      float32
	Anon     struct {
		A int `json:"a"`
	}
}

type dupA struct{ embBase }
type dupB struct{ embBase }

// dupOuter embeds embBase twice at the same depth: its fields cancel out.
type dupOuter struct {
	dupA
	dupB
	Own int
}

// tagBeatsUntagged: at the same depth a tagged name wins over an untagged one.
type tagA struct {
	N int `json:"Name"`
}
type tagB struct{ Name int }
type tagOuter struct {
	tagA
	tagB
}

type failJSON struct{}

func (failJSON) MarshalJSON() ([]byte, error) { return nil, errors.New("cannot") }

// addrFailJSON fails from a pointer receiver: the error names the value's type.
type addrFailJSON struct{}

func (*addrFailJSON) MarshalJSON() ([]byte, error) { return []byte("{"), nil }

type badJSON struct{}

func (badJSON) MarshalJSON() ([]byte, error) { return []byte(`{"a":nope}`), nil }

type failText struct{}

func (failText) MarshalText() ([]byte, error) { return nil, errors.New("no text") }

func reflOuterValue() reflOuter {
	n, b := 7, true
	pn := &n
	return reflOuter{
		embBase:      embBase{ID: 1, Name: "base", hidden: 2},
		EmbExported:  &EmbExported{Level: "lvl", Shared: "s"},
		embConflictA: embConflictA{X: 1, Y: 2},
		embConflictB: embConflictB{X: 3, Z: 4},
		EmbInt:       5,
		Named:        embInner{"in"},
		Name:         "outer",
		Dash:         9,
		DashName:     10,
		Quoted:       math.MinInt64,
		QuotedS:      "q\"<\u2028\x01\xff",
		QuotedF:      1e-7,
		QuotedB:      &b,
		Unicode:      11,
		private:      12,
		Iface:        map[string]any{"z": []any{1.5, "s", nil, map[string]any{}}, "a": uint8(3)},
		IfacePtr:     &embInner{"p"},
		Bytes:        []byte{0, 1, 0xff},
		Arr:          [3]uint8{1, 2, 3},
		Num:          "12.50",
		Raw:          json.RawMessage(`[1,{"x":"y"}]`),
		Val:          valJSON{3},
		Text:         textKey{"a", "b"},
		IntMap:       map[int]string{-1: "m", 10: "t", 9: "n"},
		UintMap:      map[uint8]bool{200: true},
		TextMap:      map[textKey]int{{"x", "y"}: 1, {"a", ""}: 2},
		Nested:       map[string]map[string][]int{"o": {"i": {1, 2}, "e": nil}, "n": nil},
		PtrPtr:       &pn,
		Slice:        []embBase{{ID: 2}, {Name: "x"}},
		Addr:         addrJSON{1},
		AddrMap:      map[string]addrJSON{"k": {2}},
		AddrSl:       []addrJSON{{3}},
		AddrArr:      [1]addrJSON{{4}},
		F32:          0.1,
	}
}

// reflectedCases are the reflected values of the conformance corpus: each must decode to
// what zap's JSON encoder (encoding/json) writes.
func reflectedCases() []confCase {
	outer := reflOuterValue()
	bare := reflOuter{Omit: "kept", OmitPtr: new(int), OmitZ: embInner{"z"}, OmitZT: textKey{"t", ""}}
	d := 1500 * time.Millisecond
	return []confCase{
		{name: "reflected struct, embedded and tagged", fields: []zapcore.Field{
			zap.Reflect("v", outer), zap.Reflect("p", &outer), zap.Reflect("bare", bare),
			zap.Reflect("dup", dupOuter{Own: 1}), zap.Reflect("tags", tagOuter{tagA{1}, tagB{2}}),
			zap.Reflect("tagConflict", tagConflictValue()),
			zap.Reflect("slice", []reflOuter{bare}), zap.Reflect("anyMap", map[string]any{"o": &outer}),
		}},
		{name: "reflected collections", fields: []zapcore.Field{
			zap.Reflect("anys", []any{1, "two", nil, 3.5, true, []byte("b"), map[string]any{"k": []any{}}}),
			zap.Reflect("ints", [2]int{-1, 1}), zap.Reflect("empty", []string{}), zap.Reflect("nilSlice", []string(nil)),
			zap.Reflect("strMap", map[string]string{"b": "2", "a": "1", "": "empty", "\xff": "bad key"}),
			zap.Reflect("nested", map[string][]map[string]int{"x": {{"y": 1}, nil}}),
			zap.Reflect("ptrs", []*int{nil}), zap.Reflect("f32s", []float32{0.1, -2.5}),
			zap.Reflect("named", EmbInt(4)), zap.Reflect("num", json.Number("-1e300")), zap.Reflect("numInf", json.Number("-1e400")),
			zap.Reflect("rawInf", json.RawMessage(`[1e999, 2E+400]`)),
			zap.Reflect("bigNum", json.Number("123456789012345678901234567890")),
			zap.Reflect("text", textKey{"k", "v"}), zap.Reflect("nilText", (*textKey)(nil)),
			zap.Reflect("json", valJSON{9}), zap.Reflect("nilJSONPtr", (*valJSON)(nil)),
			zap.Reflect("raw", json.RawMessage(`"\ud800x\udc00\u0041"`)),
		}},
		{name: "reflected errors", fields: []zapcore.Field{
			zap.Reflect("badKey", map[float64]int{1: 1}), zap.Reflect("complex", 1+2i),
			zap.Reflect("chanInStruct", struct{ C chan int }{}), zap.Reflect("nanInMap", map[string]any{"a": 1, "b": math.Inf(-1)}),
			zap.Reflect("nan32", struct{ F float32 }{float32(math.NaN())}), zap.Reflect("marshalErr", failJSON{}),
			zap.Reflect("badJSON", badJSON{}), zap.Reflect("textErr", failText{}),
			zap.Reflect("textKeyErr", map[failTextKey]int{{}: 1}), zap.Reflect("badNumber", json.Number("0x1")),
			zap.Reflect("quotedNaN", struct {
				F float64 `json:",string"`
			}{math.NaN()}),
			zap.Reflect("inSlice", []any{1, func() {}}), zap.Reflect("addrErr", []addrFailJSON{{}}),
			zap.String("after", "errors roll back cleanly"),
		}},
		{
			name: "reflected time and duration go through the configured encoders",
			fields: []zapcore.Field{zap.Reflect("s", struct {
				When  time.Time
				D     time.Duration
				P     *time.Time
				Times []time.Time
				Durs  map[string]time.Duration
			}{entTime, d, &farTime, []time.Time{entTime}, map[string]time.Duration{"d": d}}),
				zap.Reflect("t", entTime), zap.Reflect("d", d)},
			zapFields: []zapcore.Field{zap.Dict("s", zap.Time("When", entTime), zap.Duration("D", d),
				zap.Time("P", farTime), zap.Times("Times", []time.Time{entTime}), zap.Dict("Durs", zap.Duration("d", d))),
				zap.Time("t", entTime), zap.Duration("d", d)},
		},
	}
}

// failTextKey fails as a map key.
type failTextKey struct{}

func (failTextKey) MarshalText() ([]byte, error) { return nil, errors.New("no key") }

// ---- documented deviations from encoding/json, each checked on its own ----

// tagged has msg/msgpack tags that differ from its json tags: we follow them.
type tagged struct {
	A int `msg:"a" json:"x"`
	B int `msgpack:"b" json:"y"`
	C int `json:"c"`
	D int `msg:"-" json:"d"`
	E int `msg:",omitempty" json:"e"`
}

// logUser is an ObjectMarshaler that hides a field encoding/json would write.
type logUser struct {
	Name, Password string
}

func (u logUser) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddString("name", u.Name)
	return nil
}

// rawMsgp is a msgp.Marshaler with a value receiver; rawMsgpPtr one with a pointer
// receiver, like msgp's generated code.
type rawMsgp struct{ b []byte }

func (r rawMsgp) MarshalMsg(b []byte) ([]byte, error) { return append(b, r.b...), nil }

type rawMsgpPtr struct{ V int }

func (r *rawMsgpPtr) MarshalMsg(b []byte) ([]byte, error) {
	return msgp.AppendBool(msgp.AppendString(msgp.AppendMapHeader(b, 1), "via msgp"), true), nil
}

type listNode struct {
	Name string
	Next *listNode
}

type panicJSON struct{}

func (panicJSON) MarshalJSON() ([]byte, error) { panic("json exploded") }

type panicObj struct{}

func (panicObj) MarshalLogObject(zapcore.ObjectEncoder) error { panic("obj exploded") }

func TestReflectedDeviations(t *testing.T) {
	cyc := &listNode{Name: "a"}
	cyc.Next = cyc
	cycMap := map[string]any{}
	cycMap["self"] = cycMap
	errVal := errors.New("bad thing")
	cases := []struct {
		name     string
		v        any
		want     any    // our value, normalised
		wantErr  string // or: our "<key>Error", substring
		zapWants any    // what zap's JSON writes instead (nil: zap fails or panics)
	}{
		{"msg and msgpack tags win", tagged{1, 2, 3, 4, 0},
			map[string]any{"a": testkit.IntNum("1"), "b": testkit.IntNum("2"), "c": testkit.IntNum("3")}, "",
			map[string]any{"x": testkit.IntNum("1"), "y": testkit.IntNum("2"), "c": testkit.IntNum("3"), "d": testkit.IntNum("4"), "e": testkit.IntNum("0")}},
		{"nested ObjectMarshaler wins", struct{ U logUser }{logUser{"ann", "secret"}},
			map[string]any{"U": map[string]any{"name": "ann"}}, "",
			map[string]any{"U": map[string]any{"Name": "ann", "Password": "secret"}}},
		{"top-level ObjectMarshaler wins", logUser{"bob", "pw"}, map[string]any{"name": "bob"}, "",
			map[string]any{"Name": "bob", "Password": "pw"}},
		{"error as its text", struct{ Err error }{errVal}, map[string]any{"Err": "bad thing"}, "",
			map[string]any{"Err": map[string]any{}}},
		{"nested msgp.Marshaler", struct{ M rawMsgp }{rawMsgp{msgp.AppendInt64(nil, 42)}},
			map[string]any{"M": testkit.IntNum("42")}, "", map[string]any{"M": map[string]any{}}},
		{"msgp pointer receiver on a value", rawMsgpPtr{1}, map[string]any{"via msgp": true}, "",
			map[string]any{"V": testkit.IntNum("1")}},
		{"pointer cycle", cyc, nil, "deeper than", nil},
		{"map cycle", cycMap, nil, "deeper than", nil},
		{"panicking MarshalJSON", panicJSON{}, nil, "PANIC=json exploded", nil},
		{"panicking nested MarshalLogObject", []any{panicObj{}}, nil, "PANIC=obj exploded", nil},
	}
	cfg := NewConfig(defaultCfg())
	enc := New(cfg)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fields := []zapcore.Field{zap.Int("before", 1), zap.Reflect("r", c.v), zap.Int("after", 2)}
			_, _, rec := decodeEntry(t, enc.appendEntry(nil, nil, ptr(baseEntry()), fields))
			if rec["before"] != int64(1) || rec["after"] != int64(2) {
				t.Errorf("neighbours lost: %v", rec)
			}
			if c.wantErr != "" {
				if _, ok := rec["r"]; ok || !strings.Contains(fmt.Sprint(rec["rError"]), c.wantErr) {
					t.Errorf("want only rError containing %q, got %v", c.wantErr, rec)
				}
				return
			}
			if d := testkit.Diff(testkit.NormMsgp(rec["r"]), c.want, "r"); d != "" {
				t.Error(d)
			}
			// Show the deviation is real: zap's JSON encoder writes something else.
			zapRec := zapRecord(t, defaultCfg(), confCase{fields: []zapcore.Field{zap.Reflect("r", c.v)}}, baseEntry())
			if d := testkit.Diff(zapRec["r"], c.zapWants, "zap r"); d != "" {
				t.Error(d)
			}
		})
	}
}

// TestReflectedNilAndTypedNil covers the ways a reflected value can be nil.
func TestReflectedNilAndTypedNil(t *testing.T) {
	cfg := NewConfig(defaultCfg())
	fields := []zapcore.Field{zap.Reflect("nil", nil), zap.Reflect("nilPtr", (*reflOuter)(nil)),
		zap.Reflect("nilMap", map[string]any(nil)), zap.Reflect("nilObj", (*logUserPtr)(nil)),
		zap.Reflect("nilMsgp", (*rawMsgpPtr)(nil)), zap.Reflect("nilErr", (*ptrErr)(nil))}
	_, _, rec := decodeEntry(t, New(cfg).appendEntry(nil, nil, ptr(baseEntry()), fields))
	for _, k := range []string{"nil", "nilPtr", "nilMap", "nilObj", "nilMsgp", "nilErr"} {
		if v, ok := rec[k]; !ok || v != nil {
			t.Errorf("%s: %#v (present %v), want nil", k, v, ok)
		}
	}
}

type logUserPtr struct{ Name string }

func (u *logUserPtr) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddString("name", u.Name)
	return nil
}

// TestReflectedPlansConcurrent builds plans for the same new types from many goroutines
// (run with -race): every goroutine gets the same bytes.
func TestReflectedPlansConcurrent(t *testing.T) {
	type fresh1 struct {
		A map[int][]*struct{ B string }
		N *fresh1
	}
	v := fresh1{A: map[int][]*struct{ B string }{1: {{"x"}}}, N: &fresh1{}}
	cfg := NewConfig(defaultCfg())
	want := New(cfg).appendEntry(nil, nil, ptr(baseEntry()), []zapcore.Field{zap.Reflect("v", v)})
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			type fresh2 struct{ X, Y []fresh1 }
			enc := New(cfg)
			for range 50 {
				got := enc.appendEntry(nil, nil, ptr(baseEntry()), []zapcore.Field{zap.Reflect("v", v)})
				_ = enc.appendEntry(nil, nil, ptr(baseEntry()), []zapcore.Field{zap.Reflect("w", fresh2{})})
				if !bytes.Equal(got, want) {
					errs <- "different bytes"
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
}

// TestReflectedAllocs pins the allocation-free cases of the reflection path.
func TestReflectedAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counts")
	}
	r, m := benchOrderValue(), benchOrderMsgp()
	cases := map[string]zapcore.Field{
		"reflected struct": zap.Reflect("s", &r),
		"msgp struct":      zap.Reflect("g", &m),
		"anyMap":           zap.Reflect("m", map[string]any{"a": 1, "b": "x", "c": []any{true, 2.5}, "d": map[string]any{"e": nil}}),
		"strSlice":         zap.Reflect("l", []string{"a", "b"}),
	}
	cfg := NewConfig(defaultCfg())
	enc := New(cfg)
	dst := make([]byte, 0, 1<<16)
	for name, f := range cases {
		fs := []zapcore.Field{f}
		dst = enc.appendEntry(dst[:0], nil, ptr(baseEntry()), fs)
		if n := testkit.SteadyAllocs(100, func() { dst = enc.appendEntry(dst[:0], nil, ptr(baseEntry()), fs) }); n != 0 {
			t.Errorf("%s: %v allocs per entry, want 0", name, n)
		}
	}
}

// TestReflectedMsgpMatchesReflection: generated msgp code and the reflection encoder write
// the same record for the same data, and it is what zap's JSON encoder writes.
func TestReflectedMsgpMatchesReflection(t *testing.T) {
	r, m := benchOrderValue(), benchOrderMsgp()
	cfg := NewConfig(defaultCfg())
	_, _, viaMsgp := decodeEntry(t, New(cfg).appendEntry(nil, nil, ptr(baseEntry()), []zapcore.Field{zap.Reflect("o", &m)}))
	_, _, viaReflect := decodeEntry(t, New(cfg).appendEntry(nil, nil, ptr(baseEntry()), []zapcore.Field{zap.Reflect("o", &r)}))
	if d := testkit.Diff(testkit.NormMsgp(viaMsgp), testkit.NormMsgp(viaReflect), "record"); d != "" {
		t.Error(d)
	}
	zapRec := zapRecord(t, defaultCfg(), confCase{fields: []zapcore.Field{zap.Reflect("o", &r)}}, baseEntry())
	if d := testkit.Diff(testkit.NormMsgp(viaReflect), zapRec, "record"); d != "" {
		t.Error(d)
	}
}

// ---- benchmarks: reflected structs ----

// reflectedBenchValues are the values of BenchmarkReflected and BenchmarkZapJSONReflected:
// the order with generated msgp code, the same order through reflection, and the kind of
// map a sugared logger passes.
func reflectedBenchValues() map[string]any {
	r, m := benchOrderValue(), benchOrderMsgp()
	return map[string]any{
		"msgp":       &m,
		"reflection": &r,
		"anyMap": map[string]any{"user": "ann", "id": 42, "ratio": 0.25, "ok": true,
			"tags": []any{"a", "b"}, "nested": map[string]any{"k": "v", "n": nil}},
	}
}

func BenchmarkReflected(b *testing.B) {
	enc := New(NewConfig(defaultCfg()))
	for _, name := range []string{"msgp", "reflection", "anyMap"} {
		fs := []zapcore.Field{zap.Reflect("order", reflectedBenchValues()[name])}
		b.Run(name, func(b *testing.B) {
			dst := make([]byte, 0, 4096)
			b.ReportAllocs()
			for b.Loop() {
				dst = enc.appendEntry(dst[:0], nil, ptr(baseEntry()), fs)
			}
		})
	}
}

// BenchmarkZapJSONReflected is zap's JSON encoder (encoding/json) on the same values; the
// msgp value has the same JSON as the reflection one.
func BenchmarkZapJSONReflected(b *testing.B) {
	enc := zapcore.NewJSONEncoder(defaultCfg())
	for _, name := range []string{"reflection", "anyMap"} {
		fs := []zapcore.Field{zap.Reflect("order", reflectedBenchValues()[name])}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				buf, _ := enc.EncodeEntry(baseEntry(), fs)
				buf.Free()
			}
		})
	}
}
