package zapenc

import (
	"fmt"
	"strconv"
	"time"

	"github.com/fluentcore/fluentcore/internal/msgpenc"
	"github.com/tinylib/msgp/msgp"
	"go.uber.org/zap/zapcore"
)

// The values of zap's ObjectEncoder and ArrayEncoder, one method per type, and the
// containers a marshaler opens. Each writes within the entry's budget (msgpenc.Appender).

// Time writes t through EncodeTime, falling back to Unix nanoseconds like zap.
func (e *Encoder) Time(t time.Time) {
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
func (e *Encoder) Duration(d time.Duration) {
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
func (e *Encoder) Object(obj zapcore.ObjectMarshaler) (err error) {
	if e.TooDeep() {
		return msgpenc.ErrTooDeep
	}
	d := e.Open(msgpenc.KindMap)
	defer e.closeAfterPanic(d, &err)
	return obj.MarshalLogObject(e)
}

// Array writes arr as an array; a panic and the cap are handled as in Object.
func (e *Encoder) Array(arr zapcore.ArrayMarshaler) (err error) {
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
func (e *Encoder) closeAfterPanic(d int, err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("PANIC=%v", r)
	}
	e.CloseTo(d)
}

// appendComplex writes c as zap's JSON encoder does: a "re+imi" string, never msgp's
// complex extension.
func (e *Encoder) appendComplex(c complex128, bits int) {
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

// AddArray writes arr under key k as a msgpack array, within the entry's budget; it returns
// arr's error, or nil past the budget without calling it.
func (e *Encoder) AddArray(k string, arr zapcore.ArrayMarshaler) error {
	if !e.Room(len(k) + msgpenc.HeaderRoom + msgpenc.ContainerRoom) {
		return nil
	}
	e.Key(k)
	return e.Array(arr)
}

// AddObject writes obj under key k as a msgpack map, within the entry's budget; it returns
// obj's error, or nil past the budget without calling it.
func (e *Encoder) AddObject(k string, obj zapcore.ObjectMarshaler) error {
	if !e.Room(len(k) + msgpenc.HeaderRoom + msgpenc.ContainerRoom) {
		return nil
	}
	e.Key(k)
	return e.Object(obj)
}

// AddBinary writes msgpack bin (zap JSON writes base64, which JSON needs and we don't).
func (e *Encoder) AddBinary(k string, v []byte) {
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

// AddByteString writes v under key k, within the entry's budget.
func (e *Encoder) AddByteString(k string, v []byte) {
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

// AddBool writes v under key k, within the entry's budget.
func (e *Encoder) AddBool(k string, v bool) {
	if e.Room(len(k) + msgpenc.HeaderRoom + 1) {
		e.Key(k)
		e.Buf = msgp.AppendBool(e.Buf, v)
	}
}

// AddComplex128 writes v under key k, within the entry's budget.
func (e *Encoder) AddComplex128(k string, v complex128) {
	if e.Room(len(k) + msgpenc.HeaderRoom + msgpenc.ComplexRoom) {
		e.Key(k)
		e.appendComplex(v, 64)
	}
}

// AddComplex64 writes v under key k, within the entry's budget.
func (e *Encoder) AddComplex64(k string, v complex64) {
	if e.Room(len(k) + msgpenc.HeaderRoom + msgpenc.ComplexRoom) {
		e.Key(k)
		e.appendComplex(complex128(v), 32)
	}
}

// AddDuration writes v under key k, within the entry's budget.
func (e *Encoder) AddDuration(k string, v time.Duration) {
	if e.Room(len(k) + msgpenc.HeaderRoom + msgpenc.ScalarRoom) {
		e.Key(k)
		e.Duration(v)
	}
}

// AddFloat64 writes v under key k, within the entry's budget.
func (e *Encoder) AddFloat64(k string, v float64) {
	if e.Room(len(k) + msgpenc.HeaderRoom + msgpenc.ScalarRoom) {
		e.Key(k)
		e.Buf = msgpenc.AppendFloat64(e.Buf, v)
	}
}

// AddFloat32 writes v under key k, within the entry's budget.
func (e *Encoder) AddFloat32(k string, v float32) {
	if e.Room(len(k) + msgpenc.HeaderRoom + msgpenc.ScalarRoom) {
		e.Key(k)
		e.Buf = msgpenc.AppendFloat32(e.Buf, v)
	}
}

// AddInt64 writes v under key k, within the entry's budget.
func (e *Encoder) AddInt64(k string, v int64) {
	if e.Room(len(k) + msgpenc.HeaderRoom + msgpenc.ScalarRoom) {
		e.Key(k)
		e.Buf = msgp.AppendInt64(e.Buf, v)
	}
}

// AddUint64 writes v under key k, within the entry's budget.
func (e *Encoder) AddUint64(k string, v uint64) {
	if e.Room(len(k) + msgpenc.HeaderRoom + msgpenc.ScalarRoom) {
		e.Key(k)
		e.Buf = msgp.AppendUint64(e.Buf, v)
	}
}

// AddString writes v under key k, within the entry's budget.
func (e *Encoder) AddString(k, v string) {
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

// AddTime writes v under key k, within the entry's budget.
func (e *Encoder) AddTime(k string, v time.Time) {
	if e.Room(len(k) + msgpenc.HeaderRoom + msgpenc.ScalarRoom) {
		e.Key(k)
		e.Time(v)
	}
}

// AddReflected writes v through the reflection encoder (msgpenc.Reflector.Field).
func (e *Encoder) AddReflected(k string, v any) error { return e.Field(k, v) }

// AddInt writes v under key k as AddInt64 does.
func (e *Encoder) AddInt(k string, v int) { e.AddInt64(k, int64(v)) }

// AddInt32 writes v under key k as AddInt64 does.
func (e *Encoder) AddInt32(k string, v int32) { e.AddInt64(k, int64(v)) }

// AddInt16 writes v under key k as AddInt64 does.
func (e *Encoder) AddInt16(k string, v int16) { e.AddInt64(k, int64(v)) }

// AddInt8 writes v under key k as AddInt64 does.
func (e *Encoder) AddInt8(k string, v int8) { e.AddInt64(k, int64(v)) }

// AddUint writes v under key k as AddUint64 does.
func (e *Encoder) AddUint(k string, v uint) { e.AddUint64(k, uint64(v)) }

// AddUint32 writes v under key k as AddUint64 does.
func (e *Encoder) AddUint32(k string, v uint32) { e.AddUint64(k, uint64(v)) }

// AddUint16 writes v under key k as AddUint64 does.
func (e *Encoder) AddUint16(k string, v uint16) { e.AddUint64(k, uint64(v)) }

// AddUint8 writes v under key k as AddUint64 does.
func (e *Encoder) AddUint8(k string, v uint8) { e.AddUint64(k, uint64(v)) }

// AddUintptr writes v under key k as AddUint64 does.
func (e *Encoder) AddUintptr(k string, v uintptr) { e.AddUint64(k, uint64(v)) }

// ArrayEncoder, within the budget as the ObjectEncoder.

// AppendArray appends arr to the open array as a msgpack array, within the entry's budget;
// it returns arr's error, or nil past the budget without calling it.
func (e *Encoder) AppendArray(arr zapcore.ArrayMarshaler) error {
	if !e.Room(msgpenc.ElemRoom + msgpenc.ContainerRoom) {
		return nil
	}
	e.Elem()
	return e.Array(arr)
}

// AppendObject appends obj to the open array as a msgpack map, within the entry's budget;
// it returns obj's error, or nil past the budget without calling it.
func (e *Encoder) AppendObject(obj zapcore.ObjectMarshaler) error {
	if !e.Room(msgpenc.ElemRoom + msgpenc.ContainerRoom) {
		return nil
	}
	e.Elem()
	return e.Object(obj)
}

// AppendBool appends v to the open array, within the entry's budget.
func (e *Encoder) AppendBool(v bool) {
	if e.Room(msgpenc.ElemRoom + 1) {
		e.Elem()
		e.Buf = msgp.AppendBool(e.Buf, v)
	}
}

// AppendByteString appends v to the open array, within the entry's budget.
func (e *Encoder) AppendByteString(v []byte) {
	if e.Room(msgpenc.ElemRoom + e.StrBytesRoom(v)) {
		e.Elem()
		if e.Plain(len(v)) {
			e.Buf = msgpenc.AppendStrBytes(e.Buf, v)
		} else {
			e.PutStrBytes(v)
		}
	}
}

// AppendComplex128 appends v to the open array, within the entry's budget.
func (e *Encoder) AppendComplex128(v complex128) {
	if e.Room(msgpenc.ElemRoom + msgpenc.ComplexRoom) {
		e.Elem()
		e.appendComplex(v, 64)
	}
}

// AppendComplex64 appends v to the open array, within the entry's budget.
func (e *Encoder) AppendComplex64(v complex64) {
	if e.Room(msgpenc.ElemRoom + msgpenc.ComplexRoom) {
		e.Elem()
		e.appendComplex(complex128(v), 32)
	}
}

// AppendDuration appends v to the open array, within the entry's budget.
func (e *Encoder) AppendDuration(v time.Duration) {
	if e.Room(msgpenc.ElemRoom + msgpenc.ScalarRoom) {
		e.Elem()
		e.Duration(v)
	}
}

// AppendFloat64 appends v to the open array, within the entry's budget.
func (e *Encoder) AppendFloat64(v float64) {
	if e.Room(msgpenc.ElemRoom + msgpenc.ScalarRoom) {
		e.Elem()
		e.Buf = msgpenc.AppendFloat64(e.Buf, v)
	}
}

// AppendFloat32 appends v to the open array, within the entry's budget.
func (e *Encoder) AppendFloat32(v float32) {
	if e.Room(msgpenc.ElemRoom + msgpenc.ScalarRoom) {
		e.Elem()
		e.Buf = msgpenc.AppendFloat32(e.Buf, v)
	}
}

// AppendInt64 appends v to the open array, within the entry's budget.
func (e *Encoder) AppendInt64(v int64) {
	if e.Room(msgpenc.ElemRoom + msgpenc.ScalarRoom) {
		e.Elem()
		e.Buf = msgp.AppendInt64(e.Buf, v)
	}
}

// AppendUint64 appends v to the open array, within the entry's budget.
func (e *Encoder) AppendUint64(v uint64) {
	if e.Room(msgpenc.ElemRoom + msgpenc.ScalarRoom) {
		e.Elem()
		e.Buf = msgp.AppendUint64(e.Buf, v)
	}
}

// AppendString appends v to the open array, within the entry's budget.
func (e *Encoder) AppendString(v string) {
	if e.Room(msgpenc.ElemRoom + e.StrRoom(v)) {
		e.Elem()
		if e.Plain(len(v)) {
			e.Buf = appendStr(e.Buf, v)
		} else {
			e.PutStr(v)
		}
	}
}

// AppendTime appends v to the open array, within the entry's budget.
func (e *Encoder) AppendTime(v time.Time) {
	if e.Room(msgpenc.ElemRoom + msgpenc.ScalarRoom) {
		e.Elem()
		e.Time(v)
	}
}

// AppendTimeLayout lets zap's layout-based time encoders (ISO8601, RFC3339, ...) format
// straight into buf instead of building a string.
func (e *Encoder) AppendTimeLayout(t time.Time, layout string) {
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
func (e *Encoder) AppendReflected(v any) error { return e.Element(v) }

// AppendInt appends v to the open array as AppendInt64 does.
func (e *Encoder) AppendInt(v int) { e.AppendInt64(int64(v)) }

// AppendInt32 appends v to the open array as AppendInt64 does.
func (e *Encoder) AppendInt32(v int32) { e.AppendInt64(int64(v)) }

// AppendInt16 appends v to the open array as AppendInt64 does.
func (e *Encoder) AppendInt16(v int16) { e.AppendInt64(int64(v)) }

// AppendInt8 appends v to the open array as AppendInt64 does.
func (e *Encoder) AppendInt8(v int8) { e.AppendInt64(int64(v)) }

// AppendUint appends v to the open array as AppendUint64 does.
func (e *Encoder) AppendUint(v uint) { e.AppendUint64(uint64(v)) }

// AppendUint32 appends v to the open array as AppendUint64 does.
func (e *Encoder) AppendUint32(v uint32) { e.AppendUint64(uint64(v)) }

// AppendUint16 appends v to the open array as AppendUint64 does.
func (e *Encoder) AppendUint16(v uint16) { e.AppendUint64(uint64(v)) }

// AppendUint8 appends v to the open array as AppendUint64 does.
func (e *Encoder) AppendUint8(v uint8) { e.AppendUint64(uint64(v)) }

// AppendUintptr appends v to the open array as AppendUint64 does.
func (e *Encoder) AppendUintptr(v uintptr) { e.AppendUint64(uint64(v)) }
