package msgpenc

import (
	"errors"
	"math"
	"unicode/utf8"
	"unsafe"

	"github.com/fluentcore/fluentcore/internal/wire"
	"github.com/tinylib/msgp/msgp"
)

// The entry size cap. An entry is encoded within a budget: once the next key or value would
// take it past its limit, appending stops and every later key or value is refused at once,
// so an entry far over the cap costs a walk of what the caller passes, never its size in
// memory (a marshaler nested past the stop is not even called, a reflected map or array
// whose smallest encoding cannot fit is not walked).
//
// What a stop means depends on the budget. Not cutting, the entry is abandoned: its buffer
// is let go, nothing more is written or patched, and the entry's Owner is told at once
// (OverBudget). Cutting (a Budget with Cut), the entry ends where it stopped, its containers
// closed as they end.
//
// An entry that must be delivered rather than dropped is cut down to size by the first of
// these that fits, its caller encoding it:
//
//  1. Values truncated. The entry is encoded within FirstPass's budget, cutScratch × the
//     limit, its long str and bin values stored cut: the j-th value stored cut keeps
//     limit/j + 8 bytes, and a value is stored cut when it is longer than that (see
//     precutLen: no cut below keeps more). If that holds the whole entry, CapEntry cuts it:
//     every str and bin value (map keys excepted) longer than a common length L keeps its
//     first L bytes (whole UTF-8 characters for a str) followed by the marker
//     "…(truncated N bytes)", N being the bytes removed; L is the largest that fits, so the
//     largest values are cut first and short ones are left alone. Types, keys and
//     structure are unchanged; a bin value's marker is appended as bytes. No marshaler runs
//     twice.
//  2. Cut short, when truncating values cannot make it fit (too many of them) or the entry
//     passes cutScratch × the limit. The entry is encoded again within CutShort's budget
//     (its marshalers run again) with every str and bin value longer than limit /
//     CutValueShare cut as in 1, keeping the values in order while they fit: the first that
//     does not (with its key), and everything after it, is left out; the maps and arrays
//     open there end with what they hold; a reflected value is kept whole or left out. Room
//     the caller sets aside (Reserve) is kept for what comes after the fields.
//
// Either way the caller marks the record as truncated.

const (
	// cutScratch is how many times its limit an entry to cut may take, its long values
	// stored cut, for CapEntry to truncate it exactly; past it, the entry is cut short.
	cutScratch = 4
	// CutValueShare is the share of its limit an entry cut short keeps of each str and bin
	// value: at most limit / CutValueShare bytes.
	CutValueShare = 16
	// KeptScratch is the most capacity, in bytes, each scratch buffer keeps from one entry to
	// the next (TrimScratch): a buffer that grew past it for a large entry is dropped after
	// that entry, so what an encoder holds between entries is bounded, whatever it encoded
	// before.
	KeptScratch = 64 << 10
	// firstPassSlack is more than any value asks for beyond what it writes (ContainerRoom,
	// a header's 5 bytes for a shorter one).
	firstPassSlack = 128
	// cutSlack is kept free when cutting short for what closing may add past the budget: a
	// nil for a key a recovered panic left without its value, an array header around the
	// values a user's encoder wrote where one belongs.
	cutSlack = 16
)

// The room a value asks for (Room, before Key or Elem, which do not check it, so that the
// hot path calls nothing more than it would without a budget): a key's header, then its
// value's: a scalar (msgpack's largest is 9 bytes); a map or array's header, or the marker
// that stands for it past MaxDepth; a complex's text. An array's element in a map gets an
// empty key: 1 byte.
const (
	HeaderRoom    = 5 // a key's str header, or any header
	ElemRoom      = 1
	ScalarRoom    = 9
	ContainerRoom = 32
	ComplexRoom   = 3 + 2*24 + 2
)

