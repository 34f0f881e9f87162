package fluentcore

import (
	"bytes"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fluentcore/fluentcore/internal/msgpenc"
	"github.com/fluentcore/fluentcore/internal/wire"
	"github.com/tinylib/msgp/msgp"
	"go.uber.org/zap/zapcore"
)

// This file is the msgpack twin of zap's JSON encoder: same keys, same order, same
// fallbacks, same handling of marshaler errors, but the output is one Forward Entry,
// [EventTime, {record}], appended to the caller's buffer. What lies beneath it is
// internal/msgpenc's: the buffer and its budget (the entry size cap), the containers and
// their nesting cap, reflected values. This file holds what is zap's: the EncoderConfig,
// With's context, the entry's head, and one method per zap field type.
//
// The encoder knows nothing of who writes the entry. The writer gives it the entry's
// budget and, if it holds something others wait for, an Owner (msgpenc.Owner), which the
// encoder tells at once when the entry passes its budget: the writer then decides what
// becomes of the entry. The writer gives it the entry's sample weight too (weight).

// maxEventSec is the largest EventTime second we send: fluent-bit reserves 0xFFFFFFFF and
// 0xFFFFFFFE as group markers.
const maxEventSec = 0xFFFFFFFD

// encoderConfig is a zapcore.EncoderConfig resolved once: the record keys are
// pre-encoded as msgpack str, and zap's own level, name and caller encoders are
// recognised so the hot path can skip the call (and, for callers, zap's allocation).
type encoderConfig struct {
	zc zapcore.EncoderConfig

	// Pre-encoded keys; nil when the part is omitted.
	levelKey, timeKey, nameKey, callerKey, functionKey, messageKey, stacktraceKey []byte
	// truncatedKey marks a record cut down to Config.Transport.MaxEntryBytes (see encodeCapped).
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
				e.Buf = e.Buf[:0]
				e.Start(0, msgpenc.KindArray)
				c.EncodeLevel(l, e)
				if e.Values() == 1 {
					cfg.levelVals[l+1] = bytes.Clone(e.Buf)
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

// encodedContext holds fields added with Core.With, encoded once; immutable after
// construction and safe to share between goroutines. nil means "no context".
type encodedContext struct {
	buf []byte // the fields, ready to copy after the entry's own leading keys
	n   int    // values buf adds to the record map itself
	// open are the containers (namespaces) still open at the end of buf, outermost first,
	// with offsets relative to buf; each entry patches their headers in its own copy.
	open []msgpenc.Container
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
	e.Start(-1, msgpenc.KindMap)
	if parent != nil {
		e.Buf = make([]byte, 0, len(parent.buf)+64*len(fields))
		e.AppendContext(parent.buf, parent.n, parent.open)
	}
	for i := range fields {
		fields[i].AddTo(e)
	}
	ctx := &encodedContext{buf: slices.Clip(e.Buf)}
	ctx.n, ctx.open = e.Unclosed()
	return ctx
}

// msgpEncoder is reusable and NOT safe for concurrent use (the sink keeps one per shard,
// used under the shard's lock). It implements zapcore.ObjectEncoder and
// zapcore.ArrayEncoder; field values are appended to Buf as they come, within the entry's
// budget (msgpenc.Appender): each method writes its key and value only if they fit, and
// past it returns at once (a marshaler's AddObject and AddArray without calling it).
type msgpEncoder struct {
	msgpenc.Reflector // the entry's bytes, its budget, its open containers, reflected values
	cfg               *encoderConfig
	capOut            []byte // an entry cut down to size (capEntry, cutShort), until the next cut

	// weight is the sample weight of the entry being encoded, which its writer sets before
	// encoding it (0: none) and reads back if it does not keep the entry; it is written
	// under weightKey (pre-encoded; nil: never) after the entry's head.
	weight    uint32
	weightKey []byte
}

var (
	_ zapcore.ObjectEncoder = (*msgpEncoder)(nil)
	_ zapcore.ArrayEncoder  = (*msgpEncoder)(nil)
	_ msgpenc.Host          = (*msgpEncoder)(nil)
)

func newMsgpEncoder(cfg *encoderConfig) *msgpEncoder {
	e := &msgpEncoder{cfg: cfg}
	e.Reflector = msgpenc.NewReflector(e, cfg.zc.NewReflectedEncoder)
	return e
}

// fork returns a new encoder for what e is for: its configuration and weight key.
func (e *msgpEncoder) fork() *msgpEncoder {
	f := newMsgpEncoder(e.cfg)
	f.weightKey = e.weightKey
	return f
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

// encodeEntry appends one Forward Entry, [EventTime(ent.Time), {record}], to dst within
// budget b, for o (nil: none; see msgpenc.Owner), and returns the extended slice. It does
// not retain dst. It never fails: encoder errors become fields. An entry that passes b's
// limit is abandoned (nil, and Abandoned), or, cutting, ends where it stopped.
func (e *msgpEncoder) encodeEntry(dst []byte, ctx *encodedContext, ent *zapcore.Entry, fields []zapcore.Field, b msgpenc.Budget, o msgpenc.Owner) []byte {
	sec, nsec := eventTimeOf(ent.Time)
	end := e.Begin(len(dst), b, o)
	dst = append(dst, wire.Array2)
	dst = wire.AppendEventTime(dst, sec, nsec)
	e.Start(len(dst), msgpenc.KindMap)
	e.Buf = append(dst, wire.Map32, 0, 0, 0, 0)
	stack := ent.Stack != "" && e.cfg.stacktraceKey != nil
	if b.Cut {
		// The stacktrace and the mark come after the fields, in room kept for them.
		e.Reserve(len(e.cfg.truncatedKey) + 1)
		if stack {
			e.Reserve(len(e.cfg.stacktraceKey) + e.StrRoom(ent.Stack))
		}
	}

	e.appendEntryHead(ent)
	if e.weightKey != nil && e.Room(len(e.weightKey)+5) {
		e.RawKey(e.weightKey)
		e.Buf = msgp.AppendUint32(e.Buf, e.weight)
	}
	if ctx != nil && e.Room(len(ctx.buf)) {
		e.AppendContext(ctx.buf, ctx.n, ctx.open)
	}
	for i := range fields {
		e.addField(&fields[i])
	}
	e.CloseTo(0) // namespaces end before the stacktrace, as in zap
	if ctx != nil && (ctx.over != "" || ctx.overName) {
		e.appendOverflowName(ctx, ent)
	}
	if b.Cut {
		e.Restore(end) // the room kept
	}
	if stack && e.Room(len(e.cfg.stacktraceKey)+e.StrRoom(ent.Stack)) {
		e.RawKey(e.cfg.stacktraceKey)
		e.PutStr(ent.Stack)
	}
	if b.Cut {
		e.RawKey(e.cfg.truncatedKey)
		e.Buf = append(e.Buf, wire.True)
	}
	return e.EndRecord()
}

// addField adds one of the entry's fields: the most common types directly, as
// zapcore.Field.AddTo would add them, without its copy of the field and its calls through
// the ObjectEncoder interface; every other type through AddTo.
func (e *msgpEncoder) addField(f *zapcore.Field) {
	switch f.Type {
	case zapcore.StringType:
		e.AddString(f.Key, f.String)
	case zapcore.Int64Type:
		e.AddInt64(f.Key, f.Integer)
	case zapcore.BoolType:
		e.AddBool(f.Key, f.Integer == 1)
	case zapcore.Float64Type:
		e.AddFloat64(f.Key, math.Float64frombits(uint64(f.Integer)))
	default:
		f.AddTo(e)
	}
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
	if name != "" && e.Room(len(e.cfg.overflowKey)+e.StrRoom(name)) {
		e.RawKey(e.cfg.overflowKey)
		e.PutStr(name)
	}
}

// encodeSafely encodes the entry within b for o and reports false if a marshaler panicked,
// so a panic can never leave a shard locked or a batch holding half an entry.
func encodeSafely(enc *msgpEncoder, dst []byte, ctx *encodedContext, ent *zapcore.Entry, fields []zapcore.Field, b msgpenc.Budget, o msgpenc.Owner) (out []byte, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false // encodeEntry resets the encoder's state at its start
		}
	}()
	return enc.encodeEntry(dst, ctx, ent, fields, b, o), true
}

// appendEntryHead writes level, time, name, caller, function and message, each with
// zap's fallback when the configured encoder writes nothing. Each part is written only if
// its key and value fit the budget; the room asked for a value written by a user's encoder
// is the fallback's, which the slot's own values ask for again.
func (e *msgpEncoder) appendEntryHead(ent *zapcore.Entry) {
	c := e.cfg
	if c.levelKey != nil && e.Room(len(c.levelKey)+16) {
		e.RawKey(c.levelKey)
		if l := int(ent.Level) + 1; l >= 0 && l < len(c.levelVals) && c.levelVals[l] != nil {
			e.Buf = append(e.Buf, c.levelVals[l]...)
		} else {
			d := e.OpenSlot()
			c.zc.EncodeLevel(ent.Level, e)
			if !e.CloseSlot(d) {
				e.Buf = appendStr(e.Buf, ent.Level.String())
			}
		}
	}
	if c.timeKey != nil && !ent.Time.IsZero() && e.Room(len(c.timeKey)+9) {
		e.RawKey(c.timeKey)
		e.Time(ent.Time)
	}
	if ent.LoggerName != "" && c.nameKey != nil && e.Room(len(c.nameKey)+e.StrRoom(ent.LoggerName)) {
		e.RawKey(c.nameKey)
		if c.nameAsIs {
			e.PutStr(ent.LoggerName)
		} else {
			d := e.OpenSlot()
			c.zc.EncodeName(ent.LoggerName, e)
			if !e.CloseSlot(d) {
				e.PutStr(ent.LoggerName)
			}
		}
	}
	if ent.Caller.Defined {
		// The caller's file and line, or its String: at most the file, a colon and 20 digits.
		if c.callerKey != nil && e.Room(len(c.callerKey)+len(ent.Caller.File)+26) {
			e.RawKey(c.callerKey)
			e.appendCaller(ent.Caller)
		}
		if c.functionKey != nil && e.Room(len(c.functionKey)+e.StrRoom(ent.Caller.Function)) {
			e.RawKey(c.functionKey)
			if e.Plain(len(ent.Caller.Function)) {
				e.Buf = appendStr(e.Buf, ent.Caller.Function)
			} else {
				e.PutStr(ent.Caller.Function)
			}
		}
	}
	if c.messageKey != nil && e.Room(len(c.messageKey)+e.StrRoom(ent.Message)) {
		e.RawKey(c.messageKey)
		if e.Plain(len(ent.Message)) { // PutStr's common case, without its call
			e.Buf = appendStr(e.Buf, ent.Message)
		} else {
			e.PutStr(ent.Message)
		}
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
		mark := len(e.Buf)
		e.Buf = append(e.Buf, 0, 0)
		e.Buf = append(e.Buf, path...)
		e.Buf = append(e.Buf, ':')
		e.Buf = strconv.AppendInt(e.Buf, int64(ec.Line), 10)
		e.FinishStr(mark)
		return
	}
	if enc := e.cfg.zc.EncodeCaller; enc != nil {
		d := e.OpenSlot()
		enc(ec, e)
		if e.CloseSlot(d) {
			return
		}
	}
	e.Buf = appendStr(e.Buf, ec.String())
}

// Time writes t through EncodeTime, falling back to Unix nanoseconds like zap.
func (e *msgpEncoder) Time(t time.Time) {
	if enc := e.cfg.zc.EncodeTime; enc != nil {
		d := e.OpenSlot()
		enc(t, e)
		if e.CloseSlot(d) {
			return
		}
	}
	e.Buf = msgp.AppendInt64(e.Buf, t.UnixNano())
}

// Duration writes d through EncodeDuration, falling back to nanoseconds like zap.
func (e *msgpEncoder) Duration(d time.Duration) {
	if enc := e.cfg.zc.EncodeDuration; enc != nil {
		s := e.OpenSlot()
		enc(d, e)
		if e.CloseSlot(s) {
			return
		}
	}
	e.Buf = msgp.AppendInt64(e.Buf, int64(d))
}

// Object writes obj as a map; namespaces it opens end with it, as in zap. Past
// msgpenc.MaxDepth it writes the marker instead and returns msgpenc.ErrTooDeep without
// calling obj. A marshaler that panics is an error ("PANIC=..."), as a panicking Stringer
// is in zap: the field gets a "<key>Error" and the entry is kept. What it wrote before the
// panic stays, closed.
func (e *msgpEncoder) Object(obj zapcore.ObjectMarshaler) (err error) {
	if e.TooDeep() {
		return msgpenc.ErrTooDeep
	}
	d := e.Open(msgpenc.KindMap)
	defer e.closeAfterPanic(d, &err)
	return obj.MarshalLogObject(e)
}

// Array writes arr as an array; a panic and the cap are handled as in Object.
func (e *msgpEncoder) Array(arr zapcore.ArrayMarshaler) (err error) {
	if e.TooDeep() {
		return msgpenc.ErrTooDeep
	}
	d := e.Open(msgpenc.KindArray)
	defer e.closeAfterPanic(d, &err)
	return arr.MarshalLogArray(e)
}

// closeAfterPanic, deferred, closes the containers opened since depth d and turns a panic
// into *err. Every value a marshaler could have left half-written sits in a container or a
// slot, which closing completes, so the output stays valid msgpack.
func (e *msgpEncoder) closeAfterPanic(d int, err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("PANIC=%v", r)
	}
	e.CloseTo(d)
}

