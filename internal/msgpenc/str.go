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
// as zap's JSON encoder does. Fast path: s is ASCII (most keys and values are) and at most
// maxShort bytes, copied and checked in the same words, within dst's capacity.
func AppendStr(dst []byte, s string) []byte {
	n, l := len(s), len(dst)
	if n <= maxShort && n+2 <= cap(dst)-l {
		d := dst[l : l+2+n]
		if n <= maxFixStr {
			if copyASCII(d[1:], s) {
				d[0] = wire.FixStr | byte(n)
				return dst[:l+1+n]
			}
		} else if copyASCII(d[2:], s) {
			d[0], d[1] = wire.Str8, byte(n)
			return dst[:l+2+n]
		}
	}
	return appendStrSlow(dst, s)
}

// appendStrSlow is AppendStr past its fast path.
func appendStrSlow(dst []byte, s string) []byte {
	if isASCII(unsafe.Slice(unsafe.StringData(s), len(s))) || utf8.ValidString(s) {
		return append(AppendStrHeader(dst, len(s)), s...)
	}
	return appendRepaired(dst, s, utf8.DecodeRuneInString)
}

// maxShort is the longest str copyASCII takes.
const maxShort = 32

// copyASCII copies s, at most maxShort bytes, to the front of d and reports whether s is
// ASCII. It reads and writes s in whole words where s has them, overlapping the last with
// the one before; what it writes of a s that is not ASCII is for the caller to overwrite.
func copyASCII(d []byte, s string) bool {
	b := unsafe.Slice(unsafe.StringData(s), len(s))
	d = d[:len(b)]
	le := binary.LittleEndian
	switch n := len(b); {
	case n >= 16:
		w0, w1, w2, w3 := le.Uint64(b), le.Uint64(b[8:]), le.Uint64(b[n-16:]), le.Uint64(b[n-8:])
		le.PutUint64(d, w0)
		le.PutUint64(d[8:], w1)
		le.PutUint64(d[n-16:], w2)
		le.PutUint64(d[n-8:], w3)
		return (w0|w1|w2|w3)&highBits == 0
	case n >= 8:
		w0, w1 := le.Uint64(b), le.Uint64(b[n-8:])
		le.PutUint64(d, w0)
		le.PutUint64(d[n-8:], w1)
		return (w0|w1)&highBits == 0
	case n >= 4:
		w0, w1 := le.Uint32(b), le.Uint32(b[n-4:])
		le.PutUint32(d, w0)
		le.PutUint32(d[n-4:], w1)
		return (w0|w1)&highBits32 == 0
	case n >= 2:
		w0, w1 := le.Uint16(b), le.Uint16(b[n-2:])
		le.PutUint16(d, w0)
		le.PutUint16(d[n-2:], w1)
		return (w0|w1)&highBits16 == 0
	case n == 1:
		d[0] = b[0]
		return b[0] < utf8.RuneSelf
	}
	return true
}

// highBits16 and highBits32 are highBits for two and four bytes.
const (
	highBits16 = highBits & 0xffff
	highBits32 = highBits & 0xffffffff
)

// maxFixStr is the longest str a fixstr header holds.
const maxFixStr = 31

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