// ErrNoRoom is a reflected value's error when it does not fit the budget: the value is left
// out, and the field gets no "<key>Error".
var ErrNoRoom = errors.New("fluentcore: value does not fit MaxEntryBytes")

// Budget is what one encoding of an entry may write.
type Budget struct {
	Limit    int  // the most bytes the entry may take; 0: any
	ValueCap int  // str and bin values longer than this are cut; 0: none
	Cut      bool // cutting short: values are cut with their markers, a stop ends the entry where it is
}

// FirstPass is the budget of an entry's first encoding for a writer whose entries are at
// most entryCap bytes: entryCap when a larger entry is dropped, with firstPassSlack more,
// so that the room a value asks for (its largest size) never stops an entry that fits,
// which the writer then checks to the byte; when it is cut (cuts), what CapEntry may cut,
// its long values stored cut.
func FirstPass(entryCap int, cuts bool) Budget {
	if !cuts {
		return Budget{Limit: entryCap + firstPassSlack}
	}
	return Budget{Limit: cutScratch * entryCap, ValueCap: entryCap}
}

// CutShort is the budget of an entry encoded again, cut short to at most limit bytes.
func CutShort(limit int) Budget {
	return Budget{Limit: max(limit-cutSlack, 1), ValueCap: max(limit/CutValueShare, 1), Cut: true}
}

// Owner is the writer of an entry when it holds something for the entry that others wait
// for (a shard's lock).
type Owner interface {
	// OverBudget reports that the entry passed its budget and is abandoned. It is called
	// once, from within the appending call that stopped, before the caller's code (a
	// marshaler walking on) runs again: from then on the Appender writes nothing into the
	// buffer it was given and keeps no reference to the Owner, so the Owner may give up
	// what it holds while the walk goes on.
	OverBudget()
}

// Appender is the buffer one entry is appended to, and the budget it is appended within.
// It is reusable and not safe for concurrent use. Buf is the caller's buffer while an
// entry is appended (Begin); an abandoned entry lets it go (nil).
type Appender struct {
	Buf []byte // the entry's bytes, after what the caller's buffer held

	start     int    // where the entry starts in Buf
	end       int    // the length Buf may grow to; -1 once appending has stopped
	valueCap  int    // str and bin values longer than this are cut
	precutOf  int    // storing values cut for CapEntry: the limit CapEntry will cut to
	cutting   bool   // a stop ends the entry where it is (cut short), not abandons it
	abandoned bool   // the entry passed its limit and was given up: Buf is gone
	owner     Owner  // the entry's, until it is told of a stop
	precut    []span // values stored cut to valueCap, for CapEntry

	scratch []byte // reused for rare rewrites (invalid UTF-8, cut values, msgp.Marshaler output)
	spans   []span // CapEntry: the str and bin values of the entry being cut
}

// NewAppender returns an Appender with no budget.
func NewAppender() Appender {
	return Appender{end: math.MaxInt, valueCap: math.MaxInt}
}

// Begin sets the budget b for an entry that starts at start in Buf, appended for o (nil
// for none), and returns the end of the budget.
func (a *Appender) Begin(start int, b Budget, o Owner) int {
	a.start, a.end, a.valueCap, a.precutOf = start, math.MaxInt, math.MaxInt, 0
	if b.Limit > 0 {
		a.end = start + b.Limit
	}
	if b.ValueCap > 0 {
		a.valueCap = b.ValueCap
		if !b.Cut {
			a.precutOf = b.ValueCap
			a.valueCap = precutLen(b.ValueCap, 1)
		}
	}
	a.cutting, a.abandoned, a.owner = b.Cut, false, o
	a.precut = a.precut[:0]
	return a.end
}

// Reserve sets n bytes of the budget aside: appending stops n bytes earlier, until Restore.
func (a *Appender) Reserve(n int) { a.end -= n }

// Restore ends the budget at end (Begin's) again, after a stop too: room was set aside for
// what comes after it.
func (a *Appender) Restore(end int) { a.end = end }

