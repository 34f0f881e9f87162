package zapenc

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/tinylib/msgp/msgp"
	"go.uber.org/multierr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/fluentcore/fluentcore/internal/msgpenc"
	"github.com/fluentcore/fluentcore/internal/testkit"
)

// fuzzInput hands out the fuzzer's bytes as values; past the end everything is zero.
type fuzzInput struct {
	b []byte
	// namespaces counts the namespaces built so far: they nest without a limit of their own,
	// and the records must stay within msgpenc.MaxDepth, where they match zap's JSON.
	namespaces int
}

func (in *fuzzInput) more() bool { return len(in.b) > 0 }

func (in *fuzzInput) byte() byte {
	if len(in.b) == 0 {
		return 0
	}
	c := in.b[0]
	in.b = in.b[1:]
	return c
}

func (in *fuzzInput) u64() uint64 {
	var v [8]byte
	n := copy(v[:], in.b)
	in.b = in.b[n:]
	return binaryLE(v)
}

func binaryLE(v [8]byte) uint64 {
	var u uint64
	for i := 7; i >= 0; i-- {
		u = u<<8 | uint64(v[i])
	}
	return u
}

// str takes a length byte and that many bytes (any bytes: invalid UTF-8 included). A
// length byte of 255 makes a long string (up to 12 KiB) by repetition.
func (in *fuzzInput) str() string {
	n := int(in.byte())
	if n == 255 {
		return string(bytes.Repeat([]byte(in.short(int(in.byte()))), 200))
	}
	return in.short(n)
}

func (in *fuzzInput) short(n int) string {
	n = min(n%64, len(in.b))
	s := string(in.b[:n])
	in.b = in.b[n:]
	return s
}

// fuzzStringer is a Stringer that may panic.
type fuzzStringer struct {
	s     string
	panic bool
}

func (f *fuzzStringer) String() string {
	if f.panic {
		panic(f.s)
	}
	return f.s
}

// fuzzFields builds up to 32 fields of every kind from in.
func fuzzFields(in *fuzzInput, depth int) []zapcore.Field {
	var fs []zapcore.Field
	for in.more() && len(fs) < 32 {
		op := in.byte()
		if op == 0xff && depth > 0 {
			break // end of a nested object
		}
		k := in.str()
		switch op % 26 {
		case 0:
			fs = append(fs, zap.String(k, in.str()))
		case 1:
			fs = append(fs, zap.ByteString(k, []byte(in.str())))
		case 2:
			fs = append(fs, zap.Binary(k, []byte(in.str())))
		case 3:
			fs = append(fs, zap.Bool(k, in.byte()&1 == 1))
		case 4:
			fs = append(fs, zap.Int64(k, int64(in.u64())))
		case 5:
			fs = append(fs, zap.Uint64(k, in.u64()))
		case 6:
			fs = append(fs, zap.Float64(k, math.Float64frombits(in.u64())))
		case 7:
			fs = append(fs, zap.Float32(k, math.Float32frombits(uint32(in.u64()))))
		case 8:
			fs = append(fs, zap.Complex128(k, complex(math.Float64frombits(in.u64()), math.Float64frombits(in.u64()))))
		case 9:
			fs = append(fs, zap.Duration(k, time.Duration(in.u64())))
		case 10:
			fs = append(fs, zap.Time(k, time.Unix(0, int64(in.u64())).In(time.FixedZone("z", int(int8(in.byte()))*900))))
		case 11:
			if in.namespaces < msgpenc.MaxDepth/2 { // the rest of the cap covers objects, arrays and reflected values
				in.namespaces++
				fs = append(fs, zap.Namespace(k))
			}
		case 12:
			if depth < 4 {
				fs = append(fs, zap.Object(k, fieldsObj(fuzzFields(in, depth+1)...)))
			}
		case 13:
			if depth < 4 {
				fs = append(fs, zap.Array(k, fuzzArray(in, depth+1)))
			}
		case 14:
			if depth < 4 {
				fs = append(fs, zap.Inline(fieldsObj(fuzzFields(in, depth+1)...)))
			}
		case 15:
			fs = append(fs, zap.Skip())
		case 16:
			switch in.byte() % 3 {
			case 0:
				fs = append(fs, zap.Stringer(k, &fuzzStringer{s: in.str()}))
			case 1:
				fs = append(fs, zap.Stringer(k, &fuzzStringer{s: in.str(), panic: true}))
			default:
				fs = append(fs, zap.Stringer(k, (*nilStringer)(nil)))
			}
		case 17:
			switch in.byte() % 5 {
			case 0:
				fs = append(fs, zap.NamedError(k, errors.New(in.str())))
			case 1:
				fs = append(fs, zap.NamedError(k, verboseErr{msg: in.str(), detail: in.str()}))
			case 2:
				fs = append(fs, zap.NamedError(k, multierr.Combine(errors.New(in.str()), verboseErr{msg: in.str()})))
			case 3:
				fs = append(fs, zap.NamedError(k, panicErr{}))
			default:
				fs = append(fs, zap.NamedError(k, nil))
			}
		case 18:
			fs = append(fs, zap.Reflect(k, fuzzAny(in, 0)))
		case 19:
			o := benchOrderValue()
			o.ID, o.Customer.Email, o.Tags = in.str(), in.str(), []string{in.str()}
			o.Labels = map[string]string{in.str(): in.str()}
			o.Total = math.Float64frombits(in.u64()) // NaN and infinities fail, as in encoding/json
			fs = append(fs, zap.Reflect(k, &o))
		case 20:
			fs = append(fs, zap.Reflect(k, json.RawMessage(in.str())))
		case 21:
			fs = append(fs, zap.Strings(k, []string{in.str(), in.str()}), zap.Ints(k, []int{int(in.u64())}))
		case 22:
			fs = append(fs, zap.Int8(k, int8(in.byte())), zap.Uint16(k, uint16(in.u64())), zap.Uintptr(k, uintptr(in.u64())))
		case 23:
			fs = append(fs, zap.Complex64(k, complex(math.Float32frombits(uint32(in.u64())), 1)))
		case 24:
			fs = append(fs, zap.Any(k, fuzzAny(in, 0)))
		default:
			fs = append(fs, zap.Reflect(k, reflOuterValue()))
		}
	}
	return fs
}

