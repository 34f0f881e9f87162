package fluentcore

import (
	"bytes"
	"errors"
	"math"
	"strconv"
	"unicode/utf8"
	"unsafe"

	"github.com/fluentcore/fluentcore/internal/wire"
	"github.com/tinylib/msgp/msgp"
	"go.uber.org/zap/zapcore"
)

// The entry size cap (Config.Transport.MaxEntryBytes). An entry is encoded within a budget: once the
// next key or value would take it past its limit, appending stops and every later Add* and
// Append* call returns at once, so an entry far over the cap costs a walk of what the caller
// passes, never its size in memory (a marshaler nested past the stop is not even called, a
// reflected map or array whose smallest encoding cannot fit is not walked).
//
// An info entry is encoded within Transport.MaxEntryBytes and dropped (too_large) if it passes it. An
// err entry is delivered cut down to size rather than spilled, by the first of these that
// fits:
//
//  1. Values truncated. The entry is encoded within cutScratch × Transport.MaxEntryBytes, its long str
//     and bin values stored cut: the j-th value stored cut keeps Transport.MaxEntryBytes/j + 8 bytes,
//     and a value is stored cut when it is longer than that (see precutLen: no cut below
//     keeps more). If that holds the whole entry, capEntry cuts it: every str and
//     bin value (map keys excepted) longer than a common length L keeps its first L bytes
//     (whole UTF-8 characters for a str) followed by the marker "…(truncated N bytes)", N
//     being the bytes removed; L is the largest that fits, so the largest values are cut
//     first and short ones are left alone. Types, keys and structure are unchanged; a bin
//     value's marker is appended as bytes. No marshaler runs twice.
//  2. Cut short (cutShort), when truncating values cannot make it fit (too many of them)
//     or the entry passes cutScratch × Transport.MaxEntryBytes. The entry is encoded again (its
//     marshalers run again) with every str and bin value longer than Transport.MaxEntryBytes /
//     cutValueShare cut as in 1, keeping the values in order while they fit: the first
//     that does not (with its key), and everything after it, is left out; the maps and
//     arrays open there end with what they hold; a reflected value is kept whole or left
//     out. The stacktrace comes after the fields but is kept, in room set aside for it.
//
// Either way the record gets one more key, truncatedKey (MessageKey + "Truncated", or
// "truncated" when the message key is omitted), with the value true, and the entry counts
// as truncated. Only an entry whose head alone passes the cap is still too large.

const (
	// cutScratch is how many times Transport.MaxEntryBytes an err entry may take, its long values
	// stored cut, for capEntry to truncate it exactly; past it, the entry is cut short.
	cutScratch = 4
	// cutValueShare: an entry cut short keeps at most Transport.MaxEntryBytes / cutValueShare bytes
	// of each str and bin value.
	cutValueShare = 16
	// keptScratch is the most capacity, in bytes, each scratch buffer of an encoder keeps
	// from one entry to the next (trim): a buffer that grew past it for a large entry is
	// dropped after that entry, so what an encoder holds between entries is bounded,
	// whatever it encoded before.
	keptScratch = 64 << 10
	// firstPassSlack is more than any value asks for beyond what it writes (containerRoom,
	// a header's 5 bytes for a shorter one).
	firstPassSlack = 128
	// cutSlack is kept free when cutting short for what closing may add past the budget: a
	// nil for a key a recovered panic left without its value, an array header around the
	// values a user's encoder wrote where one belongs.
	cutSlack = 16
)

// errNoRoom is a reflected value's error when it does not fit the budget: the value is left
// out, and the field gets no "<key>Error".
var errNoRoom = errors.New("fluentcore: value does not fit Transport.MaxEntryBytes")

// budget is what one encoding of an entry may write.
type budget struct {
	limit    int  // the most bytes the entry may take; 0: any
	valueCap int  // str and bin values longer than this are cut; 0: none
	cut      bool // cutting short: values are cut with their markers, a stop ends the entry where it is
}

// firstPass is the budget of an entry's first encoding for a stream whose entries are at
// most entryCap bytes: entryCap when a larger entry is dropped, with firstPassSlack more, so
// that the room a value asks for (its largest size) never stops an entry that fits, which
// the stream then checks to the byte; when it is cut, what capEntry may cut, its long values
// stored cut.
func firstPass(entryCap int, cuts bool) budget {
	if !cuts {
		return budget{limit: entryCap + firstPassSlack}
	}
	return budget{limit: cutScratch * entryCap, valueCap: entryCap}
}

