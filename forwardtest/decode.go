package forwardtest

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"github.com/tinylib/msgp/msgp"
)

// maxFrame is fluent-bit's in_forward buffer_max_size: a request, or a decompressed
// PackedForward payload, larger than this makes fluent-bit close the connection.
const maxFrame = 6144000

// maxDepth bounds the nesting of arrays and maps inside a record. It is forwardtest's own
// limit, there to keep decoding off deep recursion; fluentd and fluent-bit have none this
// small, but no log record nests this deep.
const maxDepth = 1000

// violationError marks an error from readFrame that is a protocol violation rather than a
// connection that ended.
type violationError struct{ err error }

func (v violationError) Error() string { return v.err.Error() }
func (v violationError) Unwrap() error { return v.err }

// conn is the per-connection decoding state. Its buffers are reused from one request to
// the next, so steady-state decoding allocates only what it stores.
type conn struct {
	r         *Receiver
	id        int64
	peer      string
	countOnly bool
	rd        *msgp.Reader
	w         io.Writer // where acks go; nil in benchmarks

	lastN  int       // entries in the last request (WithReadRate, WithConnReadRate)
	paceAt time.Time // WithConnReadRate: when this connection's entries so far fit the rate
	frames int64     // requests started on this connection
	frame  []byte    // the raw request being decoded
	plain  []byte    // decompressed PackedForward payload
	zr     *gzip.Reader
	br     bytes.Reader
	batch  []Entry // entries of the request being decoded (full mode)
	ack    []byte

	// WithAckDelay's writer: the acks it holds, closed by endAcks; closed when it is done;
	// closed when a write failed.
	delayed                chan delayedAck
	ackerDone, ackerFailed chan struct{}
}

