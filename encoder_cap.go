package fluentcore

import (
	"strconv"
	"unicode/utf8"

	"github.com/fluentcore/fluentcore/internal/wire"
	"github.com/tinylib/msgp/msgp"
)

// The entry size cap for err entries (Config.MaxEntryBytes): rather than spill a too large
// err entry, the sink delivers it cut down to size. The cut works on the encoded entry, so
// no marshaler runs twice:
//
//   - every str and bin value (map keys excepted) longer than a common length L keeps its
//     first L bytes (whole UTF-8 characters for a str) followed by the marker
//     "…(truncated N bytes)", N being the bytes removed; L is the largest that fits, so
//     the largest values are cut first and short ones are left alone;
//   - the record gets one more key, truncatedKey (MessageKey + "Truncated", or
//     "truncated" when the message key is omitted), with the value true.
//
// Types, keys and structure are unchanged; a bin value's marker is appended as bytes.

// capMarker is the start of the text appended to a truncated value.
const capMarker = "…(truncated "

// capSpan is one str or bin value of the entry being cut.
type capSpan struct {
	off int // offset of its header in the entry
	hdr int // header length
	n   int // payload length
	bin bool
}

// capEntry returns entry, one Forward entry as appendEntry writes it, cut down to at most
// limit bytes as described above, and true; or false when even cutting every value can't
// get it there (thousands of small fields). The result lives in the encoder's scratch
// until the next call.
func (e *msgpEncoder) capEntry(entry []byte, limit int) ([]byte, bool) {
	if len(entry) <= limit {
		return entry, true
	}
	if len(entry) < 1 || entry[0] != wire.Array2 {
		return nil, false
	}
	rest, err := msgp.Skip(entry[1:]) // the EventTime
	if err != nil {
		return nil, false
	}
	recOff := len(entry) - len(rest)
	sz, body, err := msgp.ReadMapHeaderBytes(rest)
	if err != nil {
		return nil, false
	}
	oldHdr := len(rest) - len(body)
	newHdr := len(msgp.AppendMapHeader(nil, sz+1))
	e.capSpans = e.capSpans[:0]
	if end, ok := e.collectSpans(entry, recOff); !ok || end != len(entry) {
		return nil, false
	}
	spans := e.capSpans

	// base is everything but the spans, plus the marker field.
	base := len(entry) - oldHdr + newHdr + len(e.cfg.truncatedKey) + 1
	maxN := 0
	for _, s := range spans {
		base -= s.hdr + s.n
		maxN = max(maxN, s.n)
	}
	size := func(l int) int {
		total := base
		for _, s := range spans {
			_, sz := s.cut(entry, l)
			total += sz
		}
		return total
	}
	if size(0) > limit {
		return nil, false
	}
	lo, hi := 0, maxN // size(lo) fits; find the largest l that does
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		if size(mid) <= limit {
			lo = mid
		} else {
			hi = mid - 1
		}
	}

	out := append(e.capOut[:0], entry[:recOff]...)
	out = msgp.AppendMapHeader(out, sz+1)
	last := recOff + oldHdr
	for _, s := range spans {
		keep, newSize := s.cut(entry, lo)
		if newSize == s.hdr+s.n {
			continue // left as it is
		}
		out = append(out, entry[last:s.off]...)
		payload := keep + len(capMarker) + len(" bytes)") + digits(s.n-keep)
		if s.bin {
			out = msgp.AppendBytesHeader(out, uint32(payload))
		} else {
			out = appendStrHeader(out, payload)
		}
		p := s.off + s.hdr
		out = append(out, entry[p:p+keep]...)
		out = append(out, capMarker...)
		out = strconv.AppendInt(out, int64(s.n-keep), 10)
		out = append(out, " bytes)"...)
		last = p + s.n
	}
	out = append(out, entry[last:]...)
	out = append(out, e.cfg.truncatedKey...)
	out = append(out, wire.True)
	e.capOut = out[:0]
	return out, true
}

// cut returns how many payload bytes s keeps with length cap l, and its encoded size then.
// A value is cut only when that makes it smaller.
func (s capSpan) cut(entry []byte, l int) (keep, size int) {
	if s.n <= l {
		return s.n, s.hdr + s.n
	}
	keep = l
	if !s.bin {
		p := entry[s.off+s.hdr:]
		for keep > 0 && !utf8.RuneStart(p[keep]) {
			keep--
		}
	}
	payload := keep + len(capMarker) + len(" bytes)") + digits(s.n-keep)
	size = payload + 1
	switch {
	case !s.bin && payload <= 31:
	case payload <= 0xff:
		size++
	case payload <= 0xffff:
		size += 2
	default:
		size += 4
	}
	if size >= s.hdr+s.n {
		return s.n, s.hdr + s.n
	}
	return keep, size
}

func digits(n int) int {
	d := 1
	for n >= 10 {
		n /= 10
		d++
	}
	return d
}

// collectSpans records the str and bin values (not map keys) of the value at off and
// returns the offset after it.
func (e *msgpEncoder) collectSpans(b []byte, off int) (int, bool) {
	v := b[off:]
	if len(v) == 0 {
		return 0, false
	}
	switch msgp.NextType(v) {
	case msgp.MapType:
		sz, rest, err := msgp.ReadMapHeaderBytes(v)
		if err != nil {
			return 0, false
		}
		off = len(b) - len(rest)
		for range sz {
			rest, err := msgp.Skip(b[off:]) // the key stays whole
			if err != nil {
				return 0, false
			}
			var ok bool
			if off, ok = e.collectSpans(b, len(b)-len(rest)); !ok {
				return 0, false
			}
		}
		return off, true
	case msgp.ArrayType:
		sz, rest, err := msgp.ReadArrayHeaderBytes(v)
		if err != nil {
			return 0, false
		}
		off = len(b) - len(rest)
		for range sz {
			var ok bool
			if off, ok = e.collectSpans(b, off); !ok {
				return 0, false
			}
		}
		return off, true
	case msgp.StrType, msgp.BinType:
		var (
			p    []byte
			rest []byte
			err  error
		)
		isBin := msgp.NextType(v) == msgp.BinType
		if isBin {
			p, rest, err = msgp.ReadBytesZC(v)
		} else {
			p, rest, err = msgp.ReadStringZC(v)
		}
		if err != nil {
			return 0, false
		}
		end := len(b) - len(rest)
		e.capSpans = append(e.capSpans, capSpan{off: off, hdr: end - off - len(p), n: len(p), bin: isBin})
		return end, true
	}
	rest, err := msgp.Skip(v)
	if err != nil {
		return 0, false
	}
	return len(b) - len(rest), true
}
