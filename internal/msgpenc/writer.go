package msgpenc

import (
	"encoding/binary"
	"fmt"

	"github.com/fluentcore/fluentcore/internal/wire"
)

// A record nests at most MaxDepth maps and arrays below its own map, however they come:
// ObjectMarshaler, ArrayMarshaler, namespaces (those of Core.With included), reflected
// values and the JSON or msgp output of their marshalers all count towards the same depth.
// A marshaler's map or array that would go deeper is not opened: its place holds the string
// TooDeepMarker, and the encoder's call returns ErrTooDeep, so a marshaler that passes its
// children's errors on gives the field a "<key>Error" too, as zap does for any marshaler
// error. A namespace that would go deeper is not opened either (see OpenNamespace). A
// reflected value that would go deeper is an error, as any reflection error is (see
// Reflector).
// Everything else in the entry is kept, and a marshaler that holds itself stops at the cap.

// MaxDepth is how many maps and arrays a record may nest below its own map. Receivers stop
// decoding at a fixed number of open containers, the entry's array and its record map
// included, and an entry they cannot decode can take the rest of its frame with it:
// fluent-bit at 64 (its msgpack-c build, MSGPACK_EMBED_STACK_SIZE), fluentd at 128
// (msgpack-ruby's unpacker stack). The cap is half the smaller, so the levels a pipeline
// adds on the way (a record wrapped by a filter, Forward mode between relays) still fit.
const MaxDepth = 32

var (
	// TooDeepMarker stands where a map or array would have nested past MaxDepth.
	TooDeepMarker = fmt.Sprintf("<nested deeper than %d levels>", MaxDepth)
	// ErrTooDeep is the error of a value cut at MaxDepth.
	ErrTooDeep = fmt.Errorf("fluentcore: value nested deeper than %d levels (a cycle?)", MaxDepth)
)

// Kind is what an open container will be once closed.
type Kind uint8

// The kinds of container: KindMap and KindArray are a map and an array, their headers
// written as map32 and array32 and patched when they close.
const (
	KindMap   Kind = iota // map32, n counts keys and values
	KindArray             // array32, n counts elements
	// kindSlot is the value position handed to a user encoder func (EncodeTime, ...):
	// no header; one value stays as it is, none gets the caller's fallback, several are
	// wrapped in an array (or flow into a parent array, as zap JSON would write them).
	kindSlot
	// kindRaw is a reflected value being written: the reflection encoder writes its own
	// headers, so nothing is counted here and a slot's several values are wrapped.
	kindRaw
)

// Container is an open msgpack map or array whose header is patched when it closes.
type Container struct {
	off  int // offset of the header in Buf; -1 for a context's headerless root
	n    int // msgpack values written directly inside it
	kind Kind
	// depth is how many maps and arrays below the record's map enclose the values written
	// here, this one included: 0 in the record itself; a slot or raw container has its
	// parent's.
	depth int32
	// nsCut is set once a namespace opened here was cut at the cap (OpenNamespace).
	nsCut bool
}

// Writer writes one msgpack value into its Appender as it comes, its maps and arrays of
// unknown size given a map32/array32 header that is patched when they close. Every value
// is counted in the innermost open container (Key, Elem); nothing is counted or patched
// once the entry is abandoned. It is reusable and not safe for concurrent use.
type Writer struct {
	Appender
	cur   Container   // innermost open container
	stack []Container // containers enclosing cur, outermost first
}

// NewWriter returns a Writer with no budget.
func NewWriter() Writer {
	return Writer{Appender: NewAppender(), stack: make([]Container, 0, 16)}
}

// Start makes a container of kind k whose header is at off in Buf (-1: none) the only open
// one.
func (w *Writer) Start(off int, k Kind) {
	w.stack = w.stack[:0]
	w.cur = Container{off: off, kind: k}
}

// Values is how many msgpack values the current container holds.
func (w *Writer) Values() int { return w.cur.n }

// Key appends a field key and counts the key and its value; the caller has checked that
// they fit the budget (Room).
func (w *Writer) Key(k string) {
	w.Buf = AppendStr(w.Buf, k)
	w.cur.n += 2
}

// Pairs counts n keys and their values appended to Buf by the caller, within the budget.
func (w *Writer) Pairs(n int) { w.cur.n += 2 * n }

// RawKey is Key for a key encoded already.
func (w *Writer) RawKey(k []byte) {
	w.Buf = append(w.Buf, k...)
	w.cur.n += 2
}

// Elem counts one value about to be appended to an array, which the caller has checked
// fits the budget. In a map (reachable only when a marshaler uses its ObjectEncoder as an
// ArrayEncoder) the value gets an empty key, so the record stays a map with str keys.
func (w *Writer) Elem() {
	if w.cur.kind == KindMap {
		w.Buf = append(w.Buf, wire.FixStr)
		w.cur.n++
	}
	w.cur.n++
}

// Open starts a container of kind k inside cur (already counted) and returns the depth to
// pass to CloseTo. Callers opening a map or an array check the cap first (TooDeep).
func (w *Writer) Open(k Kind) int {
	d := len(w.stack)
	w.stack = append(w.stack, w.cur)
	w.cur = Container{off: len(w.Buf), kind: k, depth: w.cur.depth}
	switch k {
	case KindMap:
		w.Buf = append(w.Buf, wire.Map32, 0, 0, 0, 0)
		w.cur.depth++
	case KindArray:
		w.Buf = append(w.Buf, wire.Array32, 0, 0, 0, 0)
		w.cur.depth++
	}
	return d
}

