package msgpenc

import (
	"encoding/binary"
	"unicode/utf8"

	"github.com/fluentcore/fluentcore/internal/wire"
)

// plainValue reports whether b is exactly one msgpack value with no extension anywhere
// (fluentd can't read them inside a record), only valid UTF-8 in its strings, and no map or
// array nested past MaxDepth when the value starts inside depth of them. It reads the
// format directly: it runs on every msgp.Marshaler's output.
func plainValue(b []byte, depth int) bool {
	// due[i] is how many values the i-th of the open containers still holds.
	var due [MaxDepth]int
	open := 0
	for {
		if len(b) == 0 {
			return false
		}
		c := b[0]
		size, n, elems := 1, 0, -1 // header bytes; payload bytes; values in a container
		switch {
		case c < wire.FixMap || c >= wire.NegFix: // fixint
		case c < wire.FixArray:
			elems = 2 * int(c&0x0f)
		case c < wire.FixStr:
			elems = int(c & 0x0f)
		case c < wire.Nil:
			n = int(c & 0x1f)
		case c == wire.Nil || c == wire.False || c == wire.True:
		case c >= wire.Bin8 && c <= wire.Bin8+2: // bin8/16/32
			size, n = lenField(b, c-wire.Bin8)
		case c >= wire.Str8 && c <= wire.Str32:
			size, n = lenField(b, c-wire.Str8)
		case c == wire.Array16 || c == wire.Array32:
			size, elems = lenField(b, c-wire.Array16+1)
		case c == wire.Map16 || c == wire.Map32:
			size, elems = lenField(b, c-wire.Map16+1)
			elems *= 2
		case c >= wire.Float32 && c < wire.Float32+byte(len(fixedSize)): // floats and sized ints
			size = 1 + fixedSize[c-wire.Float32]
		default: // extensions, and 0xc1 (never used)
			return false
		}
		if size < 0 || n > len(b)-size || elems > len(b)-size { // each value takes a byte at least
			return false
		}
		if (c >= wire.FixStr && c < wire.Nil || c >= wire.Str8 && c <= wire.Str32) && !isASCII(b[size:size+n]) && !utf8.Valid(b[size:size+n]) {
			return false
		}
		b = b[size+n:]
		if open > 0 {
			due[open-1]--
		}
		if elems >= 0 {
			if depth+open >= MaxDepth {
				return false
			}
			due[open] = elems
			open++
		}
		for open > 0 && due[open-1] == 0 {
			open--
		}
		if open == 0 {
			return len(b) == 0
		}
	}
}

// fixedSize is the payload of float32, float64, uint8..uint64 and int8..int64 (0xca-0xd3).
var fixedSize = [...]int{4, 8, 1, 2, 4, 8, 1, 2, 4, 8}

// lenField reads the 1-, 2- or 4-byte (w = 0, 1, 2) big-endian length after b[0]; size is
// the header's length, or -1 if b is too short.
func lenField(b []byte, w byte) (size, n int) {
	size = 1 + 1<<w
	if len(b) < size {
		return -1, 0
	}
	switch w {
	case 0:
		n = int(b[1])
	case 1:
		n = int(binary.BigEndian.Uint16(b[1:]))
	default:
		n = int(binary.BigEndian.Uint32(b[1:]))
	}
	return size, n
}
