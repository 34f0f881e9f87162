package fluentcore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/fluentcore/fluentcore/internal/wire"
	"github.com/tinylib/msgp/msgp"
	"go.uber.org/zap/zapcore"
)

// This file is the msgpack twin of zap's JSON encoder: same keys, same order, same
// fallbacks, same handling of marshaler errors, but the output is one Forward Entry,
// [EventTime, {record}], appended to the caller's buffer.
//
// Containers whose size is unknown up front get a map32/array32 header that is
// back-patched when they close. Every value is counted in the innermost open container,
// so whatever a marshaler does (fails midway, opens namespaces, uses an
// ObjectEncoder as an ArrayEncoder) the output stays exactly one valid msgpack value.
//
// A record nests at most maxDepth maps and arrays below its own map, however they come:
// ObjectMarshaler, ArrayMarshaler, namespaces (those of Core.With included), reflected
// values and the JSON or msgp output of their marshalers all count towards the same depth.
// A marshaler's map or array that would go deeper is not opened: its place holds the string
// tooDeepMarker, and AddObject, AddArray, AppendObject or AppendArray returns errTooDeep, so
// a marshaler that passes its children's errors on gives the field a "<key>Error" too, as
// zap does for any marshaler error. A namespace that would go deeper is not opened either
// (see OpenNamespace). A reflected value that would go deeper is an error, as any
// reflection error is (see encoder_reflect.go). Everything else in the entry is kept, and a
// marshaler that holds itself stops at the cap.

const (
	// maxEventSec is the largest EventTime second we send: fluent-bit reserves
	// 0xFFFFFFFF and 0xFFFFFFFE as group markers.
	maxEventSec = 0xFFFFFFFD

	// maxDepth is how many maps and arrays a record may nest below its own map. Receivers
	// stop decoding at a fixed number of open containers, the entry's array and its record
	// map included, and an entry they cannot decode can take the rest of its frame with it:
	// fluent-bit at 64 (its msgpack-c build, MSGPACK_EMBED_STACK_SIZE), fluentd at 128
	// (msgpack-ruby's unpacker stack). The cap is half the smaller, so the levels a pipeline
	// adds on the way (a record wrapped by a filter, Forward mode between relays) still fit.
	maxDepth = 32
)

var (
	// tooDeepMarker stands where a map or array would have nested past maxDepth.
	tooDeepMarker = fmt.Sprintf("<nested deeper than %d levels>", maxDepth)
	// errTooDeep is the error of a value cut at maxDepth.
	errTooDeep = fmt.Errorf("fluentcore: value nested deeper than %d levels (a cycle?)", maxDepth)
)

// encoderConfig is a zapcore.EncoderConfig resolved once: the record keys are
// pre-encoded as msgpack str, and zap's own level, name and caller encoders are
// recognised so the hot path can skip the call (and, for callers, zap's allocation).
type encoderConfig struct {
	zc zapcore.EncoderConfig

	// Pre-encoded keys; nil when the part is omitted.
	levelKey, timeKey, nameKey, callerKey, functionKey, messageKey, stacktraceKey []byte
	// truncatedKey marks a record cut down to Config.Transport.MaxEntryBytes (see capEntry).
	truncatedKey []byte

	// levelVals holds the pre-encoded output of a known level encoder for
	// DebugLevel..FatalLevel (index level+1); nil entries mean "call EncodeLevel".
	levelVals [int(zapcore.FatalLevel) + 2][]byte
	caller    callerFormat
	// nameAsIs is true when the logger name is written unchanged (nil or FullNameEncoder).
	nameAsIs bool
	// overflowKey (pre-encoded) and overflowMax are where and how much of a tag name past
	// Tags.Max a record carries (see encodedContext.over): TagOverflowKey and MaxTagBytes,
	// set by resolve.
	overflowKey []byte
	overflowMax int
}

// callerFormat says whether EncodeCaller is one of zap's own, which we format in place.
type callerFormat uint8

const (
	callerCustom callerFormat = iota
	callerShort
	callerFull
)

// funcPC identifies a func value; zap's encoders are top-level funcs, so their code
// pointer is stable.
func funcPC(f any) uintptr { return reflect.ValueOf(f).Pointer() }

func newEncoderConfig(c zapcore.EncoderConfig) *encoderConfig {
	cfg := &encoderConfig{zc: c}
	key := func(k string) []byte {
		if k == zapcore.OmitKey {
			return nil
		}
		return appendStr(nil, k)
	}
	if c.EncodeLevel != nil {
		cfg.levelKey = key(c.LevelKey)
	}
	cfg.timeKey = key(c.TimeKey)
	cfg.nameKey = key(c.NameKey)
	cfg.callerKey = key(c.CallerKey)
	cfg.functionKey = key(c.FunctionKey)
	cfg.messageKey = key(c.MessageKey)
	cfg.stacktraceKey = key(c.StacktraceKey)
	cfg.truncatedKey = appendStr(nil, "truncated")
	if c.MessageKey != zapcore.OmitKey {
		cfg.truncatedKey = appendStr(nil, c.MessageKey+"Truncated")
	}

	if c.EncodeLevel != nil {
		switch funcPC(c.EncodeLevel) {
		case funcPC(zapcore.LowercaseLevelEncoder), funcPC(zapcore.CapitalLevelEncoder),
			funcPC(zapcore.LowercaseColorLevelEncoder), funcPC(zapcore.CapitalColorLevelEncoder):
			// Pure functions of the level: run them once per level now.
			e := newMsgpEncoder(cfg)
			for l := zapcore.DebugLevel; l <= zapcore.FatalLevel; l++ {
				e.buf = e.buf[:0]
				e.cur = container{kind: kindArray}
				c.EncodeLevel(l, e)
				if e.cur.n == 1 {
					cfg.levelVals[l+1] = bytes.Clone(e.buf)
				}
			}
		}
	}
	if c.EncodeCaller != nil {
		switch funcPC(c.EncodeCaller) {
		case funcPC(zapcore.ShortCallerEncoder):
			cfg.caller = callerShort
		case funcPC(zapcore.FullCallerEncoder):
			cfg.caller = callerFull
		}
	}
	cfg.nameAsIs = c.EncodeName == nil || funcPC(c.EncodeName) == funcPC(zapcore.FullNameEncoder)
	return cfg
}