// TooDeep reports whether a map or array opened in cur would nest past MaxDepth, and if so
// writes the marker in its place (the value position is already counted).
func (w *Writer) TooDeep() bool {
	if w.cur.depth < MaxDepth {
		return false
	}
	w.Buf = AppendStr(w.Buf, TooDeepMarker)
	return true
}

// OpenNamespace starts a map under k that stays open until the enclosing container (or
// the entry) ends: zap's ObjectEncoder.OpenNamespace. Past MaxDepth no map is opened, as
// no error can be reported: the first namespace cut in a map is its key and the marker,
// later ones there write nothing (a loop of them would fill the entry with markers), and
// the fields after them stay in that map.
func (w *Writer) OpenNamespace(k string) {
	if w.cur.depth < MaxDepth {
		if w.Room(len(k) + HeaderRoom + ContainerRoom) {
			w.Key(k)
			w.Open(KindMap)
		}
		return
	}
	if !w.cur.nsCut && w.Room(len(k)+HeaderRoom+ContainerRoom) {
		w.Key(k)
		w.cur.nsCut = true
		w.TooDeep()
	}
}

// CloseTo closes containers until the one that was current at depth d is current again.
func (w *Writer) CloseTo(d int) {
	for len(w.stack) > d {
		w.closeContainer()
	}
}

// pop makes the enclosing container current without touching Buf.
func (w *Writer) pop() {
	last := len(w.stack) - 1
	w.cur = w.stack[last]
	w.stack = w.stack[:last]
}

// closeContainer finishes cur and makes its parent current. Every value a marshaler could
// have left half-written (a panic recovered midway) sits in a container or a slot, which
// closing completes, so the output stays valid msgpack.
func (w *Writer) closeContainer() {
	f := w.cur
	w.pop()
	if w.abandoned {
		return // nothing of the entry is kept
	}
	switch f.kind {
	case KindMap:
		w.patchMap(f)
	case KindArray:
		putLen32(w.Buf[f.off:], f.n)
	case kindSlot:
		switch {
		case f.n == 1:
		case f.n == 0: // only for a slot abandoned by a recovered panic
			w.Buf = append(w.Buf, wire.Nil)
		case w.cur.kind == KindArray || w.cur.kind == kindSlot:
			w.cur.n += f.n - 1 // zap JSON writes them as separate elements
		default:
			w.wrapArray(f.off, f.n)
		}
	}
}

// patchMap writes the size of map container f, which must be the last thing in Buf. A key
// left without its value (a panic recovered midway) gets nil, to keep the map whole.
func (w *Writer) patchMap(f Container) {
	if w.abandoned {
		return
	}
	if f.n%2 != 0 {
		w.Buf = append(w.Buf, wire.Nil)
		f.n++
	}
	putLen32(w.Buf[f.off:], f.n/2)
}

// putLen32 patches the length of a map32/array32 header starting at b[0].
func putLen32(b []byte, n int) {
	binary.BigEndian.PutUint32(b[1:5], uint32(n))
}

// wrapArray inserts an array32 header of n elements at off: the slow path for a user
// encoder func that wrote several values where one belongs.
func (w *Writer) wrapArray(off, n int) {
	w.Buf = append(w.Buf, 0, 0, 0, 0, 0)
	copy(w.Buf[off+5:], w.Buf[off:len(w.Buf)-5])
	w.Buf[off] = wire.Array32
	putLen32(w.Buf[off:], n)
	w.movePrecut(off, 5)
}

// OpenSlot hands the next value position, counted already, to a user encoder func (see
// kindSlot) and returns the depth to pass to CloseSlot.
func (w *Writer) OpenSlot() int { return w.Open(kindSlot) }

// CloseSlot ends the slot opened at depth d and reports whether it holds a value; when it
// doesn't, the caller appends its fallback value (already counted).
func (w *Writer) CloseSlot(d int) bool {
	w.CloseTo(d + 1)
	if w.cur.n == 0 {
		w.pop()
		return false
	}
	w.closeContainer()
	return true
}

// EndRecord patches the current container, the record's map, and returns Buf, which the
// Writer lets go.
func (w *Writer) EndRecord() []byte {
	w.patchMap(w.cur)
	out := w.Buf
	w.Buf = nil
	return out
}

// Unclosed returns how many values the outermost container holds, and copies of the
// containers still open inside it, outermost first: what a context encoded ahead of its
// entries leaves open for them (AppendContext).
func (w *Writer) Unclosed() (n int, open []Container) {
	if len(w.stack) == 0 {
		return w.cur.n, nil
	}
	return w.stack[0].n, append(append([]Container(nil), w.stack[1:]...), w.cur)
}

// AppendContext copies buf, encoded ahead as values of the current map (n of them, open
// containers left open, as Unclosed gave them), into Buf and reopens those containers at
// their new offsets.
func (w *Writer) AppendContext(buf []byte, n int, open []Container) {
	base := len(w.Buf)
	w.Buf = append(w.Buf, buf...)
	w.cur.n += n
	for _, f := range open {
		w.stack = append(w.stack, w.cur)
		f.off += base
		w.cur = f
	}
}
