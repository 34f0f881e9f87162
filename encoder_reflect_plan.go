package fluentcore

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

// Plans for the reflection encoder: what to do with a value of one reflect.Type, worked out
// once per type and cached. The cache is a copy-on-write map behind an atomic pointer:
// lookups take no lock; building a plan for a type seen for the first time takes planMu,
// and never runs user code, so it cannot deadlock or panic half-way.

// planOp is what a plan does with a value.
type planOp uint8

const (
	opUnsupported planOp = iota // chan, func, complex, unsafe.Pointer, maps with bad key types
	opBool
	opInt
	opUint
	opFloat32
	opFloat64
	opString
	opNumber // json.Number: a number literal
	opBytes  // []byte: msgpack bin
	opSlice
	opArray
	opMap
	opPtr
	opInterface
	opStruct
	opTime     // time.Time, through EncoderConfig.EncodeTime
	opDuration // time.Duration, through EncoderConfig.EncodeDuration
	opObject   // zapcore.ObjectMarshaler
	opLogArray // zapcore.ArrayMarshaler
	opMsgp     // msgp.Marshaler; typePlan.next takes over when its output is unusable
	opJSON     // json.Marshaler
	opText     // encoding.TextMarshaler
	opError    // error: its Error() text
)

// typePlan is the cached plan for one type. Immutable once published.
type typePlan struct {
	op  planOp
	typ reflect.Type
	// elem is the plan of the element (opSlice, opArray, opPtr) or of the map value (opMap).
	elem *typePlan
	// next is the plan used when a msgp.Marshaler's output can't be used as it is (opMsgp).
	next *typePlan
	// addr is the plan for v.Addr(), used when v is addressable: methods with pointer
	// receivers, as encoding/json uses them. box says to take a copy's address when v is
	// not addressable (only for msgp.Marshaler, whose generated methods have pointer
	// receivers).
	addr *typePlan
	box  bool
	// addrSensitive: the plan, or one of a value it contains without a pointer in between,
	// behaves differently when addressable. Map values are copied out of the map only then.
	addrSensitive bool

	fields []fieldPlan // opStruct, in encoding/json's order
	fixed  bool        // opStruct: every field is always written, so the size is known

	keyOp    planOp       // opMap: opString, opInt, opUint or opText
	keySlice reflect.Type // opMap: []key and []value, to copy a map out in two allocations
	valSlice reflect.Type
	// opMap: exactly map[string]any or map[string]string, which have faster paths.
	anyMap, strMap bool
}

// fieldPlan is one struct field written by a struct plan.
type fieldPlan struct {
	key      []byte // the key, pre-encoded as msgpack str
	index    []int  // path from the outer struct, through embedded structs
	plan     *typePlan
	viaPtr   bool // index goes through an embedded pointer, which may be nil
	omitNil  bool // omitempty
	omitZero bool // omitzero
	quoted   bool // the json ",string" option
	isZero   func(reflect.Value) bool
}

var (
	planMu    sync.Mutex // serialises building; lookups never take it
	planCache atomic.Pointer[map[reflect.Type]*typePlan]
)

// planFor returns the plan for t, building it (and the plans it needs) on first use.
func planFor(t reflect.Type) *typePlan {
	if m := planCache.Load(); m != nil {
		if p := (*m)[t]; p != nil {
			return p
		}
	}
	return buildPlan(t)
}