// containerKind is what an open container will be once closed.
type containerKind uint8

const (
	kindMap   containerKind = iota // map32, n counts keys and values
	kindArray                      // array32, n counts elements
	// kindSlot is the value position handed to a user encoder func (EncodeTime, ...):
	// no header; one value stays as it is, none gets the caller's fallback, several are
	// wrapped in an array (or flow into a parent array, as zap JSON would write them).
	kindSlot
	// kindRaw is a reflected value being written: the reflection encoder writes its own
	// headers, so nothing is counted here and a slot's several values are wrapped.
	kindRaw
)

// container is an open msgpack map or array whose header is patched when it closes.
type container struct {
	off  int // offset of the header in buf; -1 for a context's headerless root
	n    int // msgpack values written directly inside it
	kind containerKind
	// depth is how many maps and arrays below the record's map enclose the values written
	// here, this one included: 0 in the record itself; a slot or raw container has its
	// parent's.
	depth int32
	// nsCut is set once a namespace opened here was cut at the cap (OpenNamespace).
	nsCut bool
}

// encodedContext holds fields added with Core.With, encoded once; immutable after
// construction and safe to share between goroutines. nil means "no context".
type encodedContext struct {
	buf []byte // the fields, ready to copy after the entry's own leading keys
	n   int    // values buf adds to the record map itself
	// open are the containers (namespaces) still open at the end of buf, outermost first,
	// with offsets relative to buf; each entry patches their headers in its own copy.
	open []container
	// over is the tag name a logger asked for past Tags.Max (its Tag option's), and
	// overName says that name is the entry's logger name (Tags.FromName): either is written
	// under TagOverflowKey in the record itself, after every other field, so that a
	// receiver finds it whatever the encoder config, and one that keeps the last of a
	// repeated key (fluentd) keeps it over a user's field of that key. Not inherited by
	// newContext.
	over     string
	overName bool
}

// overflowing returns c with the tag name past Tags.Max to write: name, or the entry's
// logger name if name is "". c may be nil (no fields).
func (c *encodedContext) overflowing(name string) *encodedContext {
	o := &encodedContext{}
	if c != nil {
		*o = *c
	}
	o.over, o.overName = name, name == ""
	return o
}

// newContext returns parent's fields followed by fields, pre-encoded. parent may be nil.
// Namespaces opened in a context stay open for later With calls and the entry's own
// fields, and are closed at the end of each entry (zap semantics).
func (c *encoderConfig) newContext(parent *encodedContext, fields []zapcore.Field) *encodedContext {
	if len(fields) == 0 {
		return parent
	}
	e := newMsgpEncoder(c)
	e.cur = container{off: -1, kind: kindMap}
	if parent != nil {
		e.buf = make([]byte, 0, len(parent.buf)+64*len(fields))
		e.appendContext(parent)
	}
	for i := range fields {
		fields[i].AddTo(e)
	}
	ctx := &encodedContext{buf: slices.Clip(e.buf), n: e.cur.n}
	if len(e.stack) > 0 {
		ctx.n = e.stack[0].n
		ctx.open = append(append([]container(nil), e.stack[1:]...), e.cur)
	}
	return ctx
}

// msgpEncoder is reusable and NOT safe for concurrent use (the sink keeps one per shard,
// used under the shard's lock). It implements zapcore.ObjectEncoder and
// zapcore.ArrayEncoder; field values are appended to buf as they come.
type msgpEncoder struct {
	cfg   *encoderConfig
	buf   []byte
	cur   container   // innermost open container
	stack []container // containers enclosing cur, outermost first

	scratch []byte // reused for rare rewrites (invalid UTF-8, msgp.Marshaler output)

	// Reflection scratch, reused: sorted map entries (nested maps use the tail), unescaped
	// JSON strings, and the user's ReflectedEncoder with its output.
	mapKVs     []mapKV
	anyKVs     []anyKV
	strKVs     [][2]string
	jsonStr    []byte
	reflectBuf bytes.Buffer
	reflectEnc zapcore.ReflectedEncoder

	capSpans []capSpan // entry size cap: the str and bin values of the entry being cut
	capOut   []byte    // and the cut entry

	// The budget of the entry being encoded (see encoder_cap.go).
	start     int       // where the entry starts in buf
	end       int       // the length buf may grow to; -1 once appending has stopped
	valueCap  int       // str and bin values longer than this are cut
	precutOf  int       // storing values cut for capEntry: the limit capEntry will cut to
	cutting   bool      // a stop ends the entry where it is (cut short), not abandons it
	abandoned bool      // the entry passed its limit and was given up: buf is gone
	released  bool      // and the encoder gave its shard up (release)
	release   func()    // while the encoder is a shard's: gives the shard up (stop)
	precut    []capSpan // values stored cut to valueCap, for capEntry

	// The info stream's encoders with Degrade.WeightKey: the key, pre-encoded, and the
	// weight of an entry, written after the entry's head; unweigh gives a weight back, and
	// weighed is the last entry's.
	weightKey []byte
	weigh     func(level zapcore.Level, tag uint16, msg string) uint32
	unweigh   func(level zapcore.Level, tag uint16, msg string, w uint32)
	weighed   uint32
	tag       uint16 // the logger tag of the entry being encoded, for weigh (its write sets it)
}

