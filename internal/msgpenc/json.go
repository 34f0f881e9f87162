package msgpenc

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/fluentcore/fluentcore/internal/wire"
	"github.com/tinylib/msgp/msgp"
)

// JSON text in reflected values: json.Marshaler output and a custom ReflectedEncoder's are
// converted to msgpack here (a small parser, no allocation), and the ",string" struct tag
// option needs encoding/json's own text for strings and floats.

var errJSONSyntax = errors.New("fluentcore: invalid JSON")

// appendJSON converts js, one JSON value with optional whitespace around it, to msgpack.
// Object keys keep their order; numbers become int64 or uint64 when they are integers that
// fit, else float64 (a number beyond float64 keeps its text, as a str); strings are
// unescaped, with invalid UTF-8 and lone surrogates replaced by U+FFFD as encoding/json
// decodes them. The value starts inside depth maps and arrays, and objects and arrays that
// would nest past MaxDepth are refused (ErrTooDeep). On error dst is returned as it was,
// with encoding/json's syntax error when js is not valid JSON.
func (r *Reflector) appendJSON(dst, js []byte, depth int) ([]byte, error) {
	mark := len(dst)
	p := jsonParser{src: js, str: r.jsonStr[:0]}
	p.space()
	dst, err := p.value(dst, depth)
	if err == nil {
		if p.space(); p.i < len(js) {
			err = errJSONSyntax
		}
	}
	r.jsonStr = p.str[:0]
	if err != nil {
		return dst[:mark], jsonSyntaxError(js, err)
	}
	return dst, nil
}

// jsonSyntaxError returns encoding/json's description of what is wrong with js (the slow
// path: only once the conversion has failed), or err if encoding/json finds nothing wrong,
// as when js nests past the cap.
func jsonSyntaxError(js []byte, err error) error {
	var buf bytes.Buffer
	if cerr := json.Compact(&buf, js); cerr != nil {
		return cerr
	}
	return err
}

// jsonParser reads one JSON text; str is scratch for strings with escapes.
type jsonParser struct {
	src []byte
	i   int
	str []byte
}

