package fluentcore

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tinylib/msgp/msgp"
	"go.uber.org/zap/zapcore"
)

// The reflected-value path (zap.Any on types zap has no field for, zap.Reflect). It is
// allowed to allocate and is kept apart so it can be replaced by a cached reflection
// encoder without touching the rest of the encoder.

var (
	errReflectedEmpty = errors.New("fluentcore: reflected encoder wrote no value")
	errReflectedMany  = errors.New("fluentcore: reflected encoder wrote more than one value")
)

// newJSONReflectedEncoder is zap's default ReflectedEncoder.
func newJSONReflectedEncoder(w io.Writer) zapcore.ReflectedEncoder {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc
}

// appendReflected appends obj as exactly one extension-free msgpack value, or returns an
// error with dst unchanged. A msgp.Marshaler is used as it is when its output passes
// plainValue; anything else is encoded like zap does (the configured ReflectedEncoder,
// encoding/json by default) and the JSON is converted to msgpack.
func (e *msgpEncoder) appendReflected(dst []byte, obj any) ([]byte, error) {
	if obj == nil {
		return msgp.AppendNil(dst), nil
	}
	if m, ok := obj.(msgp.Marshaler); ok && !isNilPointer(obj) {
		// Marshal into scratch, not dst: a misbehaving marshaler must not touch the batch.
		b, err := m.MarshalMsg(e.scratch[:0])
		if b != nil {
			e.scratch = b[:0]
		}
		if err == nil && plainValue(b) {
			return append(dst, b...), nil
		}
	}
	if e.reflectEnc == nil {
		e.reflectEnc = e.cfg.newReflectedEncoder(&e.reflectBuf)
	}
	e.reflectBuf.Reset()
	if err := e.reflectEnc.Encode(obj); err != nil {
		return dst, err
	}
	return appendJSONAsMsgp(dst, e.reflectBuf.Bytes())
}

// isNilPointer reports a typed nil pointer: generated MarshalMsg methods dereference
// their receiver, while encoding/json writes null for it, as zap does.
func isNilPointer(v any) bool {
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}

// plainValue reports whether b is exactly one msgpack value with no extension anywhere
// (fluentd can't read them inside a record) and only valid UTF-8 in its strings.
func plainValue(b []byte) bool {
	var err error
	for want := 1; want > 0; want-- {
		if len(b) < want {
			return false // every value takes at least one byte
		}
		switch lead := b[0]; {
		case lead >= 0xd4 && lead <= 0xd8, lead >= 0xc7 && lead <= 0xc9: // (fix)ext
			return false
		}
		var sz uint32
		switch msgp.NextType(b) {
		case msgp.MapType:
			sz, b, err = msgp.ReadMapHeaderBytes(b)
			want += 2 * int(sz)
		case msgp.ArrayType:
			sz, b, err = msgp.ReadArrayHeaderBytes(b)
			want += int(sz)
		case msgp.StrType:
			var s []byte
			s, b, err = msgp.ReadStringZC(b)
			if err == nil && !utf8.Valid(s) {
				return false
			}
		default:
			b, err = msgp.Skip(b)
		}
		if err != nil {
			return false
		}
	}
	return len(b) == 0
}

// jsonOpen is a JSON object or array being converted; its header is patched on close.
type jsonOpen struct {
	off   int
	n     int
	isMap bool
}

// appendJSONAsMsgp converts one JSON value to msgpack, keeping object key order.
// Integers stay integers when they fit int64 or uint64; other numbers become float64.
func appendJSONAsMsgp(dst, js []byte) ([]byte, error) {
	mark := len(dst)
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	var stack []jsonOpen
	top := 0 // values at the top level
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return dst[:mark], err
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			o := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if o.isMap {
				o.n /= 2
			}
			putLen32(dst[o.off:], o.n)
			continue
		}
		if len(stack) > 0 {
			stack[len(stack)-1].n++
		} else if top++; top > 1 {
			return dst[:mark], errReflectedMany
		}
		switch v := tok.(type) {
		case json.Delim: // '{' or '['
			if v == '{' {
				stack = append(stack, jsonOpen{off: len(dst), isMap: true})
				dst = append(dst, mMap32, 0, 0, 0, 0)
			} else {
				stack = append(stack, jsonOpen{off: len(dst)})
				dst = append(dst, mArray32, 0, 0, 0, 0)
			}
		case string:
			dst = appendStr(dst, v)
		case json.Number:
			dst = appendJSONNumber(dst, string(v))
		case bool:
			dst = msgp.AppendBool(dst, v)
		case nil:
			dst = msgp.AppendNil(dst)
		}
	}
	switch {
	case len(stack) > 0: // Token reports a bare EOF inside an unfinished value
		return dst[:mark], io.ErrUnexpectedEOF
	case top == 0:
		return dst[:mark], errReflectedEmpty
	}
	return dst, nil
}

// appendJSONNumber writes a JSON number as an integer when it is one that fits, else as
// float64; a number too large for float64 is kept as its text.
func appendJSONNumber(dst []byte, s string) []byte {
	if !strings.ContainsAny(s, ".eE") {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return msgp.AppendInt64(dst, i)
		}
		if u, err := strconv.ParseUint(s, 10, 64); err == nil {
			return msgp.AppendUint64(dst, u)
		}
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return msgp.AppendFloat64(dst, f)
	}
	return appendStr(dst, s)
}