// fuzzArray appends values of every kind: up to 16, so nested arrays stay cheap.
func fuzzArray(in *fuzzInput, depth int) zapcore.ArrayMarshaler {
	ops := []byte(in.short(int(in.byte()) % 17))
	vals := in.str()
	return arrFunc(func(a zapcore.ArrayEncoder) error {
		in := &fuzzInput{b: []byte(vals)}
		for _, op := range ops {
			switch op % 12 {
			case 0:
				a.AppendString(in.str())
			case 1:
				a.AppendByteString([]byte(in.str()))
			case 2:
				a.AppendInt64(int64(in.u64()))
			case 3:
				a.AppendFloat64(math.Float64frombits(in.u64()))
			case 4:
				a.AppendBool(op&0x10 != 0)
			case 5:
				a.AppendDuration(time.Duration(in.u64()))
			case 6:
				a.AppendTime(time.Unix(int64(in.u64()%1e10), 0))
			case 7:
				a.AppendComplex128(complex(1, math.Float64frombits(in.u64())))
			case 8:
				if depth < 4 {
					if err := a.AppendObject(fieldsObj(fuzzFields(in, depth+1)...)); err != nil {
						return err
					}
				}
			case 9:
				if depth < 4 {
					if err := a.AppendArray(fuzzArray(in, depth+1)); err != nil {
						return err
					}
				}
			case 10:
				if err := a.AppendReflected(fuzzAny(in, 0)); err != nil {
					return err
				}
			default:
				a.AppendUint64(in.u64())
			}
		}
		return nil
	})
}

// fuzzAny builds a JSON-like value, as sugared loggers pass them.
func fuzzAny(in *fuzzInput, depth int) any {
	switch in.byte() % 9 {
	case 0:
		return nil
	case 1:
		return in.str()
	case 2:
		return int(in.u64())
	case 3:
		return math.Float64frombits(in.u64())
	case 4:
		return in.byte()&1 == 1
	case 5:
		if depth > 3 {
			return nil
		}
		m := map[string]any{}
		for range in.byte() % 4 {
			m[in.str()] = fuzzAny(in, depth+1)
		}
		return m
	case 6:
		if depth > 3 {
			return nil
		}
		l := []any{}
		for range in.byte() % 4 {
			l = append(l, fuzzAny(in, depth+1))
		}
		return l
	case 7:
		return map[int]string{int(int8(in.byte())): in.str()}
	default:
		return []byte(in.str())
	}
}