var (
	_ zapcore.ObjectEncoder = (*msgpEncoder)(nil)
	_ zapcore.ArrayEncoder  = (*msgpEncoder)(nil)
)

func newMsgpEncoder(cfg *encoderConfig) *msgpEncoder {
	return &msgpEncoder{cfg: cfg, stack: make([]container, 0, 16), end: math.MaxInt, valueCap: math.MaxInt}
}

// fork returns a new encoder for what e is for: its configuration, weights and shard.
func (e *msgpEncoder) fork() *msgpEncoder {
	f := newMsgpEncoder(e.cfg)
	f.weightKey, f.weigh, f.unweigh, f.release = e.weightKey, e.weigh, e.unweigh, e.release
	return f
}

// discard is called when the entry just encoded is not kept after all (it did not fit, or
// failed to encode): the entries its weight stood for besides itself pass back to its key,
// so that the next kept entry carries them and the weights still add up to what was logged.
func (e *msgpEncoder) discard(ent *zapcore.Entry) {
	if e.weighed > 1 {
		e.unweigh(ent.Level, e.tag, ent.Message, e.weighed-1)
	}
	e.weighed = 0
}

// eventTimeOf clamps t into what EventTime can carry.
func eventTimeOf(t time.Time) (sec, nsec uint32) {
	s := t.Unix()
	switch {
	case s < 0:
		return 0, 0
	case s > maxEventSec:
		return maxEventSec, 999999999
	}
	return uint32(s), uint32(t.Nanosecond())
}

// appendEntry appends one Forward Entry, [EventTime(ent.Time), {record}], to dst and returns
// the extended slice, whatever its size. It must not retain dst. It never fails: encoder
// errors become fields.
func (e *msgpEncoder) appendEntry(dst []byte, ctx *encodedContext, ent *zapcore.Entry, fields []zapcore.Field) []byte {
	return e.encodeEntry(dst, ctx, ent, fields, budget{})
}

// encodeEntry is appendEntry within budget b (encoder_cap.go). An entry that passes b's
// limit is abandoned (nil, and e.abandoned), or, cutting, ends where it stopped.
func (e *msgpEncoder) encodeEntry(dst []byte, ctx *encodedContext, ent *zapcore.Entry, fields []zapcore.Field, b budget) []byte {
	sec, nsec := eventTimeOf(ent.Time)
	end := e.begin(len(dst), b)
	dst = append(dst, wire.Array2)
	dst = wire.AppendEventTime(dst, sec, nsec)
	e.stack = e.stack[:0]
	e.cur = container{off: len(dst), kind: kindMap}
	e.buf = append(dst, wire.Map32, 0, 0, 0, 0)
	stack := ent.Stack != "" && e.cfg.stacktraceKey != nil
	if b.cut {
		// The stacktrace and the mark come after the fields, in room kept for them.
		e.end -= len(e.cfg.truncatedKey) + 1
		if stack {
			e.end -= len(e.cfg.stacktraceKey) + e.strRoom(ent.Stack)
		}
	}

	e.appendEntryHead(ent)
	if e.weigh != nil {
		// The level and message, not the entry: handing its pointer to a function value
		// would move every entry to the heap, and a logging call allocates nothing.
		e.weighed = e.weigh(ent.Level, e.tag, ent.Message)
		if e.room(len(e.weightKey) + 5) {
			e.buf = append(e.buf, e.weightKey...)
			e.buf = msgp.AppendUint32(e.buf, e.weighed)
			e.cur.n += 2
		}
	}
	if ctx != nil && e.room(len(ctx.buf)) {
		e.appendContext(ctx)
	}
	for i := range fields {
		fields[i].AddTo(e)
	}
	e.closeTo(0) // namespaces end before the stacktrace, as in zap
	if ctx != nil && (ctx.over != "" || ctx.overName) {
		e.appendOverflowName(ctx, ent)
	}
	if b.cut {
		e.end = end // the room kept
	}
	if stack && e.room(len(e.cfg.stacktraceKey)+e.strRoom(ent.Stack)) {
		e.buf = append(e.buf, e.cfg.stacktraceKey...)
		e.putStr(ent.Stack)
		e.cur.n += 2
	}
	if b.cut {
		e.buf = append(e.buf, e.cfg.truncatedKey...)
		e.buf = append(e.buf, wire.True)
		e.cur.n += 2
	}
	e.patchMap(e.cur)

	out := e.buf
	e.buf = nil
	return out
}

// appendOverflowName writes the tag name past Tags.Max that ctx carries (see
// encodedContext.over) under overflowKey (TagOverflowKey), in the record's map; its first
// overflowMax (MaxTagBytes) bytes, so that a name too long for a tag does not make its
// entry too large.
func (e *msgpEncoder) appendOverflowName(ctx *encodedContext, ent *zapcore.Entry) {
	name := ctx.over
	if ctx.overName {
		name = ent.LoggerName
	}
	name = name[:min(len(name), e.cfg.overflowMax)]
	if name != "" && e.room(len(e.cfg.overflowKey)+e.strRoom(name)) {
		e.buf = append(e.buf, e.cfg.overflowKey...)
		e.cur.n += 2
		e.putStr(name)
	}
}