// appendComplex writes c as zap's JSON encoder does: a "re+imi" string, never msgp's
// complex extension.
func (e *msgpEncoder) appendComplex(c complex128, bits int) {
	r, i := real(c), imag(c)
	mark := len(e.Buf)
	e.Buf = append(e.Buf, 0, 0)
	e.Buf = strconv.AppendFloat(e.Buf, r, 'f', -1, bits)
	if i >= 0 {
		e.Buf = append(e.Buf, '+')
	}
	e.Buf = strconv.AppendFloat(e.Buf, i, 'f', -1, bits)
	e.Buf = append(e.Buf, 'i')
	e.Buf = msgp.AppendBytesStringTwoPrefixed(e.Buf, len(e.Buf)-mark-2)
}

// ObjectEncoder (OpenNamespace is msgpenc.Writer's). Each method writes its key and value
// only if they fit the entry's budget, asking for the room msgpenc's constants give (a
// time or duration asks for the int64 fallback's: a user's encoder writes its values
// through the Append* calls, which ask again); past it they return at once (a marshaler's
// AddObject and AddArray without calling it).

func (e *msgpEncoder) AddArray(k string, arr zapcore.ArrayMarshaler) error {
	if !e.Room(len(k) + msgpenc.HeaderRoom + msgpenc.ContainerRoom) {
		return nil
	}
	e.Key(k)
	return e.Array(arr)
}

