package testkit

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tinylib/msgp/msgp"
)

// Decoded msgpack values, compared with what zap's JSON encoder and encoding/json write.

// capMarker starts the text the entry size cap appends to a cut value.
const capMarker = "…(truncated "

// ReadIntf decodes one msgpack value to the types msgp.ReadIntfBytes uses. That function
// refuses maps whose keys and values are 1 byte each (it assumes 2-byte keys), which our
// records can be: many fields with "" keys and values.
func ReadIntf(b []byte) (v any, rest []byte, err error) {
	switch msgp.NextType(b) {
	case msgp.MapType:
		var sz uint32
		if sz, b, err = msgp.ReadMapHeaderBytes(b); err != nil {
			return nil, b, err
		}
		m := make(map[string]any, min(int(sz), len(b)))
		for range sz {
			var k []byte
			if k, b, err = msgp.ReadMapKeyZC(b); err != nil {
				return nil, b, err
			}
			if m[string(k)], b, err = ReadIntf(b); err != nil {
				return nil, b, err
			}
		}
		return m, b, nil
	case msgp.ArrayType:
		var sz uint32
		if sz, b, err = msgp.ReadArrayHeaderBytes(b); err != nil {
			return nil, b, err
		}
		a := make([]any, 0, min(int(sz), len(b)))
		for range sz {
			var x any
			if x, b, err = ReadIntf(b); err != nil {
				return nil, b, err
			}
			a = append(a, x)
		}
		return a, b, nil
	}
	return msgp.ReadIntfBytes(b)
}

// IntNum is an integer kept exactly (decimal text), so min/max ints compare exactly.
type IntNum string

// NormMsgp turns a decoded msgpack value into the shape zap's JSON decodes to.
func NormMsgp(v any) any {
	switch v := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(v))
		for k, x := range v {
			m[k] = NormMsgp(x)
		}
		return m
	case []any:
		s := make([]any, len(v))
		for i, x := range v {
			s[i] = NormMsgp(x)
		}
		return s
	case []byte: // zap JSON writes binary as base64
		return base64.StdEncoding.EncodeToString(v)
	case int64:
		return IntNum(strconv.FormatInt(v, 10))
	case uint64:
		return IntNum(strconv.FormatUint(v, 10))
	case float32: // zap JSON writes float32 in its shortest 32-bit form
		f, _ := strconv.ParseFloat(strconv.FormatFloat(float64(v), 'g', -1, 32), 64)
		return f
	}
	return v
}

// NormJSON turns a value encoding/json decoded (with UseNumber) into the shape NormMsgp
// gives.
func NormJSON(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			v[k] = NormJSON(x)
		}
	case []any:
		for i, x := range v {
			v[i] = NormJSON(x)
		}
	case json.Number:
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil {
			return string(v) // beyond float64: we keep the text
		}
		if !strings.ContainsAny(string(v), ".eE") {
			if i, ok := new(big.Int).SetString(string(v), 10); ok {
				return IntNum(i.String())
			}
		}
		return f
	}
	return v
}

func numFloat(v any) (float64, bool) {
	switch v := v.(type) {
	case float64:
		return v, true
	case IntNum:
		f, _ := strconv.ParseFloat(string(v), 64)
		return f, true
	}
	return 0, false
}