// encodeCapped appends the entry to dst cut down to at most limit bytes as described at the
// top of this file (for a writer without a shard: the spill's), and reports whether it was
// cut; nil if a marshaler panicked.
func (e *msgpEncoder) encodeCapped(dst []byte, ctx *encodedContext, ent *zapcore.Entry, fields []zapcore.Field, limit int) (out []byte, cut bool) {
	start := len(dst)
	out, ok := encodeSafely(e, dst, ctx, ent, fields, firstPass(limit, true))
	if !e.abandoned {
		if !ok {
			return nil, false
		}
		if len(out)-start <= limit {
			return out, false
		}
		if capped, ok := e.capEntry(out[start:], limit); ok {
			return append(out[:start], capped...), true
		}
	}
	short, _ := e.cutShort(ctx, ent, fields, limit)
	if short == nil {
		return nil, false
	}
	return append(dst[:start], short...), true
}

// begin sets the budget b for an entry that starts at start in buf, and returns its end.
func (e *msgpEncoder) begin(start int, b budget) int {
	e.start, e.end, e.valueCap, e.precutOf = start, math.MaxInt, math.MaxInt, 0
	if b.limit > 0 {
		e.end = start + b.limit
	}
	if b.valueCap > 0 {
		e.valueCap = b.valueCap
		if !b.cut {
			e.precutOf = b.valueCap
			e.valueCap = precutLen(b.valueCap, 1)
		}
	}
	e.cutting, e.abandoned, e.released = b.cut, false, false
	e.precut = e.precut[:0]
	return e.end
}

// room reports whether n more bytes fit the entry's budget; when they do not, appending
// stops (see stop).
func (e *msgpEncoder) room(n int) bool {
	if len(e.buf)+n <= e.end {
		return true
	}
	e.stop()
	return false
}

// stop ends the appending of the entry: no later key or value fits. Cutting, the entry ends
// where it is, its containers closed as they end. Otherwise the entry is abandoned: buf is
// let go, nothing is written or patched any more, and an encoder that belongs to a shard
// gives it up (release), so that the writers behind it need not wait for the rest of the
// walk, which may be long (a marshaler's million fields) and which touches nothing shared.
func (e *msgpEncoder) stop() {
	e.end = -1
	if e.cutting || e.abandoned {
		return
	}
	e.abandoned = true
	e.buf = nil
	if e.release != nil {
		e.release()
	}
}

// truncate drops what the entry holds from mark on, unless it was abandoned.
func (e *msgpEncoder) truncate(mark int) {
	if e.abandoned {
		return
	}
	e.buf = e.buf[:mark]
	for len(e.precut) > 0 && e.start+e.precut[len(e.precut)-1].off >= mark {
		e.precut = e.precut[:len(e.precut)-1]
	}
}

// movePrecut records that the bytes from at on moved by delta.
func (e *msgpEncoder) movePrecut(at, delta int) {
	for i := len(e.precut) - 1; i >= 0 && e.start+e.precut[i].off >= at; i-- {
		e.precut[i].off += delta
	}
}

// plain reports whether a str or bin value of n bytes is written as it is, taking n bytes
// and a header: not cut, and not cutting (which counts invalid UTF-8's repair exactly).
func (e *msgpEncoder) plain(n int) bool { return n <= e.valueCap && !e.cutting }

// strRoom is the most a str value s takes within the budget.
func (e *msgpEncoder) strRoom(s string) int {
	if len(s) <= e.valueCap && !e.cutting {
		return len(s) + 5
	}
	return cutStrRoom(e, s)
}

// strBytesRoom is strRoom for a str value held in a []byte.
func (e *msgpEncoder) strBytesRoom(s []byte) int {
	if len(s) <= e.valueCap && !e.cutting {
		return len(s) + 5
	}
	return cutStrRoom(e, s)
}

// putStr appends s as a str value, cut to valueCap.
func (e *msgpEncoder) putStr(s string) {
	if len(s) <= e.valueCap {
		e.buf = appendStr(e.buf, s)
		return
	}
	putCutStr(e, s)
}

