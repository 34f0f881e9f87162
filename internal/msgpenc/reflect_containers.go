package msgpenc

import (
	"encoding"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/fluentcore/fluentcore/internal/reflectplan"
	"github.com/fluentcore/fluentcore/internal/wire"
	"github.com/tinylib/msgp/msgp"
)

// The Reflector's containers: arrays and slices, structs (and their ",string" fields), and
// maps, their keys sorted as encoding/json sorts them.

// reflectArray appends the array or slice v, whose plan is p, inside depth maps and arrays.
func (r *Reflector) reflectArray(p *reflectplan.Plan, v reflect.Value, depth int) error {
	if depth++; depth > MaxDepth {
		return ErrTooDeep
	}
	n := v.Len()
	if !r.Room(5 + n) {
		return ErrNoRoom
	}
	r.Buf = msgp.AppendArrayHeader(r.Buf, uint32(n))
	for i := 0; i < n; i++ {
		if err := r.reflectValue(p.Elem, v.Index(i), depth); err != nil {
			return err
		}
	}
	return nil
}

// reflectStruct appends the struct v, whose plan is p, as a map of the fields its plan
// keeps, inside depth maps and arrays (its own level counted by the caller).
func (r *Reflector) reflectStruct(p *reflectplan.Plan, v reflect.Value, depth int) error {
	if !r.Room(5) {
		return ErrNoRoom
	}
	hdr := len(r.Buf)
	if p.Fixed {
		r.Buf = msgp.AppendMapHeader(r.Buf, uint32(len(p.Fields)))
	} else {
		r.Buf = append(r.Buf, wire.Map32, 0, 0, 0, 0)
	}
	n := 0
fields:
	for i := range p.Fields {
		f := &p.Fields[i]
		var fv reflect.Value
		if len(f.Index) == 1 {
			fv = v.Field(f.Index[0])
		} else {
			fv = v
			for _, x := range f.Index {
				if fv.Kind() == reflect.Pointer {
					if fv.IsNil() {
						continue fields
					}
					fv = fv.Elem()
				}
				fv = fv.Field(x)
			}
		}
		if f.OmitNil && isEmptyValue(fv) || f.OmitZero && (f.IsZero == nil && fv.IsZero() || f.IsZero != nil && f.IsZero(fv)) {
			continue
		}
		if !r.Room(len(f.Key) + 1) {
			return ErrNoRoom
		}
		r.Buf = append(r.Buf, f.Key...)
		var err error
		if f.Quoted {
			err = r.reflectQuoted(f.Plan, fv, depth)
		} else {
			err = r.reflectValue(f.Plan, fv, depth)
		}
		if err != nil {
			return err
		}
		n++
	}
	if r.end < 0 {
		return ErrNoRoom // a marshaler in a field stopped at the budget
	}
	if !p.Fixed {
		before := len(r.Buf)
		r.Buf = shrinkHeader(r.Buf, hdr, n, true)
		r.movePrecut(hdr+5, len(r.Buf)-before)
	}
	return nil
}

// isEmptyValue is omitempty's test, as in encoding/json.
func isEmptyValue(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Interface, reflect.Pointer:
		return v.IsZero()
	}
	return false
}

// shrinkHeader replaces the map32/array32 header at off, followed by n elements (pairs for
// a map), by the smallest header for n, moving the elements down.
func shrinkHeader(b []byte, off, n int, isMap bool) []byte {
	var h [5]byte
	var hs []byte
	if isMap {
		hs = msgp.AppendMapHeader(h[:0], uint32(n))
	} else {
		hs = msgp.AppendArrayHeader(h[:0], uint32(n))
	}
	if len(hs) == 5 {
		copy(b[off:], hs)
		return b
	}
	copy(b[off:], hs)
	copy(b[off+len(hs):], b[off+5:])
	return b[:len(b)-5+len(hs)]
}

