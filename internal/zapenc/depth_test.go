package zapenc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/tinylib/msgp/msgp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/fluentcore/fluentcore/internal/msgpenc"
)

// Receivers' nesting limits, counted in open non-empty containers including the entry's
// array and its record map: fluent-bit builds msgpack-c with MSGPACK_EMBED_STACK_SIZE 64
// (cmake/msgpack.cmake), msgpack-ruby's unpacker (fluentd) stops at
// MSGPACK_UNPACKER_STACK_CAPACITY 128. What a record holds below its map may nest two
// fewer.
const (
	fluentBitNesting = 64
	fluentdNesting   = 128
)

// nestedObj is an ObjectMarshaler n maps deep: {"level": n, "next": {...}}; it returns the
// error of its child, as a marshaler should.
type nestedObj int

func (n nestedObj) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddInt("level", int(n))
	if n > 1 {
		return enc.AddObject("next", n-1)
	}
	return nil
}

// nestedArr is an ArrayMarshaler n arrays deep: [n, [n-1, [...]]].
type nestedArr int

func (n nestedArr) MarshalLogArray(enc zapcore.ArrayEncoder) error {
	enc.AppendInt(int(n))
	if n > 1 {
		return enc.AppendArray(n - 1)
	}
	return nil
}

// nesting is how many maps and arrays v nests, empty ones included: 0 for a scalar.
func nesting(v any) int {
	deepest := 0
	switch v := v.(type) {
	case map[string]any:
		for _, x := range v {
			deepest = max(deepest, nesting(x))
		}
	case []any:
		for _, x := range v {
			deepest = max(deepest, nesting(x))
		}
	default:
		return 0
	}
	return 1 + deepest
}

// checkRecordNesting fails unless rec's values nest at most msgpenc.MaxDepth containers, and unless
// the cap itself leaves the entry within what fluent-bit and fluentd read.
func checkRecordNesting(t *testing.T, rec map[string]any) {
	t.Helper()
	n := nesting(rec) - 1
	if n > msgpenc.MaxDepth {
		t.Errorf("record nests %d levels, the cap is %d", n, msgpenc.MaxDepth)
	}
	if 2+n > fluentBitNesting || 2+n > fluentdNesting {
		t.Errorf("entry nests %d containers: fluent-bit reads %d, fluentd %d", 2+n, fluentBitNesting, fluentdNesting)
	}
}

// followTo walks down v through step (a map key, or an array index) levels times and
// returns what it finds there, or fails the test.
func followTo(t *testing.T, v any, step any, levels int) any {
	t.Helper()
	for i := 0; i < levels; i++ {
		switch s := step.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("at level %d: %T, want a map", i, v)
			}
			v = m[s]
		case int:
			a, ok := v.([]any)
			if !ok || len(a) <= s {
				t.Fatalf("at level %d: %v, want an array of more than %d", i, v, s)
			}
			v = a[s]
		}
	}
	return v
}

// checkDepthCut checks a field cut at the cap: the value at depth msgpenc.MaxDepth holds the marker
// where the next container would be, and the field's error names the cap.
func checkDepthCut(t *testing.T, rec map[string]any, key string, step any, wantErr bool) {
	t.Helper()
	// rec[key] is at depth 1; the container at msgpenc.MaxDepth holds the marker.
	if got := followTo(t, rec[key], step, msgpenc.MaxDepth); got != msgpenc.TooDeepMarker {
		t.Errorf("%s: in the container at depth %d %#v, want the marker %q", key, msgpenc.MaxDepth, got, msgpenc.TooDeepMarker)
	}
	errText, _ := rec[key+"Error"].(string)
	if wantErr && !strings.Contains(errText, fmt.Sprintf("deeper than %d", msgpenc.MaxDepth)) {
		t.Errorf("%sError = %q, want the cap named", key, errText)
	}
	if !wantErr && errText != "" {
		t.Errorf("%sError = %q, want none", key, errText)
	}
}