// FuzzAppendEntry builds an entry (context, fields of every kind, entry metadata) from the
// input and checks that the output is one Forward entry, [ext 0 time, map], with no other
// extension, str keys and valid UTF-8 everywhere; that it round-trips through msgp's own
// encoder; that it decodes to what zap's JSON encoder writes; and that capping it to a size
// the input picks yields a valid, marked entry within that size.
func FuzzAppendEntry(f *testing.F) {
	f.Add([]byte("\x00\x01k\x05hello"), uint16(0))
	f.Add([]byte("\x0b\x02ns\x00\x03v\x06\x01f\x00\x00\x00\x00\x00\x00\xf8\x7f"), uint16(100))
	f.Add([]byte("\x0c\x01o\x00\x01a\x03b\xff\xfe\xff\x11\x01e\x01\x05boom!"), uint16(40))
	f.Add([]byte("\x12\x01r\x05\x03\x01k\x01\x01v\x06\x02\x02\x01\x07\x19\x01s"), uint16(300))
	zc := defaultCfg()
	zc.StacktraceKey = "stack"
	cfg := NewConfig(zc)
	f.Fuzz(func(t *testing.T, data []byte, capSeed uint16) {
		in := &fuzzInput{b: data}
		split := int(in.byte() % 8)
		ent := baseEntry()
		ent.Level = zapcore.Level(int8(in.byte()%7) - 1)
		ent.Message = in.str()
		ent.LoggerName = in.str()
		ent.Stack = in.str()
		fields := fuzzFields(in, 0)
		c := confCase{fields: fields}
		if split > 0 && split <= len(fields) {
			c.ctx = [][]zapcore.Field{fields[:split]}
			c.fields = fields[split:]
		}
		ctx := buildContext(cfg, c.ctx)
		enc := New(cfg)
		out := enc.appendEntry(nil, ctx, &ent, c.fields)

		_, _, rec := decodeEntry(t, out) // one value, [fixext8 type 0, map], plain types
		if rest := testkit.CheckRaw(t, out[11:]); len(rest) != 0 {
			t.Fatalf("%d bytes after the record", len(rest))
		}
		again, err := msgp.AppendIntf(nil, rec)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		back, _, err := testkit.ReadIntf(again)
		if err != nil || !reflect.DeepEqual(back, any(rec)) {
			t.Fatalf("record does not round-trip: %v", err)
		}
		if d := testkit.Diff(testkit.NormMsgp(rec), zapRecord(t, zc, c, ent), "record"); d != "" {
			t.Fatal(d)
		}

		limit := len(out) - int(capSeed)%(len(out)+1)
		if capped, ok := enc.Cap(out, limit); ok {
			if len(capped) < len(out) {
				testkit.CheckCapped(t, out, capped, limit, "msgTruncated")
			} else if !bytes.Equal(capped, out) {
				t.Fatal("Cap changed an entry within its limit")
			}
		}
	})
}

// TestFuzzHelpers keeps the fuzz builders honest: the seeds reach every field kind.
func TestFuzzHelpers(t *testing.T) {
	seen := map[zapcore.FieldType]bool{}
	for op := range 26 {
		in := &fuzzInput{b: []byte{byte(op), 1, 'k', 3, 1, 2, 3, 0, 0, 0, 0, 0, 0, 0, 0}}
		for _, f := range fuzzFields(in, 0) {
			seen[f.Type] = true
		}
	}
	for _, ft := range []zapcore.FieldType{zapcore.StringType, zapcore.ByteStringType, zapcore.BinaryType,
		zapcore.BoolType, zapcore.Int64Type, zapcore.Uint64Type, zapcore.Float64Type, zapcore.Float32Type,
		zapcore.Complex128Type, zapcore.Complex64Type, zapcore.DurationType, zapcore.TimeType, zapcore.NamespaceType,
		zapcore.ObjectMarshalerType, zapcore.ArrayMarshalerType, zapcore.InlineMarshalerType, zapcore.SkipType,
		zapcore.StringerType, zapcore.ErrorType, zapcore.ReflectType, zapcore.Int8Type, zapcore.Uint16Type,
		zapcore.UintptrType} {
		if !seen[ft] {
			t.Errorf("fuzzFields never builds field type %v", ft)
		}
	}
}
