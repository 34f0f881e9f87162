package msgpenc

import (
	"encoding/binary"
	"math"
	"unicode/utf8"
	"unsafe"

	"github.com/fluentcore/fluentcore/internal/wire"
	"github.com/tinylib/msgp/msgp"
)

// AppendStr appends s as msgpack str; invalid UTF-8 bytes become U+FFFD, one per byte,
// as zap's JSON encoder does. Fast path: s is ASCII (most keys and values are), checked a
// word at a time where it is, not in the copy, whose bytes the processor may not have
// written yet.
func AppendStr(dst []byte, s string) []byte {
	if isASCII(unsafe.Slice(unsafe.StringData(s), len(s))) || utf8.ValidString(s) {
		return append(AppendStrHeader(dst, len(s)), s...)
	}
	return appendRepaired(dst, s, utf8.DecodeRuneInString)
}

// AppendStrBytes is AppendStr for a str held in a []byte.
func AppendStrBytes(dst, s []byte) []byte {
	if isASCII(s) || utf8.Valid(s) {
		return msgp.AppendStringFromBytes(dst, s)
	}
	return appendRepaired(dst, s, utf8.DecodeRune)
}

// highBits has the top bit of each of eight bytes: a word of ASCII bytes has none of them.
const highBits = 0x8080808080808080

// isASCII reports whether b has no byte >= 0x80, eight bytes at a time; a tail shorter
// than eight is read as the last eight bytes of b, which overlap those read already.
func isASCII(b []byte) bool {
	if len(b) < 8 {
		var or byte
		for _, c := range b {
			or |= c
		}
		return or < utf8.RuneSelf
	}
	last := binary.LittleEndian.Uint64(b[len(b)-8:])
	for len(b) >= 8 {
		if binary.LittleEndian.Uint64(b)&highBits != 0 {
			return false
		}
		b = b[8:]
	}
	return last&highBits == 0
}

// appendRepaired is the slow path of AppendStr: it sizes the repaired string first so
// the header is right, then copies it.
func appendRepaired[S string | []byte](dst []byte, s S, decode func(S) (rune, int)) []byte {
	const repl = "\uFFFD"
	dst = AppendStrHeader(dst, repairedSize(s, decode))
	last := 0
	for i := 0; i < len(s); {
		r, size := decode(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[last:i]...)
			dst = append(dst, repl...)
			last = i + 1
		}
		i += size
	}
	return append(dst, s[last:]...)
}

// repairedSize is the length of s with each invalid UTF-8 byte replaced by U+FFFD.
func repairedSize[S string | []byte](s S, decode func(S) (rune, int)) int {
	n := 0
	for i := 0; i < len(s); {
		r, size := decode(s[i:])
		if r == utf8.RuneError && size == 1 {
			n += len("\uFFFD")
		} else {
			n += size
		}
		i += size
	}
	return n
}

// repairedLen is the length of s once AppendStr has replaced its invalid UTF-8.
func repairedLen[S string | []byte](s S) int {
	switch v := any(s).(type) {
	case string:
		if !utf8.ValidString(v) {
			return repairedSize(v, utf8.DecodeRuneInString)
		}
	case []byte:
		if !utf8.Valid(v) {
			return repairedSize(v, utf8.DecodeRune)
		}
	}
	return len(s)
}

// AppendStrHeader appends the smallest str header for n bytes.
func AppendStrHeader(dst []byte, n int) []byte {
	if n <= 31 {
		return append(dst, wire.FixStr|byte(n))
	}
	return appendLongStrHeader(dst, n)
}

func appendLongStrHeader(dst []byte, n int) []byte {
	switch {
	case n <= math.MaxUint8:
		return append(dst, wire.Str8, byte(n))
	case n <= math.MaxUint16:
		return append(dst, wire.Str16, byte(n>>8), byte(n))
	}
	return append(dst, wire.Str32, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
}

// AppendFloat64 appends f, writing non-finite values as the strings zap writes: fluentd's
// JSON outputs reject NaN and infinities.
func AppendFloat64(dst []byte, f float64) []byte {
	if f-f == 0 { // finite
		return msgp.AppendFloat64(dst, f)
	}
	return appendNonFinite(dst, f)
}

// AppendFloat32 is AppendFloat64 for a float32.
func AppendFloat32(dst []byte, f float32) []byte {
	if f-f == 0 {
		return msgp.AppendFloat32(dst, f)
	}
	return appendNonFinite(dst, float64(f))
}

func appendNonFinite(dst []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return msgp.AppendString(dst, "NaN")
	case f > 0:
		return msgp.AppendString(dst, "+Inf")
	}
	return msgp.AppendString(dst, "-Inf")
}