// putStrBytes is putStr for a []byte.
func (e *msgpEncoder) putStrBytes(s []byte) {
	if len(s) <= e.valueCap {
		e.buf = appendStrBytes(e.buf, s)
		return
	}
	putCutStr(e, s)
}

// cutStrRoom is strRoom's slow path: a value to cut, or cutting, where invalid UTF-8 and the
// marker are counted exactly.
func cutStrRoom[S string | []byte](e *msgpEncoder, s S) int {
	keep := cutLen(s, e.valueCap)
	n := repairedLen(s[:keep])
	if keep < len(s) && e.cutting {
		n += markerLen(len(s) - keep)
	}
	return n + 5
}

// putCutStr appends s, longer than valueCap, cut: cutting, with its marker; otherwise stored
// cut for capEntry, which knows its length from precut.
func putCutStr[S string | []byte](e *msgpEncoder, s S) {
	keep := cutLen(s, e.valueCap)
	if e.cutting {
		e.scratch = append(e.scratch[:0], s[:keep]...)
		e.scratch = appendMarker(e.scratch, len(s)-keep)
		e.buf = appendStrBytes(e.buf, e.scratch)
		return
	}
	off := len(e.buf)
	e.scratch = append(e.scratch[:0], s[:keep]...)
	e.buf = appendStrBytes(e.buf, e.scratch)
	e.recordPrecut(off, len(s), false)
}

// binRoom is the most a bin value of n bytes takes within the budget.
func (e *msgpEncoder) binRoom(n int) int {
	if n <= e.valueCap {
		return n + 5
	}
	if e.cutting {
		return e.valueCap + markerLen(n-e.valueCap) + 5
	}
	return e.valueCap + 5
}

// putBin appends v as a bin value, cut to valueCap as putCutStr cuts a str.
func (e *msgpEncoder) putBin(v []byte) {
	if len(v) <= e.valueCap {
		e.buf = msgp.AppendBytes(e.buf, v)
		return
	}
	keep := e.valueCap
	if e.cutting {
		e.buf = msgp.AppendBytesHeader(e.buf, uint32(keep+markerLen(len(v)-keep)))
		e.buf = append(e.buf, v[:keep]...)
		e.buf = appendMarker(e.buf, len(v)-keep)
		return
	}
	off := len(e.buf)
	e.buf = msgp.AppendBytes(e.buf, v[:keep])
	e.recordPrecut(off, len(v), true)
}

// precutLen is how many bytes the j-th value stored cut keeps (from 1), for capEntry to cut
// to limit. It keeps at least what capEntry's cut keeps, L: with j values longer than
// limit/j + 8, each keeping L or all of it, less up to 3 bytes for a whole UTF-8 character,
// an L above limit/j + 4 would make them alone longer than limit.
func precutLen(limit, j int) int { return limit/j + 8 }

// recordPrecut records the value just appended at off, stored cut from orig bytes, and
// lowers valueCap for the next one.
func (e *msgpEncoder) recordPrecut(off, orig int, bin bool) {
	hdr := 1
	switch e.buf[off] {
	case wire.Str8, wire.Bin8:
		hdr = 2
	case wire.Str16, wire.Bin8 + 1:
		hdr = 3
	case wire.Str32, wire.Bin8 + 2:
		hdr = 5
	}
	n := len(e.buf) - off - hdr
	e.precut = append(e.precut, capSpan{off: off - e.start, hdr: hdr, n: n, orig: orig, bin: bin})
	e.valueCap = precutLen(e.precutOf, len(e.precut)+1)
}

// cutLen is how many bytes of s a cut to at most l keeps: whole UTF-8 characters.
func cutLen[S string | []byte](s S, l int) int {
	if len(s) <= l {
		return len(s)
	}
	for l > 0 && !utf8.RuneStart(s[l]) {
		l--
	}
	return l
}

// repairedLen is the length of s once appendStr has replaced its invalid UTF-8.
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

// markerLen is the length of the marker of a value cut by n bytes; appendMarker appends it.
func markerLen(n int) int { return len(capMarker) + digits(n) + len(" bytes)") }

