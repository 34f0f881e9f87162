package forwardtest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/tinylib/msgp/msgp"
)

// maxDepth bounds the nesting of arrays and maps inside a record. It is forwardtest's own
// limit, there to keep decoding off deep recursion; fluentd and fluent-bit have none this
// small, but no log record nests this deep.
const maxDepth = 1000

// decodeTime decodes an entry time: an int >= 0, an EventTime (ext type 0, 8 bytes), or,
// when v15 is set, the v1.5 form [time, {metadata}] whose metadata is discarded.
func decodeTime(b []byte, v15 bool) (time.Time, []byte, error) {
	if len(b) == 0 {
		return time.Time{}, b, malformed(msgp.ErrShortBytes)
	}
	switch t := msgp.NextType(b); t {
	case msgp.UintType:
		u, rest, err := msgp.ReadUint64Bytes(b)
		if err != nil {
			return time.Time{}, b, malformed(err)
		}
		if u > math.MaxInt64 {
			return time.Time{}, b, fmt.Errorf("time %d is out of range", u)
		}
		return time.Unix(int64(u), 0).UTC(), rest, nil
	case msgp.IntType:
		i, rest, err := msgp.ReadInt64Bytes(b)
		if err != nil {
			return time.Time{}, b, malformed(err)
		}
		if i < 0 {
			return time.Time{}, b, fmt.Errorf("time is negative (%d) (fluent-bit closes the connection)", i)
		}
		return time.Unix(i, 0).UTC(), rest, nil
	case msgp.ExtensionType, msgp.TimeType, msgp.Complex64Type, msgp.Complex128Type:
		typ, data, rest, err := readExt(b)
		if err != nil {
			return time.Time{}, b, malformed(err)
		}
		if typ != 0 {
			return time.Time{}, b, fmt.Errorf("time is msgpack extension type %d, want EventTime (type 0); fluentd and fluent-bit reject it", typ)
		}
		if len(data) != 8 {
			return time.Time{}, b, fmt.Errorf("EventTime has %d bytes, want 8 (fluent-bit rejects it)", len(data))
		}
		sec, nsec := binary.BigEndian.Uint32(data), binary.BigEndian.Uint32(data[4:])
		if nsec == 0 && (sec == 0xFFFFFFFF || sec == 0xFFFFFFFE) {
			return time.Time{}, b, fmt.Errorf("EventTime seconds 0x%08X with nsec 0 is a fluent-bit group marker, not a time", sec)
		}
		return time.Unix(int64(sec), int64(nsec)).UTC(), rest, nil
	case msgp.Float32Type, msgp.Float64Type:
		return time.Time{}, b, errors.New("time is a float (fluentd drops the event; fluent-bit closes the connection in Message mode)")
	case msgp.ArrayType:
		if !v15 {
			break
		}
		n, rest, err := msgp.ReadArrayHeaderBytes(b)
		if err != nil {
			return time.Time{}, b, malformed(err)
		}
		if n != 1 && n != 2 {
			return time.Time{}, b, fmt.Errorf("v1.5 time [time, {metadata}] has %d elements", n)
		}
		tm, rest, err := decodeTime(rest, false)
		if err != nil {
			return tm, b, fmt.Errorf("v1.5 time: %w", err)
		}
		if n == 2 {
			if msgp.NextType(rest) != msgp.MapType {
				return time.Time{}, b, fmt.Errorf("v1.5 metadata is msgpack %s, not map", typeName(rest))
			}
			if rest, err = msgp.Skip(rest); err != nil {
				return time.Time{}, b, malformed(err)
			}
		}
		return tm, rest, nil
	}
	return time.Time{}, b, fmt.Errorf("time is msgpack %s, want int or EventTime (fluentd drops the event; fluent-bit rejects it)", typeName(b))
}

// readExt splits the extension at the start of b into its type, payload and the rest.
func readExt(b []byte) (typ int8, data, rest []byte, err error) {
	var off, n int
	switch b[0] {
	case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8:
		off, n = 2, 1<<(b[0]-0xd4)
	case 0xc7:
		if len(b) >= 3 {
			off, n = 3, int(b[1])
		}
	case 0xc8:
		if len(b) >= 4 {
			off, n = 4, int(binary.BigEndian.Uint16(b[1:]))
		}
	case 0xc9:
		if len(b) >= 6 {
			off, n = 6, int(binary.BigEndian.Uint32(b[1:]))
		}
	default:
		return 0, nil, b, fmt.Errorf("0x%02x is not an extension", b[0])
	}
	if off == 0 || len(b) < off+n {
		return 0, nil, b, msgp.ErrShortBytes
	}
	return int8(b[off-1]), b[off : off+n], b[off+n:], nil
}

