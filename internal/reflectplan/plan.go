// Package reflectplan works out, once per reflect.Type, how the reflection encoder writes a
// value of that type: which marshaler wins (zap's, msgp's, encoding/json's, TextMarshaler),
// how a struct's fields resolve (encoding/json's rules, with msg and msgpack tags first),
// which map keys are usable, and what changes when a value is addressable. Plans are cached
// in a copy-on-write map behind an atomic pointer: lookups take no lock; building a plan
// for a type seen for the first time takes one lock, and never runs user code, so it
// cannot deadlock or panic half-way. It imports no other fluentcore package (see
// ARCHITECTURE.md).
package reflectplan

import (
	"cmp"
	"encoding"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/tinylib/msgp/msgp"
	"go.uber.org/zap/zapcore"
)

// Op is what a plan does with a value.
type Op uint8

// The ops, one per kind of value the encoder writes differently.
const (
	OpUnsupported Op = iota // chan, func, complex, unsafe.Pointer, maps with bad key types
	OpBool
	OpInt
	OpUint
	OpFloat32
	OpFloat64
	OpString
	OpNumber // json.Number: a number literal
	OpBytes  // []byte: msgpack bin
	OpSlice
	OpArray
	OpMap
	OpPtr
	OpInterface
	OpStruct
	OpTime     // time.Time, through EncoderConfig.EncodeTime
	OpDuration // time.Duration, through EncoderConfig.EncodeDuration
	OpObject   // zapcore.ObjectMarshaler
	OpLogArray // zapcore.ArrayMarshaler
	OpMsgp     // msgp.Marshaler; Plan.Next takes over when its output is unusable
	OpJSON     // json.Marshaler
	OpText     // encoding.TextMarshaler
	OpError    // error: its Error() text
)

// Plan is the cached plan for one type. Immutable once published.
type Plan struct {
	Op   Op
	Type reflect.Type
	// Elem is the plan of the element (OpSlice, OpArray, OpPtr) or of the map value (OpMap).
	Elem *Plan
	// Next is the plan used when a msgp.Marshaler's output can't be used as it is (OpMsgp).
	Next *Plan
	// Addr is the plan for v.Addr(), used when v is addressable: methods with pointer
	// receivers, as encoding/json uses them. Box says to take a copy's address when v is
	// not addressable (only for msgp.Marshaler, whose generated methods have pointer
	// receivers).
	Addr *Plan
	Box  bool
	// AddrSensitive: the plan, or one of a value it contains without a pointer in between,
	// behaves differently when addressable. Map values are copied out of the map only then.
	AddrSensitive bool

	Fields []Field // OpStruct, in encoding/json's order
	Fixed  bool    // OpStruct: every field is always written, so the size is known

	KeyOp    Op           // OpMap: OpString, OpInt, OpUint or OpText
	KeySlice reflect.Type // OpMap: []key and []value, to copy a map out in two allocations
	ValSlice reflect.Type
	// OpMap: exactly map[string]any or map[string]string, which have faster paths.
	AnyMap, StrMap bool
}

// Field is one struct field written by a struct plan.
type Field struct {
	Key      []byte // the key, pre-encoded as msgpack str
	Index    []int  // path from the outer struct, through embedded structs
	Plan     *Plan
	ViaPtr   bool // index goes through an embedded pointer, which may be nil
	OmitNil  bool // omitempty
	OmitZero bool // omitzero
	Quoted   bool // the json ",string" option
	IsZero   func(reflect.Value) bool
}

var (
	planMu    sync.Mutex // serialises building; lookups never take it
	planCache atomic.Pointer[map[reflect.Type]*Plan]
)

// For returns the plan for t, building it (and the plans it needs) on first use.
func For(t reflect.Type) *Plan {
	if m := planCache.Load(); m != nil {
		if p := (*m)[t]; p != nil {
			return p
		}
	}
	return buildPlan(t)
}

func buildPlan(t reflect.Type) *Plan {
	planMu.Lock()
	defer planMu.Unlock()
	var old map[reflect.Type]*Plan
	if m := planCache.Load(); m != nil {
		old = *m
	}
	if p := old[t]; p != nil {
		return p
	}
	b := planBuilder{known: old, fresh: map[reflect.Type]*Plan{}, noMsgp: map[reflect.Type]*Plan{}}
	p := b.plan(t, false)
	m := make(map[reflect.Type]*Plan, len(old)+len(b.fresh))
	for k, v := range old {
		m[k] = v
	}
	for k, v := range b.fresh {
		m[k] = v
	}
	planCache.Store(&m)
	return p
}

