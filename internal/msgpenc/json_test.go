package msgpenc

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/fluentcore/fluentcore/internal/testkit"
)

func TestAppendJSON(t *testing.T) {
	cases := []struct {
		in   string
		want any
	}{
		{`{"b":1,"a":[true,null,"s"]}`, map[string]any{"b": int64(1), "a": []any{true, nil, "s"}}},
		{" \n[ ] ", []any{}},
		{`{}`, map[string]any{}},
		{`"\"\\\/\b\f\n\r\t\u0000\u00e9\ud83c\udf89"`, "\"\\/\b\f\n\r\t\x00é🎉"},
		{`"\ud83c"`, "\uFFFD"},
		{`"\udf89\ud83c\u0041"`, "\uFFFD\uFFFDA"},
		{"\"a\xffb\"", "a\uFFFDb"},
		{"-0", int64(0)},
		{"-9223372036854775809", -9223372036854775809.0},
		{"18446744073709551615", uint64(math.MaxUint64)},
		{"1.5e3", 1500.0},
		{"1E-2", 0.01},
		{"1e400", "1e400"},
	}
	var enc Reflector
	for _, c := range cases {
		out, err := enc.appendJSON([]byte{0xc0}, []byte(c.in), 0)
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		got, rest, err := testkit.ReadIntf(out[1:])
		if err != nil || len(rest) != 0 || out[0] != 0xc0 {
			t.Errorf("%q: not one value: %v, %d left", c.in, err, len(rest))
			continue
		}
		if d := testkit.Diff(testkit.NormMsgp(got), testkit.NormMsgp(c.want), c.in); d != "" {
			t.Error(d)
		}
	}
	for _, bad := range []string{"", " ", "nope", "tru", "01", "1.", "-", "1e", "[1,]", `{"a"}`, `{"a":1,}`, `{1:2}`,
		"[1 2]", `"\x"`, `"\u12"`, "\"\x01\"", `"open`, "[", "1 2", `{"a":1}}`} {
		out, err := enc.appendJSON([]byte{0xc0}, []byte(bad), 0)
		if err == nil || len(out) != 1 {
			t.Errorf("%q: accepted (%v, % x)", bad, err, out)
			continue
		}
		var buf bytes.Buffer
		if jerr := json.Compact(&buf, []byte(bad)); jerr == nil || jerr.Error() != err.Error() {
			t.Errorf("%q: error %q, encoding/json says %v", bad, err, jerr)
		}
	}
	// Nesting: up to the cap, counted from where the value starts, and no deeper.
	nested := func(n int) []byte { return []byte(strings.Repeat("[", n) + "1" + strings.Repeat("]", n)) }
	for _, start := range []int{0, MaxDepth / 2, MaxDepth} {
		if _, err := enc.appendJSON(nil, nested(MaxDepth-start), start); err != nil {
			t.Errorf("%d levels from depth %d refused: %v", MaxDepth-start, start, err)
		}
		if out, err := enc.appendJSON([]byte{0xc0}, nested(MaxDepth-start+1), start); !errors.Is(err, ErrTooDeep) || len(out) != 1 {
			t.Errorf("%d levels from depth %d: %v (%d bytes), want ErrTooDeep", MaxDepth-start+1, start, err, len(out))
		}
	}
}

func TestAppendJSONStringAndFloat(t *testing.T) {
	for _, s := range []string{"", "plain", "q\"\\/<>&", "\x00\x1f\x7f\b\f\n\r\t", "\u2028\u2029é🎉", badUTF8, "\xff"} {
		var b bytes.Buffer
		je := json.NewEncoder(&b)
		je.SetEscapeHTML(false) // zap's setting
		_ = je.Encode(s)
		want := bytes.TrimSuffix(b.Bytes(), []byte("\n"))
		if got := appendJSONString(nil, s); !bytes.Equal(got, want) {
			t.Errorf("%q: %s, want %s", s, got, want)
		}
	}
	for _, f := range []float64{0, math.Copysign(0, -1), 1, -1.5, 1e-7, 1e-6, 1e20, 1e21, 123456789.123, math.MaxFloat64, math.SmallestNonzeroFloat64} {
		want, _ := json.Marshal(f)
		if got := appendJSONFloat(nil, f, 64); !bytes.Equal(got, want) {
			t.Errorf("%v: %s, want %s", f, got, want)
		}
		if float32(f)-float32(f) != 0 {
			continue
		}
		want, _ = json.Marshal(float32(f))
		if got := appendJSONFloat(nil, float64(float32(f)), 32); !bytes.Equal(got, want) {
			t.Errorf("float32 %v: %s, want %s", f, got, want)
		}
	}
}

// FuzzAppendJSON checks the JSON to msgpack conversion against encoding/json: the same
// texts are accepted, with the same error, and decode to the same value.
func FuzzAppendJSON(f *testing.F) {
	for _, s := range []string{`{"a":[1,-2.5e3,"x\u00e9\ud83c\udf89",true,false,null,{}]}`, `"\ud800"`, "\"\xff\"",
		"18446744073709551616", "-0", "1e400", "[", `{"a" 1}`, " 0 ", "01", `"\u12"`} {
		f.Add([]byte(s))
	}
	var enc Reflector
	f.Fuzz(func(t *testing.T, js []byte) {
		out, err := enc.appendJSON([]byte{0xc0}, js, 0)
		var compacted bytes.Buffer
		jerr := json.Compact(&compacted, js)
		if errors.Is(err, ErrTooDeep) && jerr == nil { // valid, but past the cap: refused
			if len(out) != 1 || jsonNesting(js) <= MaxDepth {
				t.Fatalf("refused as too deep (%d bytes left), nesting %d", len(out), jsonNesting(js))
			}
			return
		}
		if (err == nil) != (jerr == nil) {
			t.Fatalf("ours: %v, encoding/json: %v", err, jerr)
		}
		if err != nil {
			if err.Error() != jerr.Error() || len(out) != 1 {
				t.Fatalf("error %q (%d bytes left), encoding/json: %q", err, len(out), jerr)
			}
			return
		}
		got, rest, rerr := testkit.ReadIntf(out[1:])
		if rerr != nil || len(rest) != 0 {
			t.Fatalf("not one msgpack value: %v, %d left", rerr, len(rest))
		}
		testkit.CheckRaw(t, out[1:])
		dec := json.NewDecoder(bytes.NewReader(js))
		dec.UseNumber()
		var want any
		if err := dec.Decode(&want); err != nil {
			t.Fatalf("encoding/json can't decode what it accepted: %v", err)
		}
		if d := testkit.Diff(testkit.NormMsgp(got), testkit.NormJSON(want), "value"); d != "" {
			t.Fatal(d)
		}
	})
}

// jsonNesting is how deep the objects and arrays of js, valid JSON, nest.
func jsonNesting(js []byte) int {
	depth, deepest := 0, 0
	dec := json.NewDecoder(bytes.NewReader(js))
	for {
		tok, err := dec.Token()
		if err != nil {
			return deepest
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
			deepest = max(deepest, depth)
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
}