// Diff returns the first difference between two normalised values, or "".
func Diff(got, want any, path string) string {
	if gi, ok := got.(IntNum); ok {
		if wi, ok := want.(IntNum); ok {
			if gi != wi {
				return fmt.Sprintf("%s: got %s, want %s", path, gi, wi)
			}
			return ""
		}
	}
	if gf, ok := numFloat(got); ok {
		if wf, ok := numFloat(want); ok && gf == wf {
			return ""
		}
		return fmt.Sprintf("%s: got number %v, want %#v", path, got, want)
	}
	switch g := got.(type) {
	case map[string]any:
		w, ok := want.(map[string]any)
		if !ok {
			return fmt.Sprintf("%s: got map, want %T", path, want)
		}
		keys := make([]string, 0, len(g)+len(w))
		for k := range g {
			keys = append(keys, k)
		}
		for k := range w {
			if _, ok := g[k]; !ok {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			gv, gok := g[k]
			wv, wok := w[k]
			if gok != wok {
				return fmt.Sprintf("%s.%q: present %v in ours, %v in zap's", path, k, gok, wok)
			}
			if d := Diff(gv, wv, path+"."+strconv.Quote(k)); d != "" {
				return d
			}
		}
		return ""
	case []any:
		w, ok := want.([]any)
		if !ok || len(g) != len(w) {
			return fmt.Sprintf("%s: got %d-array, want %#v", path, len(g), want)
		}
		for i := range g {
			if d := Diff(g[i], w[i], path+"["+strconv.Itoa(i)+"]"); d != "" {
				return d
			}
		}
		return ""
	}
	if got != want {
		return fmt.Sprintf("%s: got %#v, want %#v", path, got, want)
	}
	return ""
}

// CheckRaw walks one msgpack value: no extension anywhere, str keys only, valid UTF-8 in
// every str. It returns the rest of b.
func CheckRaw(t *testing.T, b []byte) []byte {
	t.Helper()
	if len(b) > 0 && (b[0] >= 0xd4 && b[0] <= 0xd8 || b[0] >= 0xc7 && b[0] <= 0xc9) {
		t.Fatalf("extension in the record: % x", b[:min(len(b), 12)])
	}
	var err error
	switch msgp.NextType(b) {
	case msgp.MapType:
		var sz uint32
		sz, b, err = msgp.ReadMapHeaderBytes(b)
		for i := uint32(0); i < sz && err == nil; i++ {
			if msgp.NextType(b) != msgp.StrType {
				t.Fatalf("map key of type %v", msgp.NextType(b))
			}
			b = CheckRaw(t, b)
			b = CheckRaw(t, b)
		}
	case msgp.ArrayType:
		var sz uint32
		sz, b, err = msgp.ReadArrayHeaderBytes(b)
		for i := uint32(0); i < sz && err == nil; i++ {
			b = CheckRaw(t, b)
		}
	case msgp.StrType:
		var s []byte
		s, b, err = msgp.ReadStringZC(b)
		if err == nil && !utf8.Valid(s) {
			t.Fatalf("invalid UTF-8 in str %q", s)
		}
	default:
		b, err = msgp.Skip(b)
	}
	if err != nil {
		t.Fatalf("record: %v", err)
	}
	return b
}

// CheckCapped checks that capped is orig, one Forward entry, cut down as the entry size cap
// cuts it: at most limit bytes, one valid entry with the same time, the marker key, and
// every value either as it was or a prefix of it followed by "…(truncated N bytes)"
// accounting for every byte. It returns how many values were cut.
func CheckCapped(t *testing.T, orig, capped []byte, limit int, markerKey string) (cut int) {
	t.Helper()
	if len(capped) > limit {
		t.Fatalf("capped entry is %d bytes, limit %d", len(capped), limit)
	}
	at, rec := entryParts(t, capped)
	oat, orec := entryParts(t, orig)
	if !reflect.DeepEqual(at, oat) {
		t.Errorf("time changed: %v -> %v", oat, at)
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
				CheckCut(t, path, []byte(g), []byte(w))
			}
		case []byte:
			g, ok := got.([]byte)
			if !ok {
				t.Errorf("%s: bin became %T", path, got)
			} else if !bytes.Equal(g, w) {
				cut++
				CheckCut(t, path, g, w)
			}
		default:
			if d := Diff(NormMsgp(got), NormMsgp(want), path); d != "" {
				t.Error(d)
			}
		}
	}
	walk(rec, orec, "record")
	return cut
}

// entryParts decodes b, exactly one Forward entry, into its time and record.
func entryParts(t *testing.T, b []byte) (at any, rec map[string]any) {
	t.Helper()
	v, rest, err := ReadIntf(b)
	if err != nil || len(rest) != 0 {
		t.Fatalf("entry is not exactly one msgpack value: err=%v, %d trailing bytes", err, len(rest))
	}
	arr, ok := v.([]any)
	if !ok || len(arr) != 2 {
		t.Fatalf("entry is %T, want a 2-array", v)
	}
	if rec, ok = arr[1].(map[string]any); !ok {
		t.Fatalf("record is %T, want map", arr[1])
	}
	return arr[0], rec
}

// CheckCut checks that got is orig cut and marked: a prefix of it followed by
// "…(truncated N bytes)", N the bytes removed.
func CheckCut(t *testing.T, path string, got, orig []byte) {
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
