package forwardtest

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/tinylib/msgp/msgp"
)

// maxFrame is fluent-bit's in_forward buffer_max_size: a request, or a decompressed
// PackedForward payload, larger than this makes fluent-bit close the connection.
const maxFrame = 6144000

// violationError marks an error from framer.read that is a protocol violation rather than a
// connection that ended.
type violationError struct{ err error }

func (v violationError) Error() string { return v.err.Error() }
func (v violationError) Unwrap() error { return v.err }

// framer cuts a connection's byte stream into requests: one top-level msgpack value
// each, read whole into frame without being decoded.
//
// Invariants: frame holds the last request read, and only it, until the next read, which
// reuses its array; no request over maxFrame is ever held; rd is read only by the
// connection's own goroutine.
type framer struct {
	rd    *msgp.Reader
	frame []byte // the raw request last read
}

// arrived waits for the first byte of the next request; its error is the connection's.
func (f *framer) arrived() error {
	_, err := f.rd.R.PeekByte()
	return err
}

// read reads the next top-level msgpack value (one request) into f.frame without
// decoding it, walking the value's structure object by object. It returns a
// violationError for bytes that are not msgpack or a request over maxFrame, and the read
// error otherwise (the connection ended mid-request). It is called only once the first
// byte of the request has arrived.
func (f *framer) read() error {
	f.frame = f.frame[:0]
	pending := 1 // objects still to read
	for pending > 0 {
		lead, err := f.rd.R.PeekByte()
		if err != nil {
			return err
		}
		hl := headerLen[lead]
		if hl == 0 {
			return violationError{fmt.Errorf("malformed msgpack: byte 0x%02x at offset %d is not a valid type (fluentd and fluent-bit close the connection)", lead, len(f.frame))}
		}
		h, err := f.rd.R.Next(int(hl))
		if err != nil {
			return err
		}
		body, children := bodyLen(h)
		pending += children - 1
		size := uint64(len(f.frame)) + uint64(hl) + body
		// Every object still to come takes at least one byte.
		if size+uint64(pending) > maxFrame {
			return violationError{fmt.Errorf("request larger than %d bytes (fluent-bit's buffer_max_size; it closes the connection)", maxFrame)}
		}
		f.frame = append(f.frame, h...)
		if body > 0 {
			n := len(f.frame)
			f.frame = slices.Grow(f.frame, int(body))[:n+int(body)]
			if _, err := f.rd.R.ReadFull(f.frame[n:]); err != nil {
				f.frame = f.frame[:n]
				return err
			}
		}
	}
	return nil
}

// headerLen is, for each leading byte, the length of the fixed part of the object it
// starts: the whole object for scalars, the lead and length bytes for str, bin, ext,
// array and map. 0 marks 0xc1, which msgpack never uses.
var headerLen = func() (t [256]uint8) {
	for i := range t {
		t[i] = 1 // fixint, fixmap, fixarray, fixstr, nil, bool, negative fixint
	}
	for lead, n := range map[byte]uint8{
		0xc1: 0,
		0xc4: 2, 0xc5: 3, 0xc6: 5, // bin 8/16/32
		0xc7: 3, 0xc8: 4, 0xc9: 6, // ext 8/16/32 (lead, length, type)
		0xca: 5, 0xcb: 9, // float 32/64
		0xcc: 2, 0xcd: 3, 0xce: 5, 0xcf: 9, // uint 8..64
		0xd0: 2, 0xd1: 3, 0xd2: 5, 0xd3: 9, // int 8..64
		0xd4: 3, 0xd5: 4, 0xd6: 6, 0xd7: 10, 0xd8: 18, // fixext 1..16 (whole object)
		0xd9: 2, 0xda: 3, 0xdb: 5, // str 8/16/32
		0xdc: 3, 0xdd: 5, // array 16/32
		0xde: 3, 0xdf: 5, // map 16/32
	} {
		t[lead] = n
	}
	return t
}()

// bodyLen returns, for an object header h (as long as headerLen says), how many payload
// bytes follow it and how many child objects.
func bodyLen(h []byte) (body uint64, children int) {
	lead := h[0]
	switch {
	case lead >= 0x80 && lead <= 0x8f:
		return 0, 2 * int(lead&0x0f)
	case lead >= 0x90 && lead <= 0x9f:
		return 0, int(lead & 0x0f)
	case lead >= 0xa0 && lead <= 0xbf:
		return uint64(lead & 0x1f), 0
	}
	switch lead {
	case 0xc4, 0xc7, 0xd9:
		return uint64(h[1]), 0
	case 0xc5, 0xc8, 0xda:
		return uint64(binary.BigEndian.Uint16(h[1:])), 0
	case 0xc6, 0xc9, 0xdb:
		return uint64(binary.BigEndian.Uint32(h[1:])), 0
	case 0xdc:
		return 0, int(binary.BigEndian.Uint16(h[1:]))
	case 0xdd:
		return 0, int(binary.BigEndian.Uint32(h[1:]))
	case 0xde:
		return 0, 2 * int(binary.BigEndian.Uint16(h[1:]))
	case 0xdf:
		return 0, 2 * int(binary.BigEndian.Uint32(h[1:]))
	}
	return 0, 0
}