func buildPlan(t reflect.Type) *typePlan {
	planMu.Lock()
	defer planMu.Unlock()
	var old map[reflect.Type]*typePlan
	if m := planCache.Load(); m != nil {
		old = *m
	}
	if p := old[t]; p != nil {
		return p
	}
	b := planBuilder{known: old, fresh: map[reflect.Type]*typePlan{}, noMsgp: map[reflect.Type]*typePlan{}}
	p := b.plan(t)
	m := make(map[reflect.Type]*typePlan, len(old)+len(b.fresh))
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

// maxReflectedDepth bounds the nesting of containers and pointers in one reflected value,
// so a cyclic value fails with an error instead of running out of stack.
const maxReflectedDepth = 128

// planBuilder builds the plans of one buildPlan call. Plans are registered before they are
// filled, so recursive types end up pointing at themselves.
type planBuilder struct {
	known  map[reflect.Type]*typePlan // published
	fresh  map[reflect.Type]*typePlan // built by this call, published at its end
	noMsgp map[reflect.Type]*typePlan // variants that ignore msgp.Marshaler (opMsgp fallbacks)
}

func (b *planBuilder) plan(t reflect.Type) *typePlan {
	if p := b.known[t]; p != nil {
		return p
	}
	if p := b.fresh[t]; p != nil {
		return p
	}
	p := &typePlan{typ: t}
	b.fresh[t] = p
	b.fill(p, t, false)
	return p
}

// planNoMsgp is t's plan as if neither t nor *t implemented msgp.Marshaler.
func (b *planBuilder) planNoMsgp(t reflect.Type) *typePlan {
	if p := b.noMsgp[t]; p != nil {
		return p
	}
	p := &typePlan{typ: t}
	b.noMsgp[t] = p
	b.fill(p, t, true)
	return p
}

// methodOp is the op for the first interface t implements, in precedence order: zap's own
// marshalers win, then generated msgp code, then what encoding/json would call.
func methodOp(t reflect.Type, noMsgp bool) planOp {
	switch {
	case t.Implements(objectMarshalerT):
		return opObject
	case t.Implements(arrayMarshalerT):
		return opLogArray
	case !noMsgp && t.Implements(msgpMarshalerT):
		return opMsgp
	case t.Implements(jsonMarshalerT):
		return opJSON
	case t.Implements(textMarshalerT):
		return opText
	case t.Implements(errorT):
		return opError
	}
	return opUnsupported // none
}

func (b *planBuilder) fill(p *typePlan, t reflect.Type, noMsgp bool) {
	switch t {
	case timeType:
		p.op = opTime
		return
	case durationType:
		p.op = opDuration
		return
	}
	k := t.Kind()
	// *time.Time has MarshalJSON too, but its element goes through EncodeTime.
	special := k == reflect.Pointer && (t.Elem() == timeType || t.Elem() == durationType)
	if k != reflect.Interface && !special {
		if k != reflect.Pointer {
			// Methods with pointer receivers apply to addressable values, as in encoding/json.
			if pop := methodOp(reflect.PointerTo(t), noMsgp); pop != opUnsupported && pop != methodOp(t, noMsgp) {
				if noMsgp {
					p.addr = b.planNoMsgp(reflect.PointerTo(t))
				} else {
					p.addr = b.plan(reflect.PointerTo(t))
				}
				p.box = pop == opMsgp
				p.addrSensitive = true
			}
		}
		if op := methodOp(t, noMsgp); op != opUnsupported {
			p.op = op
			if op == opMsgp {
				p.next = b.planNoMsgp(t)
			}
			return
		}
	}
	switch k {
	case reflect.Bool:
		p.op = opBool
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		p.op = opInt
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		p.op = opUint
	case reflect.Float32:
		p.op = opFloat32
	case reflect.Float64:
		p.op = opFloat64
	case reflect.String:
		p.op = opString
		if t == numberType {
			p.op = opNumber
		}
	case reflect.Interface:
		p.op = opInterface
	case reflect.Pointer:
		p.op = opPtr
		if noMsgp {
			// A msgp.Marshaler pointer falling back: its element must not try msgp again.
			p.elem = b.planNoMsgp(t.Elem())
		} else {
			p.elem = b.plan(t.Elem())
		}
	case reflect.Slice:
		// As encoding/json: byte slices are binary unless the bytes have marshalers.
		if et := t.Elem(); et.Kind() == reflect.Uint8 {
			pe := reflect.PointerTo(et)
			if !pe.Implements(jsonMarshalerT) && !pe.Implements(textMarshalerT) {
				p.op = opBytes
				return
			}
		}
		p.op = opSlice
		p.elem = b.plan(t.Elem())
	case reflect.Array:
		p.op = opArray
		p.elem = b.plan(t.Elem())
		p.addrSensitive = p.addrSensitive || p.elem.addrSensitive
	case reflect.Map:
		b.fillMap(p, t)
	case reflect.Struct:
		b.fillStruct(p, t)
	default:
		p.op = opUnsupported
	}
}

func (b *planBuilder) fillMap(p *typePlan, t reflect.Type) {
	kt := t.Key()
	switch kt.Kind() {
	case reflect.String:
		p.keyOp = opString
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		p.keyOp = opInt
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		p.keyOp = opUint
	default:
		if !kt.Implements(textMarshalerT) {
			p.op = opUnsupported
			return
		}
		p.keyOp = opText
	}
	// encoding/json writes string-kind keys as they are even when they are TextMarshalers,
	// and prefers TextMarshaler to the number for integer kinds.
	if p.keyOp != opString && kt.Implements(textMarshalerT) {
		p.keyOp = opText
	}
	p.op = opMap
	p.elem = b.plan(t.Elem())
	p.keySlice = reflect.SliceOf(kt)
	p.valSlice = reflect.SliceOf(t.Elem())
	p.anyMap = t == anyMapType
	p.strMap = t == strMapType
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
				sf := q.typ.Field(i)
				if sf.Anonymous {
					et := sf.Type
					if et.Kind() == reflect.Pointer {
						et = et.Elem()
					}
					if !sf.IsExported() && et.Kind() != reflect.Struct {
						continue
					}
				} else if !sf.IsExported() {
					continue
				}
				tag := fieldTag(sf)
				if tag == "-" {
					continue
				}
				name, opts, _ := strings.Cut(tag, ",")
				if !validTagName(name) {
					name = ""
				}
				index := append(slices.Clip(q.index), i)
				ft := sf.Type
				if ft.Name() == "" && ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if name != "" || !sf.Anonymous || ft.Kind() != reflect.Struct {
					f := structField{
						name:     name,
						tagged:   name != "",
						index:    index,
						typ:      sf.Type,
						omitNil:  tagHas(opts, "omitempty"),
						omitZero: tagHas(opts, "omitzero"),
					}
					if f.name == "" {
						f.name = sf.Name
					}
					if tagHas(opts, "string") {
						switch ft.Kind() {
						case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
							reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
							reflect.Float32, reflect.Float64, reflect.String:
							f.quoted = true
						}
					}
					if f.omitZero {
						f.isZero = zeroFunc(sf.Type)
					}
					fields = append(fields, f)
					if count[q.typ] > 1 {
						// The same struct embedded twice at this depth: a duplicate makes the
						// name cancel out below.
						fields = append(fields, f)
					}
					continue
				}
				nextCount[ft]++
				if nextCount[ft] == 1 {
					next = append(next, queued{typ: ft, index: index})
				}
			}
		}
		count = nextCount
	}

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

func (b *planBuilder) fillStruct(p *typePlan, t reflect.Type) {
	p.op = opStruct
	sfs := structFields(t)
	p.fields = make([]fieldPlan, len(sfs))
	p.fixed = true
	for i, sf := range sfs {
		f := &p.fields[i]
		f.key = appendStr(nil, sf.name)
		f.index = sf.index
		f.omitNil, f.omitZero, f.quoted, f.isZero = sf.omitNil, sf.omitZero, sf.quoted, sf.isZero
		f.plan = b.plan(sf.typ)
		// A nil embedded pointer on the way hides the field.
		ft := t
		for _, x := range sf.index[:len(sf.index)-1] {
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			ft = ft.Field(x).Type
			if ft.Kind() == reflect.Pointer {
				f.viaPtr = true
			}
		}
		if f.viaPtr || f.omitNil || f.omitZero {
			p.fixed = false
		}
		if !f.viaPtr && f.plan.addrSensitive {
			p.addrSensitive = true
		}
	}
}