// encodeSafely encodes the entry within b and reports false if a marshaler panicked, so a
// panic can never leave a shard locked or a batch holding half an entry.
func encodeSafely(enc *msgpEncoder, dst []byte, ctx *encodedContext, ent *zapcore.Entry, fields []zapcore.Field, b budget) (out []byte, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false // encodeEntry resets the encoder's state at its start
		}
	}()
	return enc.encodeEntry(dst, ctx, ent, fields, b), true
}

// appendEntryHead writes level, time, name, caller, function and message, each with
// zap's fallback when the configured encoder writes nothing. Each part is written only if
// its key and value fit the budget; the room asked for a value written by a user's encoder
// is the fallback's, which the slot's own values ask for again.
func (e *msgpEncoder) appendEntryHead(ent *zapcore.Entry) {
	c := e.cfg
	if c.levelKey != nil && e.room(len(c.levelKey)+16) {
		e.buf = append(e.buf, c.levelKey...)
		e.cur.n += 2
		if l := int(ent.Level) + 1; l >= 0 && l < len(c.levelVals) && c.levelVals[l] != nil {
			e.buf = append(e.buf, c.levelVals[l]...)
		} else {
			d := e.openSlot()
			c.zc.EncodeLevel(ent.Level, e)
			if !e.closeSlot(d) {
				e.buf = appendStr(e.buf, ent.Level.String())
			}
		}
	}
	if c.timeKey != nil && !ent.Time.IsZero() && e.room(len(c.timeKey)+9) {
		e.buf = append(e.buf, c.timeKey...)
		e.cur.n += 2
		e.appendTime(ent.Time)
	}
	if ent.LoggerName != "" && c.nameKey != nil && e.room(len(c.nameKey)+e.strRoom(ent.LoggerName)) {
		e.buf = append(e.buf, c.nameKey...)
		e.cur.n += 2
		if c.nameAsIs {
			e.putStr(ent.LoggerName)
		} else {
			d := e.openSlot()
			c.zc.EncodeName(ent.LoggerName, e)
			if !e.closeSlot(d) {
				e.putStr(ent.LoggerName)
			}
		}
	}
	if ent.Caller.Defined {
		// The caller's file and line, or its String: at most the file, a colon and 20 digits.
		if c.callerKey != nil && e.room(len(c.callerKey)+len(ent.Caller.File)+26) {
			e.buf = append(e.buf, c.callerKey...)
			e.cur.n += 2
			e.appendCaller(ent.Caller)
		}
		if c.functionKey != nil && e.room(len(c.functionKey)+e.strRoom(ent.Caller.Function)) {
			e.buf = append(e.buf, c.functionKey...)
			if e.plain(len(ent.Caller.Function)) {
				e.buf = appendStr(e.buf, ent.Caller.Function)
			} else {
				e.putStr(ent.Caller.Function)
			}
			e.cur.n += 2
		}
	}
	if c.messageKey != nil && e.room(len(c.messageKey)+e.strRoom(ent.Message)) {
		e.buf = append(e.buf, c.messageKey...)
		if e.plain(len(ent.Message)) { // putStr's common case, without its call
			e.buf = appendStr(e.buf, ent.Message)
		} else {
			e.putStr(ent.Message)
		}
		e.cur.n += 2
	}
}

// appendCaller writes the caller value. zap's Short/FullCallerEncoder build a string
// first; we write the same text straight into buf. A nil EncodeCaller (a panic in zap)
// falls back like an encoder that writes nothing.
func (e *msgpEncoder) appendCaller(ec zapcore.EntryCaller) {
	switch e.cfg.caller {
	case callerShort, callerFull:
		path := ec.File
		if e.cfg.caller == callerShort {
			// Keep the leaf directory and the file name, like EntryCaller.TrimmedPath.
			if i := strings.LastIndexByte(path, '/'); i >= 0 {
				if j := strings.LastIndexByte(path[:i], '/'); j >= 0 {
					path = path[j+1:]
				}
			}
		}
		mark := len(e.buf)
		e.buf = append(e.buf, 0, 0)
		e.buf = append(e.buf, path...)
		e.buf = append(e.buf, ':')
		e.buf = strconv.AppendInt(e.buf, int64(ec.Line), 10)
		e.finishStr(mark)
		return
	}
	if enc := e.cfg.zc.EncodeCaller; enc != nil {
		d := e.openSlot()
		enc(ec, e)
		if e.closeSlot(d) {
			return
		}
	}
	e.buf = appendStr(e.buf, ec.String())
}

// appendContext copies a pre-encoded context into the current map and reopens the
// containers it left open, at their new offsets.
func (e *msgpEncoder) appendContext(c *encodedContext) {
	base := len(e.buf)
	e.buf = append(e.buf, c.buf...)
	e.cur.n += c.n
	for _, f := range c.open {
		e.stack = append(e.stack, e.cur)
		f.off += base
		e.cur = f
	}
}

// open starts a container of kind k inside cur (already counted) and returns the depth
// to pass to closeTo. Callers opening a map or an array check the cap first (tooDeep).
func (e *msgpEncoder) open(k containerKind) int {
	d := len(e.stack)
	e.stack = append(e.stack, e.cur)
	e.cur = container{off: len(e.buf), kind: k, depth: e.cur.depth}
	switch k {
	case kindMap:
		e.buf = append(e.buf, wire.Map32, 0, 0, 0, 0)
		e.cur.depth++
	case kindArray:
		e.buf = append(e.buf, wire.Array32, 0, 0, 0, 0)
		e.cur.depth++
	}
	return d
}

