package msgpenc

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tinylib/msgp/msgp"
	"go.uber.org/zap/zapcore"

	"github.com/fluentcore/fluentcore/internal/wire"
)

// host writes times and durations as ints and refuses zap's marshalers: what a Reflector
// hands its Host.
type host struct{ r *Reflector }

var errNoMarshalers = errors.New("no marshalers here")

func (h host) Object(zapcore.ObjectMarshaler) error { return errNoMarshalers }
func (h host) Array(zapcore.ArrayMarshaler) error   { return errNoMarshalers }
func (h host) Time(t time.Time)                     { h.r.Buf = msgp.AppendInt64(h.r.Buf, t.Unix()) }
func (h host) Duration(d time.Duration)             { h.r.Buf = msgp.AppendInt64(h.r.Buf, int64(d)) }

// Field and Element write a reflected value under its key or as an element, counted in the
// current container; a value that cannot be encoded writes nothing and is an error, one
// that does not fit the budget writes nothing and is not.
func TestReflectorFieldsAndElements(t *testing.T) {
	r := new(Reflector)
	*r = NewReflector(host{r}, nil)
	startRecord(&r.Writer)
	type pair struct {
		A int       `json:"a"`
		T time.Time `json:"t"`
	}
	if err := r.Field("p", pair{A: 1, T: time.Unix(5, 0)}); err != nil {
		t.Fatal(err)
	}
	if err := r.Field("ch", make(chan int)); err == nil {
		t.Error("a channel was encoded")
	}
	if err := r.Field("obj", struct{ zapcore.ObjectMarshaler }{}); !errors.Is(err, errNoMarshalers) {
		t.Errorf("a zap marshaler not written through the host: %v", err)
	}
	if err := r.Element(map[string]any{"k": []any{"v", 2.5}}); err != nil { // in a map: an empty key
		t.Fatal(err)
	}
	got := endRecord(t, &r.Writer)
	want := map[string]any{"p": map[string]any{"a": int64(1), "t": int64(5)}, "": map[string]any{"k": []any{"v", 2.5}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%v, want %v", got, want)
	}

	// Past the budget: nothing written, no error.
	r.Begin(0, Budget{Limit: 64, Cut: true}, nil)
	r.Start(0, KindMap)
	r.Buf = append(r.Buf[:0], wire.Map32, 0, 0, 0, 0)
	if err := r.Field("big", []string{strings.Repeat("x", 100)}); err != nil || len(r.Buf) != 5 || r.Values() != 0 {
		t.Errorf("a value past the budget: %v, %d bytes, %d values", err, len(r.Buf), r.Values())
	}
}