// An entry nested far past the cap, through ObjectMarshaler, ArrayMarshaler and namespaces,
// is cut at msgpenc.MaxDepth with a visible marker; every other field of the entry is kept and the
// entry stays within what fluent-bit and fluentd read.
func TestNestingPastTheDepthCapIsMarked(t *testing.T) {
	enc := New(NewConfig(defaultCfg()))
	namespaces := objFunc(func(enc zapcore.ObjectEncoder) error {
		for range 1500 {
			enc.OpenNamespace("ns")
		}
		enc.AddString("end", "here")
		return nil
	})
	fields := []zapcore.Field{
		zap.Int("before", 1),
		zap.Object("obj", nestedObj(1500)),
		zap.Array("arr", nestedArr(1500)),
		zap.Object("spaces", namespaces),
		zap.Object("fits", nestedObj(msgpenc.MaxDepth)),
		zap.Int("after", 2),
	}
	out := enc.appendEntry(nil, nil, ptr(baseEntry()), fields)
	_, _, rec := decodeEntry(t, out)
	if rec["before"] != int64(1) || rec["after"] != int64(2) {
		t.Errorf("neighbours lost: before %v, after %v", rec["before"], rec["after"])
	}
	checkRecordNesting(t, rec)
	// {"level": 1500, "next": {...}}: the map at depth msgpenc.MaxDepth holds "next": marker.
	checkDepthCut(t, rec, "obj", "next", true)
	if lvl := followTo(t, rec["obj"], "next", msgpenc.MaxDepth-1).(map[string]any)["level"]; lvl != int64(1500-msgpenc.MaxDepth+1) {
		t.Errorf("the deepest map kept is level %v, want %d", lvl, 1500-msgpenc.MaxDepth+1)
	}
	// [1500, [1499, [...]]]: the array at depth msgpenc.MaxDepth holds the marker second.
	checkDepthCut(t, rec, "arr", 1, true)
	// Namespaces cannot fail: past the cap the first one is its key and the marker, the
	// others nothing, and the fields after them stay in the deepest map.
	deepest := followTo(t, rec["spaces"], "ns", msgpenc.MaxDepth-1).(map[string]any)
	if deepest["ns"] != msgpenc.TooDeepMarker || deepest["end"] != "here" {
		t.Errorf("deepest namespace %v, want ns: the marker and end: here", deepest)
	}
	if n := bytes.Count(out, []byte(msgpenc.TooDeepMarker)); n != 3 {
		t.Errorf("%d markers in the entry, want 3 (obj, arr, one for the namespaces)", n)
	}
	// A value that reaches the cap exactly is whole.
	if got := followTo(t, rec["fits"], "next", msgpenc.MaxDepth-1).(map[string]any); got["level"] != int64(1) || got["next"] != nil {
		t.Errorf("a value msgpenc.MaxDepth deep was cut: %v", got)
	}
	if _, ok := rec["fitsError"]; ok {
		t.Errorf("fitsError = %v for a value within the cap", rec["fitsError"])
	}
}

// Namespaces left open by With count towards the depth of the fields logged after them.
func TestContextNamespacesCountTowardsTheDepthCap(t *testing.T) {
	cfg := NewConfig(defaultCfg())
	var ctx *Context
	for range 10 {
		ctx = cfg.NewContext(ctx, []zapcore.Field{zap.Namespace("ns")})
	}
	enc := New(cfg)
	_, _, rec := decodeEntry(t, enc.appendEntry(nil, ctx, ptr(baseEntry()), []zapcore.Field{zap.Object("obj", nestedObj(100))}))
	checkRecordNesting(t, rec)
	inner := followTo(t, rec, "ns", 10).(map[string]any)
	if got := followTo(t, inner["obj"], "next", msgpenc.MaxDepth-10); got != msgpenc.TooDeepMarker {
		t.Errorf("at depth %d under 10 namespaces: %#v, want the marker", msgpenc.MaxDepth, got)
	}
}

// The cap is one number for every way a value nests: reflection, and the JSON and msgp
// marshalers it meets, count from the depth where the value starts. A reflected value that
// would pass the cap is an error (the field's "<key>Error", as for any reflection error); a
// msgp.Marshaler's output that would is not used, and the value is reflected instead.
func TestDepthCapIsSharedByReflection(t *testing.T) {
	enc := New(NewConfig(defaultCfg()))
	deepMap := func(n int) any {
		var v any = "leaf"
		for range n {
			v = map[string]any{"m": v}
		}
		return v
	}
	deepJSON := func(n int) json.RawMessage {
		return json.RawMessage(strings.Repeat(`{"m":`, n) + `"leaf"` + strings.Repeat("}", n))
	}
	deepMsgp := func(n int) struct{ M rawMsgp } {
		var b []byte
		for range n {
			b = msgp.AppendString(msgp.AppendMapHeader(b, 1), "m")
		}
		return struct{ M rawMsgp }{rawMsgp{msgp.AppendString(b, "leaf")}}
	}
	const outer = 5 // the reflected values sit in a map this deep
	// wrap logs f inside maps outer deep: {key: {"o": {"o": ... {f}}}}.
	wrap := func(key string, f zapcore.Field) zapcore.Field {
		var m zapcore.ObjectMarshaler = objFunc(func(enc zapcore.ObjectEncoder) error { f.AddTo(enc); return nil })
		for range outer - 1 {
			inner := m
			m = objFunc(func(enc zapcore.ObjectEncoder) error { return enc.AddObject("o", inner) })
		}
		return zap.Object(key, m)
	}
	refused := func(t *testing.T, m map[string]any) {
		if errText, _ := m["vError"].(string); !strings.Contains(errText, fmt.Sprintf("deeper than %d", msgpenc.MaxDepth)) || m["v"] != nil {
			t.Errorf("a value past the cap: %v, want only vError naming the cap", m)
		}
	}
	for _, c := range []struct {
		name       string
		fits, over any
		checkOver  func(*testing.T, map[string]any)
	}{
		{"map", deepMap(msgpenc.MaxDepth - outer), deepMap(msgpenc.MaxDepth - outer + 1), refused},
		{"json.Marshaler", deepJSON(msgpenc.MaxDepth - outer), deepJSON(msgpenc.MaxDepth - outer + 1), refused},
		{"msgp.Marshaler", deepMsgp(msgpenc.MaxDepth - outer - 1), deepMsgp(msgpenc.MaxDepth - outer), func(t *testing.T, m map[string]any) {
			if m["vError"] != nil || nesting(m["v"]) != 2 { // {"M": {}}: rawMsgp reflected
				t.Errorf("msgp output past the cap: %v, want the value reflected instead", m)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			fields := []zapcore.Field{wrap("fits", zap.Reflect("v", c.fits)), zap.Int("mid", 1), wrap("over", zap.Reflect("v", c.over))}
			_, _, rec := decodeEntry(t, enc.appendEntry(nil, nil, ptr(baseEntry()), fields))
			checkRecordNesting(t, rec)
			in := func(key string) map[string]any { return followTo(t, rec[key], "o", outer-1).(map[string]any) }
			if f := in("fits"); f["vError"] != nil || nesting(f["v"]) != msgpenc.MaxDepth-outer {
				t.Errorf("a value that reaches the cap exactly was refused or changed: %v", f)
			}
			c.checkOver(t, in("over"))
			if rec["mid"] != int64(1) {
				t.Errorf("mid = %v", rec["mid"])
			}
		})
	}
}

// cycle is an ObjectMarshaler that holds itself.
type cycle struct {
	self        *cycle
	ignoreError bool
}

func (c *cycle) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddString("k", "v")
	err := enc.AddObject("self", c.self)
	if c.ignoreError {
		return nil
	}
	return err
}