// tooDeep reports whether a map or array opened in cur would nest past maxDepth, and if so
// writes the marker in its place (the value position is already counted).
func (e *msgpEncoder) tooDeep() bool {
	if e.cur.depth < maxDepth {
		return false
	}
	e.buf = appendStr(e.buf, tooDeepMarker)
	return true
}

// closeTo closes containers until the one that was current at depth d is current again.
func (e *msgpEncoder) closeTo(d int) {
	for len(e.stack) > d {
		e.closeContainer()
	}
}

// pop makes the enclosing container current without touching buf.
func (e *msgpEncoder) pop() {
	last := len(e.stack) - 1
	e.cur = e.stack[last]
	e.stack = e.stack[:last]
}

// closeContainer finishes cur and makes its parent current.
func (e *msgpEncoder) closeContainer() {
	f := e.cur
	e.pop()
	if e.abandoned {
		return // nothing of the entry is kept
	}
	switch f.kind {
	case kindMap:
		e.patchMap(f)
	case kindArray:
		putLen32(e.buf[f.off:], f.n)
	case kindSlot:
		switch {
		case f.n == 1:
		case f.n == 0: // only for a slot abandoned by a recovered panic
			e.buf = append(e.buf, wire.Nil)
		case e.cur.kind == kindArray || e.cur.kind == kindSlot:
			e.cur.n += f.n - 1 // zap JSON writes them as separate elements
		default:
			e.wrapArray(f.off, f.n)
		}
	}
}

// patchMap writes the size of map container f, which must be the last thing in buf. A key
// left without its value (a panic recovered midway) gets nil, to keep the map whole.
func (e *msgpEncoder) patchMap(f container) {
	if e.abandoned {
		return
	}
	if f.n%2 != 0 {
		e.buf = append(e.buf, wire.Nil)
		f.n++
	}
	putLen32(e.buf[f.off:], f.n/2)
}

// putLen32 patches the length of a map32/array32 header starting at b[0].
func putLen32(b []byte, n int) {
	binary.BigEndian.PutUint32(b[1:5], uint32(n))
}

// wrapArray inserts an array32 header of n elements at off: the slow path for a user
// encoder func that wrote several values where one belongs.
func (e *msgpEncoder) wrapArray(off, n int) {
	e.buf = append(e.buf, 0, 0, 0, 0, 0)
	copy(e.buf[off+5:], e.buf[off:len(e.buf)-5])
	e.buf[off] = wire.Array32
	putLen32(e.buf[off:], n)
	e.movePrecut(off, 5)
}

// openSlot hands the next value position to a user encoder func; see kindSlot.
func (e *msgpEncoder) openSlot() int { return e.open(kindSlot) }

// closeSlot ends the slot opened at depth d and reports whether it holds a value; when it
// doesn't, the caller appends its fallback value (already counted).
func (e *msgpEncoder) closeSlot(d int) bool {
	e.closeTo(d + 1)
	if e.cur.n == 0 {
		e.pop()
		return false
	}
	e.closeContainer()
	return true
}

// elem counts one value about to be appended by an Append* method, which has checked that
// it fits the budget. In a map (reachable only when a marshaler uses its
// ObjectEncoder as an ArrayEncoder) the value gets an empty key, so the record stays a map
// with str keys.
func (e *msgpEncoder) elem() {
	if e.cur.kind == kindMap {
		e.buf = append(e.buf, wire.FixStr)
		e.cur.n++
	}
	e.cur.n++
}

// key appends a field key and counts the key and its value; the Add* method has checked
// that they fit the budget.
func (e *msgpEncoder) key(k string) {
	e.buf = appendStr(e.buf, k)
	e.cur.n += 2
}

// The room an Add* or Append* method asks for (room, before key or elem, which do not check
// it, so that the hot path calls nothing more than it would without a budget): a key's
// header, then its value's: a scalar (msgpack's largest is 9 bytes); a map or array's
// header, or the marker that stands for it past maxDepth; a complex's text. A time or
// duration asks for the int64 fallback's; a user's encoder writes its values through the
// Append* calls, which ask again. An array's element in a map gets an empty key: 1 byte.
const (
	headerRoom    = 5 // a key's str header, or any header
	elemRoom      = 1
	scalarRoom    = 9
	containerRoom = 32
	complexRoom   = 3 + 2*24 + 2
)

// finishStr turns the bytes written after a 2-byte placeholder at mark into one msgpack
// str, repairing invalid UTF-8.
func (e *msgpEncoder) finishStr(mark int) {
	body := e.buf[mark+2:]
	if utf8.Valid(body) {
		e.buf = msgp.AppendBytesStringTwoPrefixed(e.buf, len(body))
		return
	}
	e.scratch = append(e.scratch[:0], body...)
	e.buf = appendStrBytes(e.buf[:mark], e.scratch)
}

// appendTime writes t through EncodeTime, falling back to Unix nanoseconds like zap.
func (e *msgpEncoder) appendTime(t time.Time) {
	if enc := e.cfg.zc.EncodeTime; enc != nil {
		d := e.openSlot()
		enc(t, e)
		if e.closeSlot(d) {
			return
		}
	}
	e.buf = msgp.AppendInt64(e.buf, t.UnixNano())
}

// appendDuration writes d through EncodeDuration, falling back to nanoseconds like zap.
func (e *msgpEncoder) appendDuration(d time.Duration) {
	if enc := e.cfg.zc.EncodeDuration; enc != nil {
		s := e.openSlot()
		enc(d, e)
		if e.closeSlot(s) {
			return
		}
	}
	e.buf = msgp.AppendInt64(e.buf, int64(d))
}