// reflectQuoted writes a field with the ",string" option: booleans, numbers and strings
// become the str of their JSON text, as encoding/json writes them.
func (r *Reflector) reflectQuoted(p *reflectplan.Plan, v reflect.Value, depth int) error {
	if p.Op == reflectplan.OpPtr {
		if v.IsNil() {
			return r.putNil()
		}
		p, v = p.Elem, v.Elem()
	}
	if p.Addr != nil && (p.Box || v.CanAddr()) {
		return r.reflectValue(p, v, depth)
	}
	// A string's JSON text is at most six bytes per byte (\u00XX) and its quotes; a
	// number's, 32.
	need := 5 + 32
	if p.Op == reflectplan.OpString {
		need = 5 + 2 + 6*v.Len()
	}
	if !r.Room(need) {
		return ErrNoRoom
	}
	mark := len(r.Buf)
	r.Buf = append(r.Buf, 0, 0)
	switch p.Op {
	case reflectplan.OpBool:
		r.Buf = strconv.AppendBool(r.Buf, v.Bool())
	case reflectplan.OpInt:
		r.Buf = strconv.AppendInt(r.Buf, v.Int(), 10)
	case reflectplan.OpUint:
		r.Buf = strconv.AppendUint(r.Buf, v.Uint(), 10)
	case reflectplan.OpFloat32, reflectplan.OpFloat64:
		bits := 64
		if p.Op == reflectplan.OpFloat32 {
			bits = 32
		}
		f := v.Float()
		if f-f != 0 {
			r.Truncate(mark)
			return nonFiniteError(f, bits)
		}
		r.Buf = appendJSONFloat(r.Buf, f, bits)
	case reflectplan.OpString:
		r.Buf = appendJSONString(r.Buf, v.String())
	case reflectplan.OpNumber:
		s, err := numberLiteral(v.String())
		if err != nil {
			r.Truncate(mark)
			return err
		}
		r.Buf = append(r.Buf, s...)
	default: // marshalers ignore the option
		r.Truncate(mark)
		return r.reflectValue(p, v, depth)
	}
	r.FinishStr(mark)
	return nil
}

// mapKV is one map entry while a map's keys are sorted.
type mapKV struct {
	key string
	i   int // index in the copied values
	v   reflect.Value
}

// anyKV is one entry of a map[string]any while its keys are sorted.
type anyKV struct {
	key string
	val any
}

// reflectMap writes a map with its keys resolved and sorted as encoding/json does.
func (r *Reflector) reflectMap(p *reflectplan.Plan, v reflect.Value, depth int) error {
	n := v.Len()
	base := len(r.mapKVs)
	defer func() {
		clear(r.mapKVs[base:])
		r.mapKVs = r.mapKVs[:base]
	}()
	// Copy keys and values out with one allocation each, instead of one per entry. Values
	// copied this way are addressable, which encoding/json's are not: types for which that
	// matters take the per-entry copy.
	keys := reflect.MakeSlice(p.KeySlice, n, n)
	var vals reflect.Value
	if !p.Elem.AddrSensitive {
		vals = reflect.MakeSlice(p.ValSlice, n, n)
	}
	var it reflect.MapIter
	it.Reset(v)
	for i := 0; it.Next() && i < n; i++ {
		k := keys.Index(i)
		k.SetIterKey(&it)
		ks, err := mapKeyString(p, k)
		if err != nil {
			return fmt.Errorf("json: encoding error for type %q: %q", v.Type().String(), err.Error())
		}
		kv := mapKV{key: ks, i: i}
		if vals.IsValid() {
			vals.Index(i).SetIterValue(&it)
		} else {
			kv.v = it.Value()
		}
		r.mapKVs = append(r.mapKVs, kv)
	}
	kvs := r.mapKVs[base:]
	slices.SortFunc(kvs, func(a, b mapKV) int { return strings.Compare(a.key, b.key) })
	r.Buf = msgp.AppendMapHeader(r.Buf, uint32(len(kvs)))
	for j := range kvs {
		kv := kvs[j] // nested maps may move r.mapKVs; kvs stays valid
		if !r.Room(len(kv.key) + 6) {
			return ErrNoRoom
		}
		r.Buf = AppendStr(r.Buf, kv.key)
		ev := kv.v
		if vals.IsValid() {
			ev = vals.Index(kv.i)
		}
		if err := r.reflectValue(p.Elem, ev, depth); err != nil {
			return err
		}
	}
	return nil
}

// mapKeyString resolves a map key as encoding/json does.
func mapKeyString(p *reflectplan.Plan, k reflect.Value) (string, error) {
	switch p.KeyOp {
	case reflectplan.OpString:
		return k.String(), nil
	case reflectplan.OpInt:
		return strconv.FormatInt(k.Int(), 10), nil
	case reflectplan.OpUint:
		return strconv.FormatUint(k.Uint(), 10), nil
	}
	if k.Kind() == reflect.Pointer && k.IsNil() {
		return "", nil
	}
	tm, _ := reflect.TypeAssert[encoding.TextMarshaler](k)
	b, err := tm.MarshalText()
	return string(b), err
}