// arrayCycle is an ArrayMarshaler that holds itself.
type arrayCycle struct{ self *arrayCycle }

func (c *arrayCycle) MarshalLogArray(enc zapcore.ArrayEncoder) error {
	enc.AppendString("v")
	return enc.AppendArray(c.self)
}

// viaReflection is an ObjectMarshaler that logs a reflected struct holding itself: the
// cycle passes through the reflection encoder at every turn.
type viaReflection struct{ self *viaReflection }

func (c *viaReflection) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	return enc.AddReflected("r", struct{ Self *viaReflection }{c.self})
}

// cyclicChildEnv marks the subprocess in which TestCyclicMarshalersStopAtTheDepthCap
// encodes its cycles: were one to recurse without end, it would take that process down,
// not the test binary.
const cyclicChildEnv = "FLUENTCORE_TEST_CYCLIC_CHILD"

// A marshaler that holds itself, directly, as an array, or through a reflected value, stops
// at the cap: no stack overflow, the marker where the cycle was cut, and an entry a
// receiver reads.
func TestCyclicMarshalersStopAtTheDepthCap(t *testing.T) {
	if os.Getenv(cyclicChildEnv) == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCyclicMarshalersStopAtTheDepthCap$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), cyclicChildEnv+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestCyclicMarshalersStopAtTheDepthCap") {
			if len(out) > 4000 {
				out = out[:4000]
			}
			t.Fatalf("encoding the cycles failed (%v):\n%s", err, out)
		}
		return
	}
	// Far more stack than encoding to the cap takes, far less than a cycle without end does.
	debug.SetMaxStack(64 << 20)
	obj := &cycle{}
	obj.self = obj
	quiet := &cycle{ignoreError: true}
	quiet.self = quiet
	arr := &arrayCycle{}
	arr.self = arr
	refl := &viaReflection{}
	refl.self = refl
	enc := New(NewConfig(defaultCfg()))
	fields := []zapcore.Field{
		zap.Int("before", 1),
		zap.Object("obj", obj),
		zap.Object("quiet", quiet),
		zap.Array("arr", arr),
		zap.Object("refl", refl),
		zap.Int("after", 2),
	}
	_, _, rec := decodeEntry(t, enc.appendEntry(nil, nil, ptr(baseEntry()), fields))
	if rec["before"] != int64(1) || rec["after"] != int64(2) {
		t.Errorf("neighbours lost: before %v, after %v", rec["before"], rec["after"])
	}
	checkRecordNesting(t, rec)
	checkDepthCut(t, rec, "obj", "self", true)
	checkDepthCut(t, rec, "quiet", "self", false)
	checkDepthCut(t, rec, "arr", 1, true)
	// Through reflection the cut is a reflection error, and a reflected value that fails is
	// left out whole, at every turn of the cycle back to the field: "refl" stays empty.
	if errText, _ := rec["reflError"].(string); !strings.Contains(errText, fmt.Sprintf("deeper than %d", msgpenc.MaxDepth)) {
		t.Errorf("reflError = %q, want the cap named", errText)
	}
	if m, ok := rec["refl"].(map[string]any); !ok || len(m) != 0 {
		t.Errorf("refl = %v, want an empty map", rec["refl"])
	}
}

// The marker and the error it goes with name the cap.
func TestDepthCapMarkerNamesTheCap(t *testing.T) {
	if want := fmt.Sprintf("%d", msgpenc.MaxDepth); !strings.Contains(msgpenc.TooDeepMarker, want) || !strings.Contains(msgpenc.ErrTooDeep.Error(), want) {
		t.Errorf("marker %q, error %q: want both to name %s", msgpenc.TooDeepMarker, msgpenc.ErrTooDeep, want)
	}
}