// appendObject writes obj as a map; namespaces it opens end with it, as in zap. Past
// maxDepth it writes the marker instead and returns errTooDeep without calling obj. A marshaler
// that panics is an error ("PANIC=..."), as a panicking Stringer is in zap: the field gets a
// "<key>Error" and the entry is kept. What it wrote before the panic stays, closed.
func (e *msgpEncoder) appendObject(obj zapcore.ObjectMarshaler) (err error) {
	if e.tooDeep() {
		return errTooDeep
	}
	d := e.open(kindMap)
	defer e.closeAfterPanic(d, &err)
	return obj.MarshalLogObject(e)
}

// appendArray writes arr as an array; a panic and the cap are handled as in appendObject.
func (e *msgpEncoder) appendArray(arr zapcore.ArrayMarshaler) (err error) {
	if e.tooDeep() {
		return errTooDeep
	}
	d := e.open(kindArray)
	defer e.closeAfterPanic(d, &err)
	return arr.MarshalLogArray(e)
}

// closeAfterPanic, deferred, closes the containers opened since depth d and turns a panic
// into *err. Every value a marshaler could have left half-written sits in a container or a
// slot, which closing completes (see closeContainer), so the output stays valid msgpack.
func (e *msgpEncoder) closeAfterPanic(d int, err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("PANIC=%v", r)
	}
	e.closeTo(d)
}

// appendComplex writes c as zap's JSON encoder does: a "re+imi" string, never msgp's
// complex extension.
func (e *msgpEncoder) appendComplex(c complex128, bits int) {
	r, i := real(c), imag(c)
	mark := len(e.buf)
	e.buf = append(e.buf, 0, 0)
	e.buf = strconv.AppendFloat(e.buf, r, 'f', -1, bits)
	if i >= 0 {
		e.buf = append(e.buf, '+')
	}
	e.buf = strconv.AppendFloat(e.buf, i, 'f', -1, bits)
	e.buf = append(e.buf, 'i')
	e.buf = msgp.AppendBytesStringTwoPrefixed(e.buf, len(e.buf)-mark-2)
}

// ObjectEncoder. Each method writes its key and value only if they fit the entry's budget;
// past it they return at once (a marshaler's AddObject and AddArray without calling it).

func (e *msgpEncoder) AddArray(k string, arr zapcore.ArrayMarshaler) error {
	if !e.room(len(k) + headerRoom + containerRoom) {
		return nil
	}
	e.key(k)
	return e.appendArray(arr)
}

func (e *msgpEncoder) AddObject(k string, obj zapcore.ObjectMarshaler) error {
	if !e.room(len(k) + headerRoom + containerRoom) {
		return nil
	}
	e.key(k)
	return e.appendObject(obj)
}

// AddBinary writes msgpack bin (zap JSON writes base64, which JSON needs and we don't).
func (e *msgpEncoder) AddBinary(k string, v []byte) {
	if e.plain(len(v)) {
		if e.room(len(k) + len(v) + 2*headerRoom) {
			e.key(k)
			e.buf = msgp.AppendBytes(e.buf, v)
		}
		return
	}
	if e.room(len(k) + headerRoom + e.binRoom(len(v))) {
		e.key(k)
		e.putBin(v)
	}
}

func (e *msgpEncoder) AddByteString(k string, v []byte) {
	if e.plain(len(v)) {
		if e.room(len(k) + len(v) + 2*headerRoom) {
			e.key(k)
			e.buf = appendStrBytes(e.buf, v)
		}
		return
	}
	if e.room(len(k) + headerRoom + e.strBytesRoom(v)) {
		e.key(k)
		e.putStrBytes(v)
	}
}

func (e *msgpEncoder) AddBool(k string, v bool) {
	if e.room(len(k) + headerRoom + 1) {
		e.key(k)
		e.buf = msgp.AppendBool(e.buf, v)
	}
}

func (e *msgpEncoder) AddComplex128(k string, v complex128) {
	if e.room(len(k) + headerRoom + complexRoom) {
		e.key(k)
		e.appendComplex(v, 64)
	}
}

func (e *msgpEncoder) AddComplex64(k string, v complex64) {
	if e.room(len(k) + headerRoom + complexRoom) {
		e.key(k)
		e.appendComplex(complex128(v), 32)
	}
}

func (e *msgpEncoder) AddDuration(k string, v time.Duration) {
	if e.room(len(k) + headerRoom + scalarRoom) {
		e.key(k)
		e.appendDuration(v)
	}
}

func (e *msgpEncoder) AddFloat64(k string, v float64) {
	if e.room(len(k) + headerRoom + scalarRoom) {
		e.key(k)
		e.buf = appendFloat64(e.buf, v)
	}
}

func (e *msgpEncoder) AddFloat32(k string, v float32) {
	if e.room(len(k) + headerRoom + scalarRoom) {
		e.key(k)
		e.buf = appendFloat32(e.buf, v)
	}
}

func (e *msgpEncoder) AddInt64(k string, v int64) {
	if e.room(len(k) + headerRoom + scalarRoom) {
		e.key(k)
		e.buf = msgp.AppendInt64(e.buf, v)
	}
}

func (e *msgpEncoder) AddUint64(k string, v uint64) {
	if e.room(len(k) + headerRoom + scalarRoom) {
		e.key(k)
		e.buf = msgp.AppendUint64(e.buf, v)
	}
}