// Room reports whether n more bytes fit the entry's budget; when they do not, appending
// stops (see stop).
func (a *Appender) Room(n int) bool {
	if len(a.Buf)+n <= a.end {
		return true
	}
	a.stop()
	return false
}

// stop ends the appending of the entry: no later key or value fits. Cutting, the entry ends
// where it is, its containers closed as they end. Otherwise the entry is abandoned: Buf is
// let go, nothing is written or patched any more, and the owner is told, so that what it
// holds need not wait for the rest of the walk, which may be long (a marshaler's million
// fields) and which touches nothing of the owner's.
func (a *Appender) stop() {
	a.end = -1
	if a.cutting || a.abandoned {
		return
	}
	a.abandoned = true
	a.Buf = nil
	if o := a.owner; o != nil {
		a.owner = nil
		o.OverBudget()
	}
}

// Abandoned reports whether the entry passed its budget and was given up (not cutting).
func (a *Appender) Abandoned() bool { return a.abandoned }

// Truncate drops what the entry holds from mark on, unless it was abandoned.
func (a *Appender) Truncate(mark int) {
	if a.abandoned {
		return
	}
	a.Buf = a.Buf[:mark]
	for len(a.precut) > 0 && a.start+a.precut[len(a.precut)-1].off >= mark {
		a.precut = a.precut[:len(a.precut)-1]
	}
}

// movePrecut records that the bytes from at on moved by delta.
func (a *Appender) movePrecut(at, delta int) {
	for i := len(a.precut) - 1; i >= 0 && a.start+a.precut[i].off >= at; i-- {
		a.precut[i].off += delta
	}
}

// Plain reports whether a str or bin value of n bytes is written as it is, taking n bytes
// and a header: not cut, and not cutting (which counts invalid UTF-8's repair exactly).
func (a *Appender) Plain(n int) bool { return n <= a.valueCap && !a.cutting }

// Limits reports where the budget ends in Buf and the longest str or bin value Plain
// accepts (-1 when cutting: none). A caller that checks its values against them appends
// what Room and Plain would let it, without asking them; one that does not fit asks them.
func (a *Appender) Limits() (end, plain int) {
	if a.cutting {
		return a.end, -1
	}
	return a.end, a.valueCap
}

// StrRoom is the most a str value s takes within the budget.
func (a *Appender) StrRoom(s string) int {
	if len(s) <= a.valueCap && !a.cutting {
		return len(s) + 5
	}
	return cutStrRoom(a, s)
}

// StrBytesRoom is StrRoom for a str value held in a []byte.
func (a *Appender) StrBytesRoom(s []byte) int {
	if len(s) <= a.valueCap && !a.cutting {
		return len(s) + 5
	}
	return cutStrRoom(a, s)
}

// PutStr appends s as a str value, cut to the budget's value cap.
func (a *Appender) PutStr(s string) {
	if len(s) <= a.valueCap {
		a.Buf = AppendStr(a.Buf, s)
		return
	}
	putCutStr(a, s)
}

// PutStrBytes is PutStr for a []byte.
func (a *Appender) PutStrBytes(s []byte) {
	if len(s) <= a.valueCap {
		a.Buf = AppendStrBytes(a.Buf, s)
		return
	}
	putCutStr(a, s)
}

// cutStrRoom is StrRoom's slow path: a value to cut, or cutting, where invalid UTF-8 and the
// marker are counted exactly.
func cutStrRoom[S string | []byte](a *Appender, s S) int {
	keep := cutLen(s, a.valueCap)
	n := repairedLen(s[:keep])
	if keep < len(s) && a.cutting {
		n += markerLen(len(s) - keep)
	}
	return n + 5
}