func (e *msgpEncoder) AddObject(k string, obj zapcore.ObjectMarshaler) error {
	if !e.Room(len(k) + msgpenc.HeaderRoom + msgpenc.ContainerRoom) {
		return nil
	}
	e.Key(k)
	return e.Object(obj)
}

// AddBinary writes msgpack bin (zap JSON writes base64, which JSON needs and we don't).
func (e *msgpEncoder) AddBinary(k string, v []byte) {
	if e.Plain(len(v)) {
		if e.Room(len(k) + len(v) + 2*msgpenc.HeaderRoom) {
			e.Key(k)
			e.Buf = msgp.AppendBytes(e.Buf, v)
		}
		return
	}
	if e.Room(len(k) + msgpenc.HeaderRoom + e.BinRoom(len(v))) {
		e.Key(k)
		e.PutBin(v)
	}
}

func (e *msgpEncoder) AddByteString(k string, v []byte) {
	if e.Plain(len(v)) {
		if e.Room(len(k) + len(v) + 2*msgpenc.HeaderRoom) {
			e.Key(k)
			e.Buf = msgpenc.AppendStrBytes(e.Buf, v)
		}
		return
	}
	if e.Room(len(k) + msgpenc.HeaderRoom + e.StrBytesRoom(v)) {
		e.Key(k)
		e.PutStrBytes(v)
	}
}

