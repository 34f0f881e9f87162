package wire

import (
	"fmt"

	"github.com/tinylib/msgp/msgp"
)

// The msgpack type bytes that fluentcore writes or checks by hand. msgp's Append functions
// pick a header's size by the value; these are for the places that need one form exactly
// (a header back-patched later, a frame read back byte by byte).
const (
	FixMap   = 0x80 // | n, n < 16
	FixArray = 0x90 // | n, n < 16
	FixStr   = 0xa0 // | n, n < 32
	Nil      = 0xc0
	False    = 0xc2
	True     = 0xc3
	Bin8     = 0xc4 // Bin16, Bin32 follow
	Float32  = 0xca // Float64, Uint8..Uint64, Int8..Int64 follow: 0xca..0xd3
	FixExt8  = 0xd7
	Str8     = 0xd9
	Str16    = 0xda
	Str32    = 0xdb
	Array16  = 0xdc
	Array32  = 0xdd
	Map16    = 0xde
	Map32    = 0xdf
	NegFix   = 0xe0 // negative fixint: 0xe0..0xff

	// Array2 and Array3 are the headers of an Entry ([time, record]) and of a frame
	// ([tag, entries, options]).
	Array2 = FixArray | 2
	Array3 = FixArray | 3
)

// ReadStrHeader parses a msgpack str header: the string's length and the header's. b too
// short for the header is msgp.ErrShortBytes; a value that is not a str is an error naming
// its first byte.
func ReadStrHeader(b []byte) (n int64, hdr int, err error) {
	if len(b) == 0 {
		return 0, 0, msgp.ErrShortBytes
	}
	lead := b[0]
	var size int
	switch {
	case lead&0xe0 == FixStr:
		return int64(lead & 0x1f), 1, nil
	case lead == Str8:
		size = 1
	case lead == Str16:
		size = 2
	case lead == Str32:
		size = 4
	default:
		return 0, 0, fmt.Errorf("starts with 0x%02x, not a str", lead)
	}
	if len(b) < 1+size {
		return 0, 0, msgp.ErrShortBytes
	}
	for _, c := range b[1 : 1+size] {
		n = n<<8 | int64(c)
	}
	return n, 1 + size, nil
}