func (e *msgpEncoder) AddString(k, v string) {
	if e.plain(len(v)) {
		if e.room(len(k) + len(v) + 2*headerRoom) {
			e.key(k)
			e.buf = appendStr(e.buf, v)
		}
		return
	}
	if e.room(len(k) + headerRoom + e.strRoom(v)) {
		e.key(k)
		e.putStr(v)
	}
}

func (e *msgpEncoder) AddTime(k string, v time.Time) {
	if e.room(len(k) + headerRoom + scalarRoom) {
		e.key(k)
		e.appendTime(v)
	}
}

// AddReflected writes nothing, key included, when the value can't be encoded; zap's
// Field.AddTo then adds "<key>Error". A value that does not fit the budget is no error.
func (e *msgpEncoder) AddReflected(k string, v any) error {
	if !e.room(len(k) + headerRoom + 1) {
		return nil
	}
	mark := len(e.buf)
	e.buf = appendStr(e.buf, k)
	if err := e.appendReflected(v); err != nil {
		e.truncate(mark)
		if errors.Is(err, errNoRoom) {
			return nil
		}
		return err
	}
	e.cur.n += 2
	return nil
}

// OpenNamespace starts a map that stays open until the enclosing object (or the entry)
// ends. Past maxDepth no map is opened, as it cannot report an error: the first namespace
// cut in a map is its key and the marker, later ones there write nothing (a loop of them
// would fill the entry with markers), and the fields after them stay in that map.
func (e *msgpEncoder) OpenNamespace(k string) {
	if e.cur.depth < maxDepth {
		if e.room(len(k) + headerRoom + containerRoom) {
			e.key(k)
			e.open(kindMap)
		}
		return
	}
	if !e.cur.nsCut && e.room(len(k)+headerRoom+containerRoom) {
		e.key(k)
		e.cur.nsCut = true
		e.tooDeep()
	}
}

func (e *msgpEncoder) AddInt(k string, v int)         { e.AddInt64(k, int64(v)) }
func (e *msgpEncoder) AddInt32(k string, v int32)     { e.AddInt64(k, int64(v)) }
func (e *msgpEncoder) AddInt16(k string, v int16)     { e.AddInt64(k, int64(v)) }
func (e *msgpEncoder) AddInt8(k string, v int8)       { e.AddInt64(k, int64(v)) }
func (e *msgpEncoder) AddUint(k string, v uint)       { e.AddUint64(k, uint64(v)) }
func (e *msgpEncoder) AddUint32(k string, v uint32)   { e.AddUint64(k, uint64(v)) }
func (e *msgpEncoder) AddUint16(k string, v uint16)   { e.AddUint64(k, uint64(v)) }
func (e *msgpEncoder) AddUint8(k string, v uint8)     { e.AddUint64(k, uint64(v)) }
func (e *msgpEncoder) AddUintptr(k string, v uintptr) { e.AddUint64(k, uint64(v)) }

// ArrayEncoder, within the budget as the ObjectEncoder.

func (e *msgpEncoder) AppendArray(arr zapcore.ArrayMarshaler) error {
	if !e.room(elemRoom + containerRoom) {
		return nil
	}
	e.elem()
	return e.appendArray(arr)
}

func (e *msgpEncoder) AppendObject(obj zapcore.ObjectMarshaler) error {
	if !e.room(elemRoom + containerRoom) {
		return nil
	}
	e.elem()
	return e.appendObject(obj)
}

func (e *msgpEncoder) AppendBool(v bool) {
	if e.room(elemRoom + 1) {
		e.elem()
		e.buf = msgp.AppendBool(e.buf, v)
	}
}

func (e *msgpEncoder) AppendByteString(v []byte) {
	if e.room(elemRoom + e.strBytesRoom(v)) {
		e.elem()
		if e.plain(len(v)) {
			e.buf = appendStrBytes(e.buf, v)
		} else {
			e.putStrBytes(v)
		}
	}
}

func (e *msgpEncoder) AppendComplex128(v complex128) {
	if e.room(elemRoom + complexRoom) {
		e.elem()
		e.appendComplex(v, 64)
	}
}

func (e *msgpEncoder) AppendComplex64(v complex64) {
	if e.room(elemRoom + complexRoom) {
		e.elem()
		e.appendComplex(complex128(v), 32)
	}
}

func (e *msgpEncoder) AppendDuration(v time.Duration) {
	if e.room(elemRoom + scalarRoom) {
		e.elem()
		e.appendDuration(v)
	}
}

func (e *msgpEncoder) AppendFloat64(v float64) {
	if e.room(elemRoom + scalarRoom) {
		e.elem()
		e.buf = appendFloat64(e.buf, v)
	}
}

func (e *msgpEncoder) AppendFloat32(v float32) {
	if e.room(elemRoom + scalarRoom) {
		e.elem()
		e.buf = appendFloat32(e.buf, v)
	}
}

func (e *msgpEncoder) AppendInt64(v int64) {
	if e.room(elemRoom + scalarRoom) {
		e.elem()
		e.buf = msgp.AppendInt64(e.buf, v)
	}
}

func (e *msgpEncoder) AppendUint64(v uint64) {
	if e.room(elemRoom + scalarRoom) {
		e.elem()
		e.buf = msgp.AppendUint64(e.buf, v)
	}
}

func (e *msgpEncoder) AppendString(v string) {
	if e.room(elemRoom + e.strRoom(v)) {
		e.elem()
		if e.plain(len(v)) {
			e.buf = appendStr(e.buf, v)
		} else {
			e.putStr(v)
		}
	}
}

func (e *msgpEncoder) AppendTime(v time.Time) {
	if e.room(elemRoom + scalarRoom) {
		e.elem()
		e.appendTime(v)
	}
}