// readFrame reads the next top-level msgpack value (one request) into c.frame without
// decoding it, walking the value's structure object by object. It returns a
// violationError for bytes that are not msgpack or a request over maxFrame, and the read
// error otherwise (the connection ended mid-request). It is called only once the first
// byte of the request has arrived.
func (c *conn) readFrame() error {
	c.frame = c.frame[:0]
	pending := 1 // objects still to read
	for pending > 0 {
		lead, err := c.rd.R.PeekByte()
		if err != nil {
			return err
		}
		hl := headerLen[lead]
		if hl == 0 {
			return violationError{fmt.Errorf("malformed msgpack: byte 0x%02x at offset %d is not a valid type (fluentd and fluent-bit close the connection)", lead, len(c.frame))}
		}
		h, err := c.rd.R.Next(int(hl))
		if err != nil {
			return err
		}
		body, children := bodyLen(h)
		pending += children - 1
		size := uint64(len(c.frame)) + uint64(hl) + body
		// Every object still to come takes at least one byte.
		if size+uint64(pending) > maxFrame {
			return violationError{fmt.Errorf("request larger than %d bytes (fluent-bit's buffer_max_size; it closes the connection)", maxFrame)}
		}
		c.frame = append(c.frame, h...)
		if body > 0 {
			n := len(c.frame)
			c.frame = slices.Grow(c.frame, int(body))[:n+int(body)]
			if _, err := c.rd.R.ReadFull(c.frame[n:]); err != nil {
				c.frame = c.frame[:n]
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

// frameResult describes a decoded request.
type frameResult struct {
	mode     Mode
	tag      string
	tagZC    []byte // the tag's bytes in the frame, also in CountOnly mode
	n        int    // entries
	chunk    string
	hasChunk bool
}

// frameOptions is what the receiver reads from a request's option map.
type frameOptions struct {
	chunk    string
	hasChunk bool
	gzip     bool
}

// decodeFrame decodes one complete request. In full mode the entries are appended to
// c.batch. Every error it returns is a protocol violation; res then has the tag and the
// mode as far as they were read.
func (c *conn) decodeFrame(b []byte) (res frameResult, err error) {
	size, second, third, err := c.decodeHead(&res, b)
	if err != nil {
		return res, err
	}
	res.mode = entriesMode(second)
	optRaw, err := optionsElem(res.mode, size, third)
	if err != nil {
		return res, err
	}
	opts, err := parseOptions(optRaw)
	if err != nil {
		return res, err
	}
	res.chunk, res.hasChunk = opts.chunk, opts.hasChunk
	switch res.mode {
	case Message:
		err = c.decodeMessage(&res, second)
	case Forward:
		err = c.decodeForward(&res, second)
	default:
		err = c.decodePacked(&res, second, opts.gzip)
	}
	return res, err
}

// decodeHead checks that b is a request array of 2 to 4 elements led by a str tag, which
// it records in res, and returns the array's size, its second element onwards and its
// third element onwards.
func (c *conn) decodeHead(res *frameResult, b []byte) (size uint32, second, third []byte, err error) {
	if msgp.IsNil(b) {
		return 0, nil, nil, errors.New("nil request: fluentd ignores it but fluent-bit closes the connection")
	}
	if t := msgp.NextType(b); t != msgp.ArrayType {
		return 0, nil, nil, fmt.Errorf("request is msgpack %s, not array (fluent-bit closes the connection)", typeName(b))
	}
	size, b, err = msgp.ReadArrayHeaderBytes(b)
	if err != nil {
		return 0, nil, nil, malformed(err)
	}
	if size < 2 || size > 4 {
		return 0, nil, nil, fmt.Errorf("request array has %d elements, want 2 to 4", size)
	}
	tag, second, err := msgp.ReadStringZC(b)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("tag is msgpack %s, not str (fluent-bit closes the connection)", typeName(b))
	}
	res.tagZC = tag // valid until the next frame is read: counted by tag under the lock
	if !c.countOnly {
		res.tag = string(tag)
	}
	if third, err = msgp.Skip(second); err != nil {
		return 0, nil, nil, malformed(err)
	}
	return size, second, third, nil
}

// entriesMode is the request's mode, told by its second element: a str or bin of packed
// entries, an array of entries, or else the time of a single entry.
func entriesMode(second []byte) Mode {
	switch msgp.NextType(second) {
	case msgp.StrType, msgp.BinType:
		return PackedForward
	case msgp.ArrayType:
		return Forward
	}
	return Message
}

// optionsElem checks that a request of the mode has a size its mode allows, and returns its
// option element (nil when it has none), found in third, the request from its third
// element on.
func optionsElem(mode Mode, size uint32, third []byte) ([]byte, error) {
	if mode == Message {
		if size != 3 && size != 4 {
			return nil, fmt.Errorf("message mode request has %d elements, want 3 or 4", size)
		}
		if size == 4 {
			opt, err := msgp.Skip(third)
			if err != nil {
				return nil, malformed(err)
			}
			return opt, nil
		}
		return nil, nil
	}
	if size != 2 && size != 3 {
		return nil, fmt.Errorf("%v request has %d elements, want 2 or 3", mode, size)
	}
	if size == 3 {
		return third, nil
	}
	return nil, nil
}

// decodeMessage decodes a Message mode request's one entry, second being its time and
// record.
func (c *conn) decodeMessage(res *frameResult, second []byte) error {
	t, rest, err := decodeTime(second, false)
	if err != nil {
		return err
	}
	if _, err := c.record(*res, t, rest); err != nil {
		return err
	}
	res.n = 1
	return nil
}

// decodeForward decodes a Forward mode request's entries, second being their array.
func (c *conn) decodeForward(res *frameResult, second []byte) error {
	n, b, err := msgp.ReadArrayHeaderBytes(second)
	if err != nil {
		return malformed(err)
	}
	for i := range int(n) {
		if b, err = c.decodeEntry(*res, b); err != nil {
			return fmt.Errorf("entry %d: %w", i, err)
		}
	}
	res.n = int(n)
	return nil
}

// decodePacked decodes a PackedForward request's entries, second being the bin (or str)
// that holds them; gzip says they are compressed (CompressedPackedForward), which needs a
// bin.
func (c *conn) decodePacked(res *frameResult, second []byte, gzip bool) error {
	var payload []byte
	var err error
	if msgp.NextType(second) == msgp.BinType {
		payload, _, err = msgp.ReadBytesZC(second)
	} else {
		if gzip {
			return errors.New(`CompressedPackedForward entries are a str; they must be bin`)
		}
		payload, _, err = msgp.ReadStringZC(second)
	}
	if err != nil {
		return malformed(err)
	}
	if gzip {
		res.mode = CompressedPackedForward
		if payload, err = c.gunzip(payload); err != nil {
			return err
		}
	}
	for len(payload) > 0 {
		if payload, err = c.decodeEntry(*res, payload); err != nil {
			return fmt.Errorf("packed entry %d: %w", res.n, err)
		}
		res.n++
	}
	return nil
}

func parseOptions(b []byte) (o frameOptions, err error) {
	if b == nil || msgp.IsNil(b) {
		return o, nil
	}
	if msgp.NextType(b) != msgp.MapType {
		return o, fmt.Errorf("options are msgpack %s, not map or nil (fluent-bit closes the connection)", typeName(b))
	}
	n, b, err := msgp.ReadMapHeaderBytes(b)
	if err != nil {
		return o, malformed(err)
	}
	for range n {
		key, rest, err := msgp.ReadStringZC(b)
		if err != nil {
			// Servers ignore keys they don't know; a non-str key is one of those.
			if b, err = msgp.Skip(b); err != nil {
				return o, malformed(err)
			}
		} else {
			b = rest
		}
		val := b
		if b, err = msgp.Skip(b); err != nil {
			return o, malformed(err)
		}
		switch string(key) {
		case "chunk":
			s, _, err := msgp.ReadStringZC(val)
			if err != nil {
				return o, fmt.Errorf(`option "chunk" is msgpack %s, not str (fluent-bit closes the connection)`, typeName(val))
			}
			o.chunk, o.hasChunk = string(s), true
		case "compressed":
			s, _, err := msgp.ReadStringZC(val)
			if err != nil {
				return o, fmt.Errorf(`option "compressed" is msgpack %s, not str`, typeName(val))
			}
			switch string(s) {
			case "gzip":
				o.gzip = true
			case "text":
			default:
				return o, fmt.Errorf(`option "compressed" is %q; only "gzip" and "text" work with every fluentd (zstd needs fluentd >= 1.19; fluentd closes the connection on unknown values)`, s)
			}
		case "fluent_signal":
			sig, _, err := msgp.ReadInt64Bytes(val)
			switch {
			case err != nil || sig < 0 || sig > 2:
				return o, fmt.Errorf(`option "fluent_signal" is %s, want 0, 1 or 2 (fluent-bit closes the connection)`, describe(val))
			case sig != 0:
				return o, fmt.Errorf(`option "fluent_signal" is %d (metrics or traces); forwardtest decodes logs only`, sig)
			}
		}
	}
	return o, nil
}

// decodeEntry decodes one [time, record] entry at the start of b and returns the rest.
func (c *conn) decodeEntry(res frameResult, b []byte) ([]byte, error) {
	switch msgp.NextType(b) {
	case msgp.ArrayType:
	case msgp.InvalidType:
		if len(b) == 0 {
			return b, malformed(msgp.ErrShortBytes)
		}
		return b, malformed(msgp.InvalidPrefixError(b[0]))
	default:
		return b, fmt.Errorf("entry is msgpack %s, not array [time, record]", typeName(b))
	}
	n, b, err := msgp.ReadArrayHeaderBytes(b)
	if err != nil {
		return b, malformed(err)
	}
	if n != 2 {
		return b, fmt.Errorf("entry array has %d elements, want 2 [time, record]", n)
	}
	t, b, err := decodeTime(b, true)
	if err != nil {
		return b, err
	}
	return c.record(res, t, b)
}

// record decodes (or in count-only mode checks and skips) the record at the start of b,
// stores the entry in c.batch, and returns the rest.
func (c *conn) record(res frameResult, t time.Time, b []byte) ([]byte, error) {
	if len(b) == 0 {
		return b, malformed(msgp.ErrShortBytes)
	}
	if msgp.NextType(b) != msgp.MapType {
		return b, fmt.Errorf("record is msgpack %s, not map (fluentd drops the event; fluent-bit rejects it)", typeName(b))
	}
	if c.countOnly {
		rest, err := msgp.Skip(b)
		if err != nil {
			return b, malformed(err)
		}
		return rest, nil
	}
	rec, rest, err := decodeMap(b, 0)
	if err != nil {
		return b, fmt.Errorf("record: %w", err)
	}
	c.batch = append(c.batch, Entry{Tag: res.tag, Time: t, Record: rec, Mode: res.mode})
	return rest, nil
}

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

// gunzip decompresses a CompressedPackedForward payload (one or more gzip members) into
// c.plain, refusing to grow it past maxFrame.
func (c *conn) gunzip(p []byte) ([]byte, error) {
	c.br.Reset(p)
	var err error
	if c.zr == nil {
		c.zr, err = gzip.NewReader(&c.br)
	} else {
		err = c.zr.Reset(&c.br)
	}
	if err != nil {
		return nil, fmt.Errorf("gzip: %w (fluentd and fluent-bit close the connection)", err)
	}
	out := c.plain[:0]
	for {
		if len(out) == cap(out) {
			out = slices.Grow(out, max(64<<10, len(out)))
		}
		n, err := c.zr.Read(out[len(out):cap(out)])
		out = out[:len(out)+n]
		if len(out) > maxFrame {
			c.plain = out[:0]
			return nil, fmt.Errorf("decompressed entries larger than %d bytes (fluent-bit's buffer_max_size; it closes the connection)", maxFrame)
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			c.plain = out[:0]
			return nil, fmt.Errorf("gzip: %w (fluentd and fluent-bit close the connection)", err)
		}
	}
	c.plain = out
	return out, nil
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