var (
	timeType         = reflect.TypeFor[time.Time]()
	durationType     = reflect.TypeFor[time.Duration]()
	numberType       = reflect.TypeFor[json.Number]()
	anyMapType       = reflect.TypeFor[map[string]any]()
	strMapType       = reflect.TypeFor[map[string]string]()
	objectMarshalerT = reflect.TypeFor[zapcore.ObjectMarshaler]()
	arrayMarshalerT  = reflect.TypeFor[zapcore.ArrayMarshaler]()
	msgpMarshalerT   = reflect.TypeFor[msgp.Marshaler]()
	jsonMarshalerT   = reflect.TypeFor[json.Marshaler]()
	textMarshalerT   = reflect.TypeFor[encoding.TextMarshaler]()
	errorT           = reflect.TypeFor[error]()
	isZeroerT        = reflect.TypeFor[interface{ IsZero() bool }]()
)

// planBuilder builds the plans of one buildPlan call. Plans are registered before they are
// filled, so recursive types end up pointing at themselves.
type planBuilder struct {
	known  map[reflect.Type]*Plan // published
	fresh  map[reflect.Type]*Plan // built by this call, published at its end
	noMsgp map[reflect.Type]*Plan // variants that ignore msgp.Marshaler (OpMsgp fallbacks)
}

// plan returns t's plan, registered before it is filled. With noMsgp it is t's plan as if
// neither t nor *t implemented msgp.Marshaler: the fallback of an OpMsgp plan, memoised
// apart from the regular one.
func (b *planBuilder) plan(t reflect.Type, noMsgp bool) *Plan {
	memo := b.fresh
	if noMsgp {
		memo = b.noMsgp
	} else if p := b.known[t]; p != nil {
		return p
	}
	if p := memo[t]; p != nil {
		return p
	}
	p := &Plan{Type: t}
	memo[t] = p
	b.fill(p, t, noMsgp)
	return p
}

// methodOp is the op for the first interface t implements, in precedence order: zap's own
// marshalers win, then generated msgp code, then what encoding/json would call.
func methodOp(t reflect.Type, noMsgp bool) Op {
	switch {
	case t.Implements(objectMarshalerT):
		return OpObject
	case t.Implements(arrayMarshalerT):
		return OpLogArray
	case !noMsgp && t.Implements(msgpMarshalerT):
		return OpMsgp
	case t.Implements(jsonMarshalerT):
		return OpJSON
	case t.Implements(textMarshalerT):
		return OpText
	case t.Implements(errorT):
		return OpError
	}
	return OpUnsupported // none
}

func (b *planBuilder) fill(p *Plan, t reflect.Type, noMsgp bool) {
	switch t {
	case timeType:
		p.Op = OpTime
		return
	case durationType:
		p.Op = OpDuration
		return
	}
	k := t.Kind()
	// *time.Time has MarshalJSON too, but its element goes through EncodeTime.
	special := k == reflect.Pointer && (t.Elem() == timeType || t.Elem() == durationType)
	if k != reflect.Interface && !special {
		if k != reflect.Pointer {
			// Methods with pointer receivers apply to addressable values, as in encoding/json.
			if pop := methodOp(reflect.PointerTo(t), noMsgp); pop != OpUnsupported && pop != methodOp(t, noMsgp) {
				p.Addr = b.plan(reflect.PointerTo(t), noMsgp)
				p.Box = pop == OpMsgp
				p.AddrSensitive = true
			}
		}
		if op := methodOp(t, noMsgp); op != OpUnsupported {
			p.Op = op
			if op == OpMsgp {
				p.Next = b.plan(t, true)
			}
			return
		}
	}
	if op := kindOp(k); op != OpUnsupported {
		p.Op = op
		if t == numberType {
			p.Op = OpNumber
		}
		return
	}
	switch k {
	case reflect.Interface:
		p.Op = OpInterface
	case reflect.Pointer:
		p.Op = OpPtr
		// A msgp.Marshaler pointer falling back (noMsgp): its element must not try msgp again.
		p.Elem = b.plan(t.Elem(), noMsgp)
	case reflect.Slice:
		// As encoding/json: byte slices are binary unless the bytes have marshalers.
		if et := t.Elem(); et.Kind() == reflect.Uint8 {
			pe := reflect.PointerTo(et)
			if !pe.Implements(jsonMarshalerT) && !pe.Implements(textMarshalerT) {
				p.Op = OpBytes
				return
			}
		}
		p.Op = OpSlice
		p.Elem = b.plan(t.Elem(), false)
	case reflect.Array:
		p.Op = OpArray
		p.Elem = b.plan(t.Elem(), false)
		p.AddrSensitive = p.AddrSensitive || p.Elem.AddrSensitive
	case reflect.Map:
		b.fillMap(p, t)
	case reflect.Struct:
		b.fillStruct(p, t)
	default:
		p.Op = OpUnsupported
	}
}