// putCutStr appends s, longer than valueCap, cut: cutting, with its marker; otherwise stored
// cut for CapEntry, which knows its length from precut.
func putCutStr[S string | []byte](a *Appender, s S) {
	keep := cutLen(s, a.valueCap)
	if a.cutting {
		a.scratch = append(a.scratch[:0], s[:keep]...)
		a.scratch = appendMarker(a.scratch, len(s)-keep)
		a.Buf = AppendStrBytes(a.Buf, a.scratch)
		return
	}
	off := len(a.Buf)
	a.scratch = append(a.scratch[:0], s[:keep]...)
	a.Buf = AppendStrBytes(a.Buf, a.scratch)
	a.recordPrecut(off, len(s), false)
}

// BinRoom is the most a bin value of n bytes takes within the budget.
func (a *Appender) BinRoom(n int) int {
	if n <= a.valueCap {
		return n + 5
	}
	if a.cutting {
		return a.valueCap + markerLen(n-a.valueCap) + 5
	}
	return a.valueCap + 5
}

// PutBin appends v as a bin value, cut to the value cap as PutStr cuts a str.
func (a *Appender) PutBin(v []byte) {
	if len(v) <= a.valueCap {
		a.Buf = msgp.AppendBytes(a.Buf, v)
		return
	}
	keep := a.valueCap
	if a.cutting {
		a.Buf = msgp.AppendBytesHeader(a.Buf, uint32(keep+markerLen(len(v)-keep)))
		a.Buf = append(a.Buf, v[:keep]...)
		a.Buf = appendMarker(a.Buf, len(v)-keep)
		return
	}
	off := len(a.Buf)
	a.Buf = msgp.AppendBytes(a.Buf, v[:keep])
	a.recordPrecut(off, len(v), true)
}

// precutLen is how many bytes the j-th value stored cut keeps (from 1), for CapEntry to
// cut to limit. It keeps at least what CapEntry's cut keeps, L: with j values longer than
// limit/j + 8, each keeping L or all of it, less up to 3 bytes for a whole UTF-8 character,
// an L above limit/j + 4 would make them alone longer than limit.
func precutLen(limit, j int) int { return limit/j + 8 }

// recordPrecut records the value just appended at off, stored cut from orig bytes, and
// lowers valueCap for the next one.
func (a *Appender) recordPrecut(off, orig int, bin bool) {
	hdr := 1
	switch a.Buf[off] {
	case wire.Str8, wire.Bin8:
		hdr = 2
	case wire.Str16, wire.Bin8 + 1:
		hdr = 3
	case wire.Str32, wire.Bin8 + 2:
		hdr = 5
	}
	n := len(a.Buf) - off - hdr
	a.precut = append(a.precut, span{off: off - a.start, hdr: hdr, n: n, orig: orig, bin: bin})
	a.valueCap = precutLen(a.precutOf, len(a.precut)+1)
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

// FinishStr turns the bytes appended after a 2-byte placeholder at mark into one msgpack
// str, repairing invalid UTF-8.
func (a *Appender) FinishStr(mark int) {
	body := a.Buf[mark+2:]
	if utf8.Valid(body) {
		a.Buf = msgp.AppendBytesStringTwoPrefixed(a.Buf, len(body))
		return
	}
	a.scratch = append(a.scratch[:0], body...)
	a.Buf = AppendStrBytes(a.Buf[:mark], a.scratch)
}

// putNil appends msgpack nil if it fits the budget.
func (a *Appender) putNil() error {
	if !a.Room(1) {
		return ErrNoRoom
	}
	a.Buf = msgp.AppendNil(a.Buf)
	return nil
}

// TrimScratch drops every scratch buffer that grew past KeptScratch, once an entry is done
// with it.
func (a *Appender) TrimScratch() {
	trim(&a.scratch)
	trim(&a.spans)
	trim(&a.precut)
}

// trim drops *s if its capacity takes more than KeptScratch bytes, and stores nothing
// otherwise.
func trim[T any](s *[]T) {
	if cap(*s)*int(unsafe.Sizeof(*new(T))) > KeptScratch {
		*s = nil
	}
}