// decodeMap decodes a map with str keys.
func decodeMap(b []byte, depth int) (map[string]any, []byte, error) {
	n, b, err := msgp.ReadMapHeaderBytes(b)
	if err != nil {
		return nil, b, malformed(err)
	}
	if uint64(n)*2 > uint64(len(b)) {
		return nil, b, malformed(msgp.ErrShortBytes)
	}
	m := make(map[string]any, n)
	for range n {
		k, rest, err := msgp.ReadStringZC(b)
		if err != nil {
			return nil, b, fmt.Errorf("map key is msgpack %s, not str", typeName(b))
		}
		var v any
		if v, b, err = decodeValue(rest, depth+1); err != nil {
			return nil, b, fmt.Errorf("key %q: %w", k, err)
		}
		m[string(k)] = v
	}
	return m, b, nil
}

// decodeValue decodes one record value.
func decodeValue(b []byte, depth int) (any, []byte, error) {
	if depth > maxDepth {
		return nil, b, fmt.Errorf("nested deeper than %d levels (forwardtest's limit)", maxDepth)
	}
	switch msgp.NextType(b) {
	case msgp.StrType:
		s, rest, err := msgp.ReadStringBytes(b)
		return s, rest, malformed(err)
	case msgp.BinType:
		v, rest, err := msgp.ReadBytesZC(b)
		return append([]byte{}, v...), rest, malformed(err)
	case msgp.IntType:
		i, rest, err := msgp.ReadInt64Bytes(b)
		return i, rest, malformed(err)
	case msgp.UintType:
		u, rest, err := msgp.ReadUint64Bytes(b)
		if u <= math.MaxInt64 {
			return int64(u), rest, malformed(err)
		}
		return u, rest, malformed(err)
	case msgp.Float32Type:
		f, rest, err := msgp.ReadFloat32Bytes(b)
		return f, rest, malformed(err)
	case msgp.Float64Type:
		f, rest, err := msgp.ReadFloat64Bytes(b)
		return f, rest, malformed(err)
	case msgp.BoolType:
		v, rest, err := msgp.ReadBoolBytes(b)
		return v, rest, malformed(err)
	case msgp.NilType:
		rest, err := msgp.ReadNilBytes(b)
		return nil, rest, malformed(err)
	case msgp.MapType:
		return decodeMap(b, depth)
	case msgp.ArrayType:
		n, rest, err := msgp.ReadArrayHeaderBytes(b)
		if err != nil {
			return nil, b, malformed(err)
		}
		if uint64(n) > uint64(len(rest)) {
			return nil, b, malformed(msgp.ErrShortBytes)
		}
		a := make([]any, n)
		for i := range a {
			if a[i], rest, err = decodeValue(rest, depth+1); err != nil {
				return nil, b, fmt.Errorf("index %d: %w", i, err)
			}
		}
		return a, rest, nil
	case msgp.ExtensionType, msgp.TimeType, msgp.Complex64Type, msgp.Complex128Type:
		typ, _, _, err := readExt(b)
		if err != nil {
			return nil, b, malformed(err)
		}
		return nil, b, fmt.Errorf("msgpack extension type %d in a record (fluentd cannot render it)", typ)
	}
	if len(b) == 0 {
		return nil, b, malformed(msgp.ErrShortBytes)
	}
	return nil, b, malformed(msgp.InvalidPrefixError(b[0]))
}

// malformed wraps a msgpack decoding error; nil stays nil.
func malformed(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("malformed msgpack: %w", err)
}

// typeName names the msgpack type at the start of b for messages.
func typeName(b []byte) string {
	if len(b) == 0 {
		return "missing value"
	}
	switch t := msgp.NextType(b); t {
	case msgp.ExtensionType, msgp.TimeType, msgp.Complex64Type, msgp.Complex128Type:
		if typ, _, _, err := readExt(b); err == nil {
			return fmt.Sprintf("msgpack extension (type %d)", typ)
		}
		return "msgpack extension"
	case msgp.InvalidType:
		return fmt.Sprintf("invalid byte 0x%02x", b[0])
	default:
		return t.String()
	}
}

// describe prints the value at the start of b for messages.
func describe(b []byte) string {
	if v, _, err := msgp.ReadIntfBytes(b); err == nil {
		return fmt.Sprintf("%v (%s)", v, typeName(b))
	}
	return typeName(b)
}