// kindOp is the op of a value of kind k when its type has no method that takes over:
// OpUnsupported for the kinds whose plan needs more than the kind.
func kindOp(k reflect.Kind) Op {
	switch k {
	case reflect.Bool:
		return OpBool
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return OpInt
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return OpUint
	case reflect.Float32:
		return OpFloat32
	case reflect.Float64:
		return OpFloat64
	case reflect.String:
		return OpString
	}
	return OpUnsupported
}

func (b *planBuilder) fillMap(p *Plan, t reflect.Type) {
	kt := t.Key()
	switch op := kindOp(kt.Kind()); op {
	case OpString, OpInt, OpUint:
		p.KeyOp = op
	default:
		if !kt.Implements(textMarshalerT) {
			p.Op = OpUnsupported
			return
		}
		p.KeyOp = OpText
	}
	// encoding/json writes string-kind keys as they are even when they are TextMarshalers,
	// and prefers TextMarshaler to the number for integer kinds.
	if p.KeyOp != OpString && kt.Implements(textMarshalerT) {
		p.KeyOp = OpText
	}
	p.Op = OpMap
	p.Elem = b.plan(t.Elem(), false)
	p.KeySlice = reflect.SliceOf(kt)
	p.ValSlice = reflect.SliceOf(t.Elem())
	p.AnyMap = t == anyMapType
	p.StrMap = t == strMapType
}

// structField is a candidate field while the struct's fields are resolved.
type structField struct {
	name     string
	tagged   bool
	index    []int
	typ      reflect.Type
	omitNil  bool
	omitZero bool
	quoted   bool
	isZero   func(reflect.Value) bool
}

// fieldTag returns the first of the msg, msgpack and json tags the field has.
func fieldTag(sf reflect.StructField) string {
	for _, k := range [...]string{"msg", "msgpack", "json"} {
		if v, ok := sf.Tag.Lookup(k); ok {
			return v
		}
	}
	return ""
}

func tagHas(opts, opt string) bool {
	for opts != "" {
		var o string
		o, opts, _ = strings.Cut(opts, ",")
		if o == opt {
			return true
		}
	}
	return false
}

// validTagName is encoding/json's rule for a usable name in a tag.
func validTagName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
		case !unicode.IsLetter(c) && !unicode.IsDigit(c):
			return false
		}
	}
	return true
}

// structFields resolves t's fields the way encoding/json does: breadth first through
// embedded structs, the shallowest name wins, a tagged name beats an untagged one at the
// same depth, and two equals cancel each other out.
func structFields(t reflect.Type) []structField {
	return dominantFields(candidateFields(t))
}

// candidateFields lists every field that may be written under its name: t's own, then
// those of its embedded structs, depth by depth (breadth first), each struct type walked
// once. A field of a struct type embedded twice at one depth is listed twice, so that its
// name cancels out in dominantFields.
func candidateFields(t reflect.Type) []structField {
	type queued struct {
		typ   reflect.Type
		index []int
	}
	var fields []structField
	next := []queued{{typ: t}}
	visited := map[reflect.Type]bool{}
	var count map[reflect.Type]int
	for len(next) > 0 {
		current := next
		next = nil
		nextCount := map[reflect.Type]int{}
		for _, q := range current {
			if visited[q.typ] {
				continue
			}
			visited[q.typ] = true
			for i := 0; i < q.typ.NumField(); i++ {
				f, embedded, ok := fieldCandidate(q.typ.Field(i), q.index, i)
				switch {
				case !ok:
				case embedded == nil:
					fields = append(fields, f)
					if count[q.typ] > 1 {
						// The same struct embedded twice at this depth: a duplicate makes the
						// name cancel out in dominantFields.
						fields = append(fields, f)
					}
				default:
					nextCount[embedded]++
					if nextCount[embedded] == 1 {
						next = append(next, queued{typ: embedded, index: f.index})
					}
				}
			}
		}
		count = nextCount
	}
	return fields
}