func (p *jsonParser) space() {
	for p.i < len(p.src) {
		switch p.src[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// next returns the byte at the cursor, or 0 at the end (never valid where it is checked).
func (p *jsonParser) next() byte {
	if p.i < len(p.src) {
		return p.src[p.i]
	}
	return 0
}

// value converts the value at the cursor, which is not whitespace.
func (p *jsonParser) value(dst []byte, depth int) ([]byte, error) {
	switch c := p.next(); {
	case c == '{' || c == '[':
		if depth++; depth > MaxDepth {
			return dst, ErrTooDeep
		}
		return p.container(dst, c == '{', depth)
	case c == '"':
		return p.string(dst)
	case c == '-' || c >= '0' && c <= '9':
		return p.number(dst)
	case c == 't':
		return p.literal(dst, "true", wire.True)
	case c == 'f':
		return p.literal(dst, "false", wire.False)
	case c == 'n':
		return p.literal(dst, "null", wire.Nil)
	}
	return dst, errJSONSyntax
}

func (p *jsonParser) literal(dst []byte, lit string, b byte) ([]byte, error) {
	if !bytes.HasPrefix(p.src[p.i:], []byte(lit)) {
		return dst, errJSONSyntax
	}
	p.i += len(lit)
	return append(dst, b), nil
}

// container converts an object or an array; the header is patched when it ends.
func (p *jsonParser) container(dst []byte, isMap bool, depth int) ([]byte, error) {
	closing := byte(']')
	off := len(dst)
	if isMap {
		closing = '}'
		dst = append(dst, wire.Map32, 0, 0, 0, 0)
	} else {
		dst = append(dst, wire.Array32, 0, 0, 0, 0)
	}
	p.i++
	p.space()
	n := 0
	if p.next() == closing {
		p.i++
		return shrinkHeader(dst, off, n, isMap), nil
	}
	for {
		var err error
		if isMap {
			if p.next() != '"' {
				return dst, errJSONSyntax
			}
			if dst, err = p.string(dst); err != nil {
				return dst, err
			}
			if p.space(); p.next() != ':' {
				return dst, errJSONSyntax
			}
			p.i++
			p.space()
		}
		if dst, err = p.value(dst, depth); err != nil {
			return dst, err
		}
		n++
		p.space()
		switch p.next() {
		case ',':
			p.i++
			p.space()
		case closing:
			p.i++
			return shrinkHeader(dst, off, n, isMap), nil
		default:
			return dst, errJSONSyntax
		}
	}
}

// string converts the string at the cursor (at its opening quote).
func (p *jsonParser) string(dst []byte) ([]byte, error) {
	p.i++
	start := p.i
	for p.i < len(p.src) { // fast path: no escapes
		c := p.src[p.i]
		if c == '"' {
			p.i++
			return AppendStrBytes(dst, p.src[start:p.i-1]), nil
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return dst, errJSONSyntax
		}
		p.i++
	}
	p.str = append(p.str[:0], p.src[start:p.i]...)
	for p.i < len(p.src) {
		c := p.src[p.i]
		switch {
		case c == '"':
			p.i++
			return AppendStrBytes(dst, p.str), nil
		case c < 0x20:
			return dst, errJSONSyntax
		case c != '\\':
			p.str = append(p.str, c)
			p.i++
			continue
		}
		if p.i+1 >= len(p.src) {
			return dst, errJSONSyntax
		}
		esc := p.src[p.i+1]
		p.i += 2
		switch esc {
		case '"', '\\', '/':
			p.str = append(p.str, esc)
		case 'b':
			p.str = append(p.str, '\b')
		case 'f':
			p.str = append(p.str, '\f')
		case 'n':
			p.str = append(p.str, '\n')
		case 'r':
			p.str = append(p.str, '\r')
		case 't':
			p.str = append(p.str, '\t')
		case 'u':
			r := hex4(p.src[p.i:])
			if r < 0 {
				return dst, errJSONSyntax
			}
			p.i += 4
			if utf16.IsSurrogate(r) {
				// A pair makes one rune; a lone half is U+FFFD, and what follows it is
				// read on its own.
				r2 := rune(-1)
				if rest := p.src[p.i:]; len(rest) >= 6 && rest[0] == '\\' && rest[1] == 'u' {
					r2 = hex4(rest[2:])
				}
				if d := utf16.DecodeRune(r, r2); d != unicode.ReplacementChar {
					r = d
					p.i += 6
				} else {
					r = unicode.ReplacementChar
				}
			}
			p.str = utf8.AppendRune(p.str, r)
		default:
			return dst, errJSONSyntax
		}
	}
	return dst, errJSONSyntax
}

// hex4 reads four hex digits, or returns -1.
func hex4(b []byte) rune {
	if len(b) < 4 {
		return -1
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// number converts the number at the cursor, checking JSON's grammar.
func (p *jsonParser) number(dst []byte) ([]byte, error) {
	start := p.i
	digits := func() int {
		n := 0
		for p.i < len(p.src) && p.src[p.i] >= '0' && p.src[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	if p.next() == '-' {
		p.i++
	}
	switch c := p.next(); {
	case c == '0':
		p.i++
	case c >= '1' && c <= '9':
		digits()
	default:
		return dst, errJSONSyntax
	}
	isInt := true
	if p.next() == '.' {
		p.i++
		if digits() == 0 {
			return dst, errJSONSyntax
		}
		isInt = false
	}
	if c := p.next(); c == 'e' || c == 'E' {
		p.i++
		if c := p.next(); c == '+' || c == '-' {
			p.i++
		}
		if digits() == 0 {
			return dst, errJSONSyntax
		}
		isInt = false
	}
	return appendNumberText(dst, p.src[start:p.i], isInt), nil
}

// appendNumberText writes a valid JSON number as an integer when it is one that fits, else
// as float64; a number too large for float64 is kept as its text.
func appendNumberText[S string | []byte](dst []byte, s S, isInt bool) []byte {
	if isInt {
		if i, err := strconv.ParseInt(string(s), 10, 64); err == nil {
			return msgp.AppendInt64(dst, i)
		}
		if u, err := strconv.ParseUint(string(s), 10, 64); err == nil {
			return msgp.AppendUint64(dst, u)
		}
	}
	if f, err := strconv.ParseFloat(string(s), 64); err == nil {
		return msgp.AppendFloat64(dst, f)
	}
	return append(AppendStrHeader(dst, len(s)), s...) // digits, signs and letters: ASCII
}

// appendJSONNumber writes a json.Number already checked by validJSONNumber.
func appendJSONNumber(dst []byte, s string) []byte {
	isInt := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '.' || c == 'e' || c == 'E' {
			isInt = false
			break
		}
	}
	return appendNumberText(dst, s, isInt)
}

// validJSONNumber reports whether s is exactly one JSON number.
func validJSONNumber(s string) bool {
	p := jsonParser{src: []byte(s)}
	var sink [16]byte
	_, err := p.number(sink[:0])
	return err == nil && p.i == len(s)
}

// appendJSONString appends s as a JSON string literal, quotes included, escaped as
// encoding/json escapes it with HTML escaping off (zap's setting).
func appendJSONString(b []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendJSONFloat formats f as encoding/json does (ES6 number formatting).
func appendJSONFloat(b []byte, f float64, bits int) []byte {
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21)) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, bits)
	if format == 'e' {
		// e-07 -> e-7
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}