// reflectAnyMap is the fast path for map[string]any: no reflection for the map itself, nor
// for values of the common types.
func (r *Reflector) reflectAnyMap(m map[string]any, depth int) error {
	base := len(r.anyKVs)
	defer func() {
		clear(r.anyKVs[base:])
		r.anyKVs = r.anyKVs[:base]
	}()
	for k, v := range m {
		r.anyKVs = append(r.anyKVs, anyKV{k, v})
	}
	kvs := r.anyKVs[base:]
	slices.SortFunc(kvs, func(a, b anyKV) int { return strings.Compare(a.key, b.key) })
	r.Buf = msgp.AppendMapHeader(r.Buf, uint32(len(kvs)))
	for j := range kvs {
		if !r.Room(len(kvs[j].key) + 6) {
			return ErrNoRoom
		}
		r.Buf = AppendStr(r.Buf, kvs[j].key)
		if err := r.reflectAny(kvs[j].val, depth); err != nil {
			return err
		}
	}
	return nil
}

// reflectStrMap is the fast path for map[string]string.
func (r *Reflector) reflectStrMap(m map[string]string) error {
	base := len(r.strKVs)
	defer func() {
		clear(r.strKVs[base:])
		r.strKVs = r.strKVs[:base]
	}()
	for k, v := range m {
		r.strKVs = append(r.strKVs, [2]string{k, v})
	}
	kvs := r.strKVs[base:]
	slices.SortFunc(kvs, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
	r.Buf = msgp.AppendMapHeader(r.Buf, uint32(len(kvs)))
	for _, kv := range kvs {
		if !r.Room(len(kv[0]) + 5 + r.StrRoom(kv[1])) {
			return ErrNoRoom
		}
		r.Buf = AppendStr(r.Buf, kv[0])
		r.PutStr(kv[1])
	}
	return nil
}

// reflectAny writes a value held in an interface (not addressable, as in encoding/json).
func (r *Reflector) reflectAny(x any, depth int) error {
	switch x := x.(type) {
	case nil:
		return r.putNil()
	case string:
		if !r.Plain(len(x)) {
			return r.reflectStr(x)
		}
		if !r.Room(len(x) + 5) {
			return ErrNoRoom
		}
		r.Buf = AppendStr(r.Buf, x)
	case bool:
		if !r.Room(1) {
			return ErrNoRoom
		}
		r.Buf = msgp.AppendBool(r.Buf, x)
	case int:
		if !r.Room(ScalarRoom) {
			return ErrNoRoom
		}
		r.Buf = msgp.AppendInt64(r.Buf, int64(x))
	case int64:
		if !r.Room(ScalarRoom) {
			return ErrNoRoom
		}
		r.Buf = msgp.AppendInt64(r.Buf, x)
	case float64:
		if x-x != 0 {
			return nonFiniteError(x, 64)
		}
		if !r.Room(ScalarRoom) {
			return ErrNoRoom
		}
		r.Buf = msgp.AppendFloat64(r.Buf, x)
	case map[string]string:
		if x == nil {
			return r.putNil()
		}
		if !r.Room(5 + 2*len(x)) {
			return ErrNoRoom
		}
		return r.reflectStrMap(x)
	case map[string]any:
		if x == nil {
			return r.putNil()
		}
		if depth++; depth > MaxDepth {
			return ErrTooDeep
		}
		if !r.Room(5 + 2*len(x)) {
			return ErrNoRoom
		}
		return r.reflectAnyMap(x, depth)
	default:
		v := reflect.ValueOf(x)
		return r.reflectValue(reflectplan.For(v.Type()), v, depth)
	}
	return nil
}

// reflectMapValue appends the map v, whose plan is p, inside depth maps and arrays: nil as
// msgpack nil, map[string]any and map[string]string by their fast paths, any other map by
// reflectMap. A map whose smallest encoding (two bytes a pair) cannot fit is not walked.
func (r *Reflector) reflectMapValue(p *reflectplan.Plan, v reflect.Value, depth int) error {
	if v.IsNil() {
		return r.putNil()
	}
	if depth++; depth > MaxDepth {
		return ErrTooDeep
	}
	if !r.Room(5 + 2*v.Len()) {
		return ErrNoRoom
	}
	switch {
	case p.AnyMap:
		m, _ := reflect.TypeAssert[map[string]any](v)
		return r.reflectAnyMap(m, depth)
	case p.StrMap:
		m, _ := reflect.TypeAssert[map[string]string](v)
		return r.reflectStrMap(m)
	}
	return r.reflectMap(p, v, depth)
}