func (e *msgpEncoder) AddBool(k string, v bool) {
	if e.Room(len(k) + msgpenc.HeaderRoom + 1) {
		e.Key(k)
		e.Buf = msgp.AppendBool(e.Buf, v)
	}
}

func (e *msgpEncoder) AddComplex128(k string, v complex128) {
	if e.Room(len(k) + msgpenc.HeaderRoom + msgpenc.ComplexRoom) {
		e.Key(k)
		e.appendComplex(v, 64)
	}
}

func (e *msgpEncoder) AddComplex64(k string, v complex64) {
	if e.Room(len(k) + msgpenc.HeaderRoom + msgpenc.ComplexRoom) {
		e.Key(k)
		e.appendComplex(complex128(v), 32)
	}
}

func (e *msgpEncoder) AddDuration(k string, v time.Duration) {
	if e.Room(len(k) + msgpenc.HeaderRoom + msgpenc.ScalarRoom) {
		e.Key(k)
		e.Duration(v)
	}
}

func (e *msgpEncoder) AddFloat64(k string, v float64) {
	if e.Room(len(k) + msgpenc.HeaderRoom + msgpenc.ScalarRoom) {
		e.Key(k)
		e.Buf = msgpenc.AppendFloat64(e.Buf, v)
	}
}

func (e *msgpEncoder) AddFloat32(k string, v float32) {
	if e.Room(len(k) + msgpenc.HeaderRoom + msgpenc.ScalarRoom) {
		e.Key(k)
		e.Buf = msgpenc.AppendFloat32(e.Buf, v)
	}
}