// fieldCandidate is what field i, sf, of the struct reached through parent contributes:
// a candidate field named by its tag or its Go name; or, for an untagged embedded struct
// (or pointer to one), that struct, whose fields are walked at the next depth (embedded,
// with f.index its path); or nothing (ok false), for an unexported field that is no
// embedded struct, or one tagged "-".
func fieldCandidate(sf reflect.StructField, parent []int, i int) (f structField, embedded reflect.Type, ok bool) {
	if sf.Anonymous {
		et := sf.Type
		if et.Kind() == reflect.Pointer {
			et = et.Elem()
		}
		if !sf.IsExported() && et.Kind() != reflect.Struct {
			return f, nil, false
		}
	} else if !sf.IsExported() {
		return f, nil, false
	}
	tag := fieldTag(sf)
	if tag == "-" {
		return f, nil, false
	}
	name, opts, _ := strings.Cut(tag, ",")
	if !validTagName(name) {
		name = ""
	}
	index := append(slices.Clip(parent), i)
	ft := sf.Type
	if ft.Name() == "" && ft.Kind() == reflect.Pointer {
		ft = ft.Elem()
	}
	if name == "" && sf.Anonymous && ft.Kind() == reflect.Struct {
		return structField{index: index}, ft, true
	}
	f = structField{
		name:     name,
		tagged:   name != "",
		index:    index,
		typ:      sf.Type,
		omitNil:  tagHas(opts, "omitempty"),
		omitZero: tagHas(opts, "omitzero"),
		quoted:   tagHas(opts, "string") && quotable(ft.Kind()),
	}
	if f.name == "" {
		f.name = sf.Name
	}
	if f.omitZero {
		f.isZero = zeroFunc(sf.Type)
	}
	return f, nil, true
}

// quotable reports whether the ",string" option applies to a field of kind k (or pointer
// to k): booleans, numbers and strings, as in encoding/json.
func quotable(k reflect.Kind) bool {
	switch k {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.String:
		return true
	}
	return false
}

// dominantFields keeps, of the candidates sharing a name, the one that dominates: the
// shallowest, then the tagged one; none when the first two tie. The fields kept are in
// index order, encoding/json's order.
func dominantFields(fields []structField) []structField {
	slices.SortFunc(fields, func(a, b structField) int {
		if c := strings.Compare(a.name, b.name); c != 0 {
			return c
		}
		if c := cmp.Compare(len(a.index), len(b.index)); c != 0 {
			return c
		}
		if a.tagged != b.tagged {
			if a.tagged {
				return -1
			}
			return 1
		}
		return slices.Compare(a.index, b.index)
	})
	out := fields[:0]
	for i := 0; i < len(fields); {
		j := i + 1
		for j < len(fields) && fields[j].name == fields[i].name {
			j++
		}
		// Sorted by depth then tag, so the first one dominates unless the second ties it.
		if j-i == 1 || len(fields[i].index) != len(fields[i+1].index) || fields[i].tagged != fields[i+1].tagged {
			out = append(out, fields[i])
		}
		i = j
	}
	slices.SortFunc(out, func(a, b structField) int { return slices.Compare(a.index, b.index) })
	return out
}

// zeroFunc is how omitzero decides for a field of type t: its IsZero method if it has one,
// else reflect's zero value test (nil).
func zeroFunc(t reflect.Type) func(reflect.Value) bool {
	type zeroer = interface{ IsZero() bool }
	switch {
	case t.Kind() == reflect.Interface && t.Implements(isZeroerT):
		return func(v reflect.Value) bool {
			if v.IsNil() || (v.Elem().Kind() == reflect.Pointer && v.Elem().IsNil()) {
				return true
			}
			z, _ := reflect.TypeAssert[zeroer](v.Elem())
			return z.IsZero()
		}
	case t.Kind() == reflect.Pointer && t.Implements(isZeroerT):
		return func(v reflect.Value) bool {
			if v.IsNil() {
				return true
			}
			z, _ := reflect.TypeAssert[zeroer](v)
			return z.IsZero()
		}
	case t.Implements(isZeroerT):
		return func(v reflect.Value) bool {
			z, _ := reflect.TypeAssert[zeroer](v)
			return z.IsZero()
		}
	case reflect.PointerTo(t).Implements(isZeroerT):
		return func(v reflect.Value) bool {
			if !v.CanAddr() {
				c := reflect.New(v.Type()).Elem()
				c.Set(v)
				v = c
			}
			z, _ := reflect.TypeAssert[zeroer](v.Addr())
			return z.IsZero()
		}
	}
	return nil
}

func (b *planBuilder) fillStruct(p *Plan, t reflect.Type) {
	p.Op = OpStruct
	sfs := structFields(t)
	p.Fields = make([]Field, len(sfs))
	p.Fixed = true
	for i, sf := range sfs {
		f := &p.Fields[i]
		f.Key = msgp.AppendString(nil, sf.name)
		f.Index = sf.index
		f.OmitNil, f.OmitZero, f.Quoted, f.IsZero = sf.omitNil, sf.omitZero, sf.quoted, sf.isZero
		f.Plan = b.plan(sf.typ, false)
		// A nil embedded pointer on the way hides the field.
		ft := t
		for _, x := range sf.index[:len(sf.index)-1] {
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			ft = ft.Field(x).Type
			if ft.Kind() == reflect.Pointer {
				f.ViaPtr = true
			}
		}
		if f.ViaPtr || f.OmitNil || f.OmitZero {
			p.Fixed = false
		}
		if !f.ViaPtr && f.Plan.AddrSensitive {
			p.AddrSensitive = true
		}
	}
}
