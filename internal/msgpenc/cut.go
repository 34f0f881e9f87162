package msgpenc

import (
	"strconv"
	"unicode/utf8"

	"github.com/fluentcore/fluentcore/internal/wire"
	"github.com/tinylib/msgp/msgp"
)

// CapMarker is the start of the text appended to a truncated value.
const CapMarker = "…(truncated "

// markerLen is the length of the marker of a value cut by n bytes; appendMarker appends it.
func markerLen(n int) int { return len(CapMarker) + digits(n) + len(" bytes)") }

func appendMarker(dst []byte, n int) []byte {
	dst = append(dst, CapMarker...)
	dst = strconv.AppendInt(dst, int64(n), 10)
	return append(dst, " bytes)"...)
}

func digits(n int) int {
	d := 1
	for n >= 10 {
		n /= 10
		d++
	}
	return d
}

// span is one str or bin value of the entry being cut.
type span struct {
	off  int // offset of its header in the entry
	hdr  int // header length
	n    int // payload length
	orig int // the value's length before it was stored cut (precut), else n
	bin  bool
}

// CapEntry appends to dst entry, one Forward entry, [EventTime, {record}], cut down to at
// most limit bytes as described in appender.go, with mark (a pre-encoded key) set to true
// in its record, and reports true; or false when even cutting every value can't get it
// there (thousands of small fields). An entry within limit is returned as it is. When
// entry is the last the Appender encoded, the values it stored cut (precut) are cut from
// their original lengths.
func (a *Appender) CapEntry(dst, entry []byte, limit int, mark []byte) ([]byte, bool) {
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
	a.spans = a.spans[:0]
	if end, ok := a.collectSpans(entry, recOff); !ok || end != len(entry) {
		return nil, false
	}
	spans := a.spans
	// Both lists are in the entry's order.
	for i, j := 0, 0; j < len(a.precut) && i < len(spans); i++ {
		if spans[i].off == a.precut[j].off {
			spans[i].orig = a.precut[j].orig
			j++
		}
	}

	// base is everything but the spans, plus the marker field.
	base := len(entry) - oldHdr + newHdr + len(mark) + 1
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

	out := append(dst, entry[:recOff]...)
	out = msgp.AppendMapHeader(out, sz+1)
	last := recOff + oldHdr
	for _, s := range spans {
		keep, newSize := s.cut(entry, lo)
		if newSize == s.hdr+s.n {
			continue // left as it is
		}
		out = append(out, entry[last:s.off]...)
		payload := keep + markerLen(s.orig-keep)
		if s.bin {
			out = msgp.AppendBytesHeader(out, uint32(payload))
		} else {
			out = AppendStrHeader(out, payload)
		}
		p := s.off + s.hdr
		out = append(out, entry[p:p+keep]...)
		out = appendMarker(out, s.orig-keep)
		last = p + s.n
	}
	out = append(out, entry[last:]...)
	out = append(out, mark...)
	out = append(out, wire.True)
	return out, true
}

// cut returns how many payload bytes s keeps with length cap l, and its encoded size then.
// A value is cut only when that makes it smaller, or when it was stored cut already.
func (s span) cut(entry []byte, l int) (keep, size int) {
	whole := s.orig == s.n
	if s.n <= l && whole {
		return s.n, s.hdr + s.n
	}
	keep = min(l, s.n)
	if !s.bin && keep < s.n {
		p := entry[s.off+s.hdr:]
		for keep > 0 && !utf8.RuneStart(p[keep]) {
			keep--
		}
	}
	payload := keep + markerLen(s.orig-keep)
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
	if size >= s.hdr+s.n && whole {
		return s.n, s.hdr + s.n
	}
	return keep, size
}

// collectSpans records the str and bin values (not map keys) of the value at off and
// returns the offset after it.
func (a *Appender) collectSpans(b []byte, off int) (int, bool) {
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
			if off, ok = a.collectSpans(b, len(b)-len(rest)); !ok {
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
			if off, ok = a.collectSpans(b, off); !ok {
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
		a.spans = append(a.spans, span{off: off, hdr: end - off - len(p), n: len(p), orig: len(p), bin: isBin})
		return end, true
	}
	rest, err := msgp.Skip(v)
	if err != nil {
		return 0, false
	}
	return len(b) - len(rest), true
}