func (e *msgpEncoder) AddInt64(k string, v int64) {
	if e.Room(len(k) + msgpenc.HeaderRoom + msgpenc.ScalarRoom) {
		e.Key(k)
		e.Buf = msgp.AppendInt64(e.Buf, v)
	}
}

func (e *msgpEncoder) AddUint64(k string, v uint64) {
	if e.Room(len(k) + msgpenc.HeaderRoom + msgpenc.ScalarRoom) {
		e.Key(k)
		e.Buf = msgp.AppendUint64(e.Buf, v)
	}
}

func (e *msgpEncoder) AddString(k, v string) {
	if e.Plain(len(v)) {
		if e.Room(len(k) + len(v) + 2*msgpenc.HeaderRoom) {
			e.Key(k)
			e.Buf = appendStr(e.Buf, v)
		}
		return
	}
	if e.Room(len(k) + msgpenc.HeaderRoom + e.StrRoom(v)) {
		e.Key(k)
		e.PutStr(v)
	}
}

func (e *msgpEncoder) AddTime(k string, v time.Time) {
	if e.Room(len(k) + msgpenc.HeaderRoom + msgpenc.ScalarRoom) {
		e.Key(k)
		e.Time(v)
	}
}

// AddReflected writes v through the reflection encoder (msgpenc.Reflector.Field).
func (e *msgpEncoder) AddReflected(k string, v any) error { return e.Field(k, v) }

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
	if !e.Room(msgpenc.ElemRoom + msgpenc.ContainerRoom) {
		return nil
	}
	e.Elem()
	return e.Array(arr)
}