func appendMarker(dst []byte, n int) []byte {
	dst = append(dst, capMarker...)
	dst = strconv.AppendInt(dst, int64(n), 10)
	return append(dst, " bytes)"...)
}

// cutShort encodes the entry again, cut short to at most limit bytes as described at the
// top of this file, into capOut, where it stays until the encoder's next cut. It reports
// false if it could not fit (a head larger than limit), and nil if a marshaler panicked.
func (e *msgpEncoder) cutShort(ctx *encodedContext, ent *zapcore.Entry, fields []zapcore.Field, limit int) ([]byte, bool) {
	b := budget{limit: max(limit-cutSlack, 1), valueCap: max(limit/cutValueShare, 1), cut: true}
	out, ok := encodeSafely(e, e.capOut[:0], ctx, ent, fields, b)
	if !ok {
		return nil, false
	}
	e.capOut = out[:0]
	return out, len(out) <= limit
}

// Sizes of the scratch slices' elements, for trim.
const (
	capSpanSize = int(unsafe.Sizeof(capSpan{}))
	mapKVSize   = int(unsafe.Sizeof(mapKV{}))
	anyKVSize   = int(unsafe.Sizeof(anyKV{}))
	strKVSize   = int(unsafe.Sizeof([2]string{}))
)

// trim drops every scratch buffer that grew past keptScratch, once an entry is done with it.
func (e *msgpEncoder) trim() {
	if cap(e.scratch) > keptScratch {
		e.scratch = nil
	}
	if cap(e.jsonStr) > keptScratch {
		e.jsonStr = nil
	}
	if cap(e.capOut) > keptScratch {
		e.capOut = nil
	}
	if cap(e.capSpans)*capSpanSize > keptScratch {
		e.capSpans = nil
	}
	if cap(e.precut)*capSpanSize > keptScratch {
		e.precut = nil
	}
	if cap(e.mapKVs)*mapKVSize > keptScratch {
		e.mapKVs = nil
	}
	if cap(e.anyKVs)*anyKVSize > keptScratch {
		e.anyKVs = nil
	}
	if cap(e.strKVs)*strKVSize > keptScratch {
		e.strKVs = nil
	}
	if e.reflectBuf.Cap() > keptScratch {
		e.reflectBuf = bytes.Buffer{} // reflectEnc writes to its address, which stays
	}
}

// capMarker is the start of the text appended to a truncated value.
const capMarker = "…(truncated "

// capSpan is one str or bin value of the entry being cut.
type capSpan struct {
	off  int // offset of its header in the entry
	hdr  int // header length
	n    int // payload length
	orig int // the value's length before it was stored cut (precut), else n
	bin  bool
}

// capEntry returns entry, one Forward entry as encodeEntry writes it (the encoder's last,
// when its values were stored cut: precut), cut down to at most limit bytes as described
// above, and true; or false when even cutting every value can't get it there (thousands of
// small fields). The result lives in the encoder's scratch until the next call.
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
	// Both lists are in the entry's order.
	for i, j := 0, 0; j < len(e.precut) && i < len(spans); i++ {
		if spans[i].off == e.precut[j].off {
			spans[i].orig = e.precut[j].orig
			j++
		}
	}

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
		payload := keep + markerLen(s.orig-keep)
		if s.bin {
			out = msgp.AppendBytesHeader(out, uint32(payload))
		} else {
			out = appendStrHeader(out, payload)
		}
		p := s.off + s.hdr
		out = append(out, entry[p:p+keep]...)
		out = appendMarker(out, s.orig-keep)
		last = p + s.n
	}
	out = append(out, entry[last:]...)
	out = append(out, e.cfg.truncatedKey...)
	out = append(out, wire.True)
	e.capOut = out[:0]
	return out, true
}

// cut returns how many payload bytes s keeps with length cap l, and its encoded size then.
// A value is cut only when that makes it smaller, or when it was stored cut already.
func (s capSpan) cut(entry []byte, l int) (keep, size int) {
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
		e.capSpans = append(e.capSpans, capSpan{off: off, hdr: end - off - len(p), n: len(p), orig: len(p), bin: isBin})
		return end, true
	}
	rest, err := msgp.Skip(v)
	if err != nil {
		return 0, false
	}
	return len(b) - len(rest), true
}
