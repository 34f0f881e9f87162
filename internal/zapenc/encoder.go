package zapenc

import (
	"bytes"
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

// maxEventSec is the largest EventTime second we send: fluent-bit reserves 0xFFFFFFFF and
// 0xFFFFFFFE as group markers.
const maxEventSec = 0xFFFFFFFD

// Config is a zapcore.EncoderConfig resolved once (NewConfig): the record keys are
// pre-encoded as msgpack str, and zap's own level, name and caller encoders are
// recognised so the hot path can skip the call (and, for callers, zap's allocation).
// Safe for concurrent use once its exported fields are set; every Encoder of a stream
// shares one.
type Config struct {
	zc zapcore.EncoderConfig

	// Pre-encoded keys; nil when the part is omitted.
	levelKey, timeKey, nameKey, callerKey, functionKey, messageKey, stacktraceKey []byte
	// truncatedKey marks a record cut down to its writer's limit (see EncodeCapped).
	truncatedKey []byte

	// levelPairs holds the level key and the pre-encoded output of a known level encoder
	// for DebugLevel..FatalLevel (index level+1), to append at once; nil entries mean
	// "call EncodeLevel".
	levelPairs [int(zapcore.FatalLevel) + 2][]byte
	caller     callerFormat
	// nameAsIs is true when the logger name is written unchanged (nil or FullNameEncoder).
	nameAsIs bool
	// OverflowKey (pre-encoded) and OverflowMax are where and how much of a tag name past
	// the tag table's cap a record carries (see Context.over); nil and 0 until the
	// caller sets them, before the Config is shared.
	OverflowKey []byte
	OverflowMax int
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

// NewConfig resolves c for the encoders that share it. It never fails: a part whose key is
// zapcore.OmitKey is left out of every record, as in zap.
func NewConfig(c zapcore.EncoderConfig) *Config {
	cfg := &Config{zc: c}
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
			e := New(cfg)
			for l := zapcore.DebugLevel; l <= zapcore.FatalLevel; l++ {
				e.Buf = e.Buf[:0]
				e.Start(0, msgpenc.KindArray)
				c.EncodeLevel(l, e)
				if e.Values() == 1 {
					cfg.levelPairs[l+1] = append(bytes.Clone(cfg.levelKey), e.Buf...)
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

// Context holds the fields a logger's With added, encoded once (Config.NewContext);
// immutable after construction and safe to share between goroutines. nil means "no
// context".
type Context struct {
	buf []byte // the fields, ready to copy after the entry's own leading keys
	n   int    // values buf adds to the record map itself
	// open are the containers (namespaces) still open at the end of buf, outermost first,
	// with offsets relative to buf; each entry patches their headers in its own copy.
	open []msgpenc.Container
	// over is the tag name a logger asked for past the tag table's cap, and overName says
	// that name is the entry's logger name: either is written under the Config's
	// OverflowKey in the record itself, after every other field, so that a
	// receiver finds it whatever the encoder config, and one that keeps the last of a
	// repeated key (fluentd) keeps it over a user's field of that key. Not inherited by
	// NewContext.
	over     string
	overName bool
}

// Overflowing returns a copy of c with the tag name past the tag table's cap to write: name, or the entry's
// logger name if name is "". c may be nil (no fields).
func (c *Context) Overflowing(name string) *Context {
	o := &Context{}
	if c != nil {
		*o = *c
	}
	o.over, o.overName = name, name == ""
	return o
}

// NewContext returns parent's fields followed by fields, pre-encoded. parent may be nil.
// Namespaces opened in a context stay open for later With calls and the entry's own
// fields, and are closed at the end of each entry (zap semantics).
func (c *Config) NewContext(parent *Context, fields []zapcore.Field) *Context {
	if len(fields) == 0 {
		return parent
	}
	e := New(c)
	e.Start(-1, msgpenc.KindMap)
	if parent != nil {
		e.Buf = make([]byte, 0, len(parent.buf)+64*len(fields))
		e.AppendContext(parent.buf, parent.n, parent.open)
	}
	for i := range fields {
		fields[i].AddTo(e)
	}
	ctx := &Context{buf: slices.Clip(e.Buf)}
	ctx.n, ctx.open = e.Unclosed()
	return ctx
}

// Encoder appends Forward entries to its writer's buffer (Encode). It is reusable and NOT
// safe for concurrent use: its writer keeps it under the lock of the buffer it writes
// into. It implements zapcore.ObjectEncoder and zapcore.ArrayEncoder; field values are
// appended to Buf as they come, within the entry's budget (msgpenc.Appender): each method writes its key and value only if they fit, and
// past it returns at once (a marshaler's AddObject and AddArray without calling it).
type Encoder struct {
	msgpenc.Reflector // the entry's bytes, its budget, its open containers, reflected values
	cfg               *Config
	capOut            []byte // an entry cut down to size (Cap, CutShort), until the next cut

	// Weight is the sample weight of the entry being encoded, which its writer sets before
	// encoding it (0: none) and reads back if it does not keep the entry; it is written
	// under WeightKey (pre-encoded; nil, the default: never) after the entry's head.
	Weight    uint32
	WeightKey []byte
}

var (
	_ zapcore.ObjectEncoder = (*Encoder)(nil)
	_ zapcore.ArrayEncoder  = (*Encoder)(nil)
	_ msgpenc.Host          = (*Encoder)(nil)
)

// New returns an encoder for cfg, with no weight key.
func New(cfg *Config) *Encoder {
	e := &Encoder{cfg: cfg}
	e.Reflector = msgpenc.NewReflector(e, cfg.zc.NewReflectedEncoder)
	return e
}

// Fork returns a new encoder for what e is for: its configuration and weight key.
func (e *Encoder) Fork() *Encoder {
	f := New(e.cfg)
	f.WeightKey = e.WeightKey
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

// EncodeEntry appends one Forward Entry, [EventTime(ent.Time), {record}], to dst within
// budget b, for o (nil: none; see msgpenc.Owner), and returns the extended slice. It does
// not retain dst. It never fails: encoder errors become fields. An entry that passes b's
// limit is abandoned (nil, and Abandoned), or, cutting, ends where it stopped.
func (e *Encoder) EncodeEntry(dst []byte, ctx *Context, ent *zapcore.Entry, fields []zapcore.Field, b msgpenc.Budget, o msgpenc.Owner) []byte {
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
	if e.WeightKey != nil && e.Room(len(e.WeightKey)+5) {
		e.RawKey(e.WeightKey)
		e.Buf = msgp.AppendUint32(e.Buf, e.Weight)
	}
	if ctx != nil && e.Room(len(ctx.buf)) {
		e.AppendContext(ctx.buf, ctx.n, ctx.open)
	}
	e.addFields(fields)
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

// addFields appends fields: a run of fields of the common types that fit the budget whole
// in one loop (appendCommon), any other field through addField, which checks and cuts it.
func (e *Encoder) addFields(fields []zapcore.Field) {
	for len(fields) > 0 {
		end, plain := e.Limits()
		var n int
		e.Buf, n = appendCommon(e.Buf, fields, end, plain)
		e.Pairs(n)
		if fields = fields[n:]; len(fields) > 0 {
			e.addField(&fields[0])
			fields = fields[1:]
		}
	}
}

// appendCommon appends the leading fields of fields that are of addField's common types
// (string, int64, bool, float64), whose room, as their Add methods ask it, ends by end and
// whose str value is at most plain bytes: the bytes the Add methods write, without their
// checks. It returns buf and how many fields it appended.
func appendCommon(buf []byte, fields []zapcore.Field, end, plain int) ([]byte, int) {
	for i := range fields {
		f := &fields[i]
		room := len(buf) + len(f.Key) + msgpenc.HeaderRoom
		switch f.Type {
		case zapcore.StringType:
			if len(f.String) > plain || room+len(f.String)+msgpenc.HeaderRoom > end {
				return buf, i
			}
			buf = msgpenc.AppendStr(msgpenc.AppendStr(buf, f.Key), f.String)
		case zapcore.Int64Type:
			if room+msgpenc.ScalarRoom > end {
				return buf, i
			}
			buf = msgp.AppendInt64(msgpenc.AppendStr(buf, f.Key), f.Integer)
		case zapcore.BoolType:
			if room+1 > end {
				return buf, i
			}
			buf = msgp.AppendBool(msgpenc.AppendStr(buf, f.Key), f.Integer == 1)
		case zapcore.Float64Type:
			if room+msgpenc.ScalarRoom > end {
				return buf, i
			}
			buf = msgpenc.AppendFloat64(msgpenc.AppendStr(buf, f.Key), math.Float64frombits(uint64(f.Integer)))
		default:
			return buf, i
		}
	}
	return buf, len(fields)
}

// addField adds one of the entry's fields: the most common types directly, as
// zapcore.Field.AddTo would add them, without its copy of the field and its calls through
// the ObjectEncoder interface; every other type through AddTo.
func (e *Encoder) addField(f *zapcore.Field) {
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

// appendOverflowName writes the tag name past the tag table's cap that ctx carries (see
// Context.over) under OverflowKey, in the record's map: its first OverflowMax bytes, so
// that a name too long for a tag does not make its entry too large.
func (e *Encoder) appendOverflowName(ctx *Context, ent *zapcore.Entry) {
	name := ctx.over
	if ctx.overName {
		name = ent.LoggerName
	}
	name = name[:min(len(name), e.cfg.OverflowMax)]
	if name != "" && e.Room(len(e.cfg.OverflowKey)+e.StrRoom(name)) {
		e.RawKey(e.cfg.OverflowKey)
		e.PutStr(name)
	}
}

// Encode appends the entry to dst within b for o, as EncodeEntry does, and reports false if
// a marshaler panicked, so that a panic can never leave a writer's lock held or its buffer
// holding half an entry.
func (e *Encoder) Encode(dst []byte, ctx *Context, ent *zapcore.Entry, fields []zapcore.Field, b msgpenc.Budget, o msgpenc.Owner) (out []byte, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false // EncodeEntry resets the encoder's state at its start
		}
	}()
	return e.EncodeEntry(dst, ctx, ent, fields, b, o), true
}

// appendEntryHead writes level, time, name, caller, function and message, each with
// zap's fallback when the configured encoder writes nothing. Each part is written only if
// its key and value fit the budget; the room asked for a value written by a user's encoder
// is the fallback's, which the slot's own values ask for again.
func (e *Encoder) appendEntryHead(ent *zapcore.Entry) {
	c := e.cfg
	if c.levelKey != nil && e.Room(len(c.levelKey)+16) {
		if l := int(ent.Level) + 1; l >= 0 && l < len(c.levelPairs) && c.levelPairs[l] != nil {
			e.Buf = append(e.Buf, c.levelPairs[l]...)
			e.Pairs(1)
		} else {
			e.RawKey(c.levelKey)
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
func (e *Encoder) appendCaller(ec zapcore.EntryCaller) {
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

// appendStr appends s as a msgpack str, its invalid UTF-8 repaired as zap's JSON encoder
// repairs it (msgpenc.AppendStr).
func appendStr(dst []byte, s string) []byte { return msgpenc.AppendStr(dst, s) }

// An entry too large for its writer is cut down to size, or dropped, as msgpenc's budget
// describes: FirstPass's budget the first time, then Cap, or else CutShort.

// Cap returns entry, the last this encoder encoded (its values stored cut count from
// their original lengths), cut down to at most limit bytes and marked with truncatedKey, and
// true; or false when no cut of its values makes it fit. The cut lives in capOut until the
// next cut; an entry within limit is returned as it is.
func (e *Encoder) Cap(entry []byte, limit int) ([]byte, bool) {
	if len(entry) <= limit {
		return entry, true
	}
	out, ok := e.CapEntry(e.capOut[:0], entry, limit, e.cfg.truncatedKey)
	if ok {
		e.capOut = out[:0]
	}
	return out, ok
}

// EncodeCapped appends the entry to dst cut down to at most limit bytes (for a writer that
// holds nothing others wait for: the spill's), and reports whether it was cut; nil if a
// marshaler panicked.
func (e *Encoder) EncodeCapped(dst []byte, ctx *Context, ent *zapcore.Entry, fields []zapcore.Field, limit int) (out []byte, cut bool) {
	start := len(dst)
	out, ok := e.Encode(dst, ctx, ent, fields, msgpenc.FirstPass(limit, true), nil)
	if !e.Abandoned() {
		if !ok {
			return nil, false
		}
		if len(out)-start <= limit {
			return out, false
		}
		if capped, ok := e.Cap(out[start:], limit); ok {
			return append(out[:start], capped...), true
		}
	}
	short, _ := e.CutShort(ctx, ent, fields, limit)
	if short == nil {
		return nil, false
	}
	return append(dst[:start], short...), true
}

// CutShort encodes the entry again, cut short to at most limit bytes, into capOut, where it
// stays until the encoder's next cut. It reports false if it could not fit (a head larger
// than limit), and nil if a marshaler panicked.
func (e *Encoder) CutShort(ctx *Context, ent *zapcore.Entry, fields []zapcore.Field, limit int) ([]byte, bool) {
	out, ok := e.Encode(e.capOut[:0], ctx, ent, fields, msgpenc.CutShort(limit), nil)
	if !ok {
		return nil, false
	}
	e.capOut = out[:0]
	return out, len(out) <= limit
}

// Trim drops every scratch buffer that grew past msgpenc.KeptScratch, once an entry is done
// with it.
func (e *Encoder) Trim() {
	e.TrimScratch()
	if cap(e.capOut) > msgpenc.KeptScratch {
		e.capOut = nil
	}
}