func (e *msgpEncoder) AppendObject(obj zapcore.ObjectMarshaler) error {
	if !e.Room(msgpenc.ElemRoom + msgpenc.ContainerRoom) {
		return nil
	}
	e.Elem()
	return e.Object(obj)
}

func (e *msgpEncoder) AppendBool(v bool) {
	if e.Room(msgpenc.ElemRoom + 1) {
		e.Elem()
		e.Buf = msgp.AppendBool(e.Buf, v)
	}
}

func (e *msgpEncoder) AppendByteString(v []byte) {
	if e.Room(msgpenc.ElemRoom + e.StrBytesRoom(v)) {
		e.Elem()
		if e.Plain(len(v)) {
			e.Buf = msgpenc.AppendStrBytes(e.Buf, v)
		} else {
			e.PutStrBytes(v)
		}
	}
}

func (e *msgpEncoder) AppendComplex128(v complex128) {
	if e.Room(msgpenc.ElemRoom + msgpenc.ComplexRoom) {
		e.Elem()
		e.appendComplex(v, 64)
	}
}

func (e *msgpEncoder) AppendComplex64(v complex64) {
	if e.Room(msgpenc.ElemRoom + msgpenc.ComplexRoom) {
		e.Elem()
		e.appendComplex(complex128(v), 32)
	}
}

func (e *msgpEncoder) AppendDuration(v time.Duration) {
	if e.Room(msgpenc.ElemRoom + msgpenc.ScalarRoom) {
		e.Elem()
		e.Duration(v)
	}
}

func (e *msgpEncoder) AppendFloat64(v float64) {
	if e.Room(msgpenc.ElemRoom + msgpenc.ScalarRoom) {
		e.Elem()
		e.Buf = msgpenc.AppendFloat64(e.Buf, v)
	}
}

func (e *msgpEncoder) AppendFloat32(v float32) {
	if e.Room(msgpenc.ElemRoom + msgpenc.ScalarRoom) {
		e.Elem()
		e.Buf = msgpenc.AppendFloat32(e.Buf, v)
	}
}

func (e *msgpEncoder) AppendInt64(v int64) {
	if e.Room(msgpenc.ElemRoom + msgpenc.ScalarRoom) {
		e.Elem()
		e.Buf = msgp.AppendInt64(e.Buf, v)
	}
}

func (e *msgpEncoder) AppendUint64(v uint64) {
	if e.Room(msgpenc.ElemRoom + msgpenc.ScalarRoom) {
		e.Elem()
		e.Buf = msgp.AppendUint64(e.Buf, v)
	}
}

func (e *msgpEncoder) AppendString(v string) {
	if e.Room(msgpenc.ElemRoom + e.StrRoom(v)) {
		e.Elem()
		if e.Plain(len(v)) {
			e.Buf = appendStr(e.Buf, v)
		} else {
			e.PutStr(v)
		}
	}
}

func (e *msgpEncoder) AppendTime(v time.Time) {
	if e.Room(msgpenc.ElemRoom + msgpenc.ScalarRoom) {
		e.Elem()
		e.Time(v)
	}
}

// AppendTimeLayout lets zap's layout-based time encoders (ISO8601, RFC3339, ...) format
// straight into buf instead of building a string.
func (e *msgpEncoder) AppendTimeLayout(t time.Time, layout string) {
	// A layout's text is at most about twice as long as the layout (month names for
	// "Jan"), and time's Format writes the year in up to 10 digits.
	if !e.Room(msgpenc.ElemRoom + msgpenc.HeaderRoom + 2*len(layout) + 16) {
		return
	}
	e.Elem()
	mark := len(e.Buf)
	e.Buf = append(e.Buf, 0, 0)
	e.Buf = t.AppendFormat(e.Buf, layout)
	e.FinishStr(mark)
}

