package forwardtest

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/tinylib/msgp/msgp"
)

// decoder decodes one connection's requests: the request's shape, its options, its
// carrier mode and its entries, whose records it decodes into entries (or, in CountOnly
// mode, checks and skips).
//
// Invariants: batch holds the entries of the request being decoded and is emptied
// (clearBatch) before the next; it stays empty in CountOnly mode; its buffers are reused
// from one request to the next, so steady-state decoding allocates only what it stores.
// Only the connection's own goroutine uses it.
type decoder struct {
	countOnly bool
	batch     []Entry // entries of the request being decoded (full mode)
	gz        gunzipper
}

// clearBatch forgets the entries of the last request, keeping the array.
func (d *decoder) clearBatch() {
	clear(d.batch)
	d.batch = d.batch[:0]
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

// decode decodes one complete request. In full mode the entries are appended to
// d.batch. Every error it returns is a protocol violation; res then has the tag and the
// mode as far as they were read.
func (d *decoder) decode(b []byte) (res frameResult, err error) {
	size, second, third, err := d.decodeHead(&res, b)
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
		err = d.decodeMessage(&res, second)
	case Forward:
		err = d.decodeForward(&res, second)
	default:
		err = d.decodePacked(&res, second, opts.gzip)
	}
	return res, err
}

// decodeHead checks that b is a request array of 2 to 4 elements led by a str tag, which
// it records in res, and returns the array's size, its second element onwards and its
// third element onwards.
func (d *decoder) decodeHead(res *frameResult, b []byte) (size uint32, second, third []byte, err error) {
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
	if !d.countOnly {
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
func (d *decoder) decodeMessage(res *frameResult, second []byte) error {
	t, rest, err := decodeTime(second, false)
	if err != nil {
		return err
	}
	if _, err := d.record(*res, t, rest); err != nil {
		return err
	}
	res.n = 1
	return nil
}

// decodeForward decodes a Forward mode request's entries, second being their array.
func (d *decoder) decodeForward(res *frameResult, second []byte) error {
	n, b, err := msgp.ReadArrayHeaderBytes(second)
	if err != nil {
		return malformed(err)
	}
	for i := range int(n) {
		if b, err = d.decodeEntry(*res, b); err != nil {
			return fmt.Errorf("entry %d: %w", i, err)
		}
	}
	res.n = int(n)
	return nil
}

// decodePacked decodes a PackedForward request's entries, second being the bin (or str)
// that holds them; gzip says they are compressed (CompressedPackedForward), which needs a
// bin.
func (d *decoder) decodePacked(res *frameResult, second []byte, gzip bool) error {
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
		if payload, err = d.gz.gunzip(payload); err != nil {
			return err
		}
	}
	for len(payload) > 0 {
		if payload, err = d.decodeEntry(*res, payload); err != nil {
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
func (d *decoder) decodeEntry(res frameResult, b []byte) ([]byte, error) {
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
	return d.record(res, t, b)
}

// record decodes (or in count-only mode checks and skips) the record at the start of b,
// stores the entry in d.batch, and returns the rest.
func (d *decoder) record(res frameResult, t time.Time, b []byte) ([]byte, error) {
	if len(b) == 0 {
		return b, malformed(msgp.ErrShortBytes)
	}
	if msgp.NextType(b) != msgp.MapType {
		return b, fmt.Errorf("record is msgpack %s, not map (fluentd drops the event; fluent-bit rejects it)", typeName(b))
	}
	if d.countOnly {
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
	d.batch = append(d.batch, Entry{Tag: res.tag, Time: t, Record: rec, Mode: res.mode})
	return rest, nil
}

// gunzipper decompresses CompressedPackedForward payloads.
//
// Invariants: plain holds the last payload decompressed, never over maxFrame, until the
// next call reuses its array; zr and br are reused from one payload to the next.
type gunzipper struct {
	plain []byte // the last decompressed payload
	zr    *gzip.Reader
	br    bytes.Reader
}

// gunzip decompresses a CompressedPackedForward payload (one or more gzip members) into
// z.plain, refusing to grow it past maxFrame.
func (z *gunzipper) gunzip(p []byte) ([]byte, error) {
	z.br.Reset(p)
	var err error
	if z.zr == nil {
		z.zr, err = gzip.NewReader(&z.br)
	} else {
		err = z.zr.Reset(&z.br)
	}
	if err != nil {
		return nil, fmt.Errorf("gzip: %w (fluentd and fluent-bit close the connection)", err)
	}
	out := z.plain[:0]
	for {
		if len(out) == cap(out) {
			out = slices.Grow(out, max(64<<10, len(out)))
		}
		n, err := z.zr.Read(out[len(out):cap(out)])
		out = out[:len(out)+n]
		if len(out) > maxFrame {
			z.plain = out[:0]
			return nil, fmt.Errorf("decompressed entries larger than %d bytes (fluent-bit's buffer_max_size; it closes the connection)", maxFrame)
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			z.plain = out[:0]
			return nil, fmt.Errorf("gzip: %w (fluentd and fluent-bit close the connection)", err)
		}
	}
	z.plain = out
	return out, nil
}