// AppendTimeLayout lets zap's layout-based time encoders (ISO8601, RFC3339, ...) format
// straight into buf instead of building a string.
func (e *msgpEncoder) AppendTimeLayout(t time.Time, layout string) {
	// A layout's text is at most about twice as long as the layout (month names for
	// "Jan"), and time's Format writes the year in up to 10 digits.
	if !e.room(elemRoom + headerRoom + 2*len(layout) + 16) {
		return
	}
	e.elem()
	mark := len(e.buf)
	e.buf = append(e.buf, 0, 0)
	e.buf = t.AppendFormat(e.buf, layout)
	e.finishStr(mark)
}

// AppendReflected appends nothing when the value can't be encoded (zap's behaviour), or
// does not fit the budget.
func (e *msgpEncoder) AppendReflected(v any) error {
	mark, n := len(e.buf), e.cur.n
	if !e.room(elemRoom + 1) {
		return nil
	}
	e.elem()
	err := e.appendReflected(v)
	if err != nil {
		e.truncate(mark)
		e.cur.n = n
		if errors.Is(err, errNoRoom) {
			return nil
		}
	}
	return err
}

func (e *msgpEncoder) AppendInt(v int)         { e.AppendInt64(int64(v)) }
func (e *msgpEncoder) AppendInt32(v int32)     { e.AppendInt64(int64(v)) }
func (e *msgpEncoder) AppendInt16(v int16)     { e.AppendInt64(int64(v)) }
func (e *msgpEncoder) AppendInt8(v int8)       { e.AppendInt64(int64(v)) }
func (e *msgpEncoder) AppendUint(v uint)       { e.AppendUint64(uint64(v)) }
func (e *msgpEncoder) AppendUint32(v uint32)   { e.AppendUint64(uint64(v)) }
func (e *msgpEncoder) AppendUint16(v uint16)   { e.AppendUint64(uint64(v)) }
func (e *msgpEncoder) AppendUint8(v uint8)     { e.AppendUint64(uint64(v)) }
func (e *msgpEncoder) AppendUintptr(v uintptr) { e.AppendUint64(uint64(v)) }

// Primitive appenders.

// appendFloat64 writes non-finite values as the strings zap writes: fluentd's JSON
// outputs reject NaN and infinities.
func appendFloat64(dst []byte, f float64) []byte {
	if f-f == 0 { // finite
		return msgp.AppendFloat64(dst, f)
	}
	return appendNonFinite(dst, f)
}

func appendFloat32(dst []byte, f float32) []byte {
	if f-f == 0 {
		return msgp.AppendFloat32(dst, f)
	}
	return appendNonFinite(dst, float64(f))
}

func appendNonFinite(dst []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return msgp.AppendString(dst, "NaN")
	case f > 0:
		return msgp.AppendString(dst, "+Inf")
	}
	return msgp.AppendString(dst, "-Inf")
}

// appendStr appends s as msgpack str; invalid UTF-8 bytes become U+FFFD, one per byte,
// as zap's JSON encoder does. Fast path: copy, then check the copy is ASCII (most keys
// and values are), which is cheaper than validating first.
func appendStr(dst []byte, s string) []byte {
	start := len(dst)
	dst = appendStrHeader(dst, len(s))
	dst = append(dst, s...)
	if isASCII(dst[len(dst)-len(s):]) || utf8.ValidString(s) {
		return dst
	}
	return appendRepaired(dst[:start], s, utf8.DecodeRuneInString)
}

func appendStrBytes(dst, s []byte) []byte {
	if isASCII(s) || utf8.Valid(s) {
		return msgp.AppendStringFromBytes(dst, s)
	}
	return appendRepaired(dst, s, utf8.DecodeRune)
}

// isASCII reports whether b has no byte >= 0x80, eight bytes at a time.
func isASCII(b []byte) bool {
	for len(b) >= 8 {
		if binary.LittleEndian.Uint64(b)&0x8080808080808080 != 0 {
			return false
		}
		b = b[8:]
	}
	var or byte
	for _, c := range b {
		or |= c
	}
	return or < utf8.RuneSelf
}

// appendRepaired is the slow path of appendStr: it sizes the repaired string first so
// the header is right, then copies it.
func appendRepaired[S string | []byte](dst []byte, s S, decode func(S) (rune, int)) []byte {
	const repl = "\uFFFD"
	dst = appendStrHeader(dst, repairedSize(s, decode))
	last := 0
	for i := 0; i < len(s); {
		r, size := decode(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[last:i]...)
			dst = append(dst, repl...)
			last = i + 1
		}
		i += size
	}
	return append(dst, s[last:]...)
}

// repairedSize is the length of s with each invalid UTF-8 byte replaced by U+FFFD.
func repairedSize[S string | []byte](s S, decode func(S) (rune, int)) int {
	n := 0
	for i := 0; i < len(s); {
		r, size := decode(s[i:])
		if r == utf8.RuneError && size == 1 {
			n += len("\uFFFD")
		} else {
			n += size
		}
		i += size
	}
	return n
}

// appendStrHeader appends the smallest str header for n bytes.
func appendStrHeader(dst []byte, n int) []byte {
	if n <= 31 {
		return append(dst, wire.FixStr|byte(n))
	}
	return appendLongStrHeader(dst, n)
}

func appendLongStrHeader(dst []byte, n int) []byte {
	switch {
	case n <= math.MaxUint8:
		return append(dst, wire.Str8, byte(n))
	case n <= math.MaxUint16:
		return append(dst, wire.Str16, byte(n>>8), byte(n))
	}
	return append(dst, wire.Str32, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
}