// AppendReflected writes v through the reflection encoder (msgpenc.Reflector.Element).
func (e *msgpEncoder) AppendReflected(v any) error { return e.Element(v) }

func (e *msgpEncoder) AppendInt(v int)         { e.AppendInt64(int64(v)) }
func (e *msgpEncoder) AppendInt32(v int32)     { e.AppendInt64(int64(v)) }
func (e *msgpEncoder) AppendInt16(v int16)     { e.AppendInt64(int64(v)) }
func (e *msgpEncoder) AppendInt8(v int8)       { e.AppendInt64(int64(v)) }
func (e *msgpEncoder) AppendUint(v uint)       { e.AppendUint64(uint64(v)) }
func (e *msgpEncoder) AppendUint32(v uint32)   { e.AppendUint64(uint64(v)) }
func (e *msgpEncoder) AppendUint16(v uint16)   { e.AppendUint64(uint64(v)) }
func (e *msgpEncoder) AppendUint8(v uint8)     { e.AppendUint64(uint64(v)) }
func (e *msgpEncoder) AppendUintptr(v uintptr) { e.AppendUint64(uint64(v)) }

// appendStr appends s as a msgpack str, its invalid UTF-8 repaired as zap's JSON encoder
// repairs it (msgpenc.AppendStr): the keys and values the root writes.
func appendStr(dst []byte, s string) []byte { return msgpenc.AppendStr(dst, s) }

// An entry too large for its writer is cut down to size, or dropped, as msgpenc's budget
// describes: FirstPass's budget the first time, then capEntry, or else cutShort.

// capEntry returns entry, the last this encoder encoded (its values stored cut count from
// their original lengths), cut down to at most limit bytes and marked with truncatedKey, and
// true; or false when no cut of its values makes it fit. The cut lives in capOut until the
// next cut; an entry within limit is returned as it is.
func (e *msgpEncoder) capEntry(entry []byte, limit int) ([]byte, bool) {
	if len(entry) <= limit {
		return entry, true
	}
	out, ok := e.CapEntry(e.capOut[:0], entry, limit, e.cfg.truncatedKey)
	if ok {
		e.capOut = out[:0]
	}
	return out, ok
}

// encodeCapped appends the entry to dst cut down to at most limit bytes (for a writer that
// holds nothing others wait for: the spill's), and reports whether it was cut; nil if a
// marshaler panicked.
func (e *msgpEncoder) encodeCapped(dst []byte, ctx *encodedContext, ent *zapcore.Entry, fields []zapcore.Field, limit int) (out []byte, cut bool) {
	start := len(dst)
	out, ok := encodeSafely(e, dst, ctx, ent, fields, msgpenc.FirstPass(limit, true), nil)
	if !e.Abandoned() {
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

// cutShort encodes the entry again, cut short to at most limit bytes, into capOut, where it
// stays until the encoder's next cut. It reports false if it could not fit (a head larger
// than limit), and nil if a marshaler panicked.
func (e *msgpEncoder) cutShort(ctx *encodedContext, ent *zapcore.Entry, fields []zapcore.Field, limit int) ([]byte, bool) {
	out, ok := encodeSafely(e, e.capOut[:0], ctx, ent, fields, msgpenc.CutShort(limit), nil)
	if !ok {
		return nil, false
	}
	e.capOut = out[:0]
	return out, len(out) <= limit
}

// trim drops every scratch buffer that grew past msgpenc.KeptScratch, once an entry is done
// with it.
func (e *msgpEncoder) trim() {
	e.TrimScratch()
	if cap(e.capOut) > msgpenc.KeptScratch {
		e.capOut = nil
	}
}
