package msgpenc

import (
	"reflect"
	"strings"
	"testing"

	"github.com/fluentcore/fluentcore/internal/testkit"
	"github.com/fluentcore/fluentcore/internal/wire"
	"github.com/tinylib/msgp/msgp"
)

// startRecord starts a record map in w, with no budget, and returns w.
func startRecord(w *Writer) *Writer {
	w.Begin(0, Budget{}, nil)
	w.Start(0, KindMap)
	w.Buf = append(w.Buf[:0], wire.Map32, 0, 0, 0, 0)
	return w
}

// newRecord is startRecord in a new Writer.
func newRecord() *Writer {
	w := NewWriter()
	return startRecord(&w)
}

// endRecord closes what is open and decodes the record.
func endRecord(t *testing.T, w *Writer) map[string]any {
	t.Helper()
	w.CloseTo(0)
	b := w.EndRecord()
	v, rest, err := testkit.ReadIntf(b)
	if err != nil || len(rest) != 0 {
		t.Fatalf("not one msgpack value: %v, %d bytes left", err, len(rest))
	}
	testkit.CheckRaw(t, b)
	return v.(map[string]any)
}

func putInt(w *Writer, i int) { w.Buf = msgp.AppendInt(w.Buf, i) }

// Headers are patched when their containers close; an element written into a map gets an
// empty key.
func TestContainersArePatchedWhenTheyClose(t *testing.T) {
	w := newRecord()
	w.Key("a")
	d := w.Open(KindArray)
	for i := range 3 {
		w.Elem()
		putInt(w, i)
	}
	w.CloseTo(d)
	w.Key("m")
	w.Open(KindMap)
	w.Elem() // an ArrayEncoder's call on a map
	putInt(w, 7)
	got := endRecord(t, w)
	want := map[string]any{"a": []any{int64(0), int64(1), int64(2)}, "m": map[string]any{"": int64(7)}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%v, want %v", got, want)
	}
}

// A slot keeps one value as it is, reports none for the caller's fallback, and wraps
// several in an array, or lets them flow into an enclosing array.
func TestSlotsHoldOneValue(t *testing.T) {
	w := newRecord()
	for _, n := range []int{0, 1, 3} {
		w.Key(strings.Repeat("v", n+1))
		s := w.OpenSlot()
		for i := range n {
			w.Elem()
			putInt(w, i)
		}
		if !w.CloseSlot(s) {
			putInt(w, -1) // the fallback
		}
	}
	w.Key("arr")
	d := w.Open(KindArray)
	w.Elem()
	s := w.OpenSlot()
	for i := range 2 {
		w.Elem()
		putInt(w, i)
	}
	w.CloseSlot(s)
	w.CloseTo(d)
	got := endRecord(t, w)
	want := map[string]any{"v": int64(-1), "vv": int64(0), "vvvv": []any{int64(0), int64(1), int64(2)},
		"arr": []any{int64(0), int64(1)}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%v, want %v", got, want)
	}
}

// Maps and arrays nest at most MaxDepth below the record: the one that would go deeper is
// the marker. A namespace past the cap is its key and the marker, once per map.
func TestNestingStopsAtMaxDepth(t *testing.T) {
	w := newRecord()
	w.Key("deep")
	opened := 0
	for !w.TooDeep() {
		w.Open(KindMap)
		opened++
		w.Key("next")
	}
	for range 3 {
		w.OpenNamespace("ns")
	}
	w.Key("after")
	putInt(w, 1)
	if opened != MaxDepth {
		t.Fatalf("%d maps opened, want %d", opened, MaxDepth)
	}
	v := endRecord(t, w)["deep"]
	for range MaxDepth - 1 {
		v = v.(map[string]any)["next"]
	}
	want := map[string]any{"next": TooDeepMarker, "ns": TooDeepMarker, "after": int64(1)}
	if !reflect.DeepEqual(v, want) {
		t.Errorf("the deepest map is %v, want %v", v, want)
	}
}

// What a context leaves open (Unclosed) is open again in each record it is copied into
// (AppendContext), whatever the record held before it.
func TestContextContainersReopen(t *testing.T) {
	ctx := NewWriter()
	ctx.Start(-1, KindMap)
	ctx.Key("svc")
	ctx.PutStr("shop")
	ctx.OpenNamespace("req")
	ctx.Key("id")
	putInt(&ctx, 7)
	n, open := ctx.Unclosed()
	if n != 4 || len(open) != 1 {
		t.Fatalf("Unclosed: %d values, %d open; want 4 and 1", n, len(open))
	}
	for _, before := range []int{0, 2} {
		w := newRecord()
		for i := range before {
			w.Key(strings.Repeat("b", i+1))
			putInt(w, i)
		}
		w.AppendContext(ctx.Buf, n, open)
		w.Key("own")
		putInt(w, 1)
		got := endRecord(t, w)
		if len(got) != before+2 || got["svc"] != "shop" ||
			!reflect.DeepEqual(got["req"], map[string]any{"id": int64(7), "own": int64(1)}) {
			t.Errorf("%d keys before: %v", before, got)
		}
	}
}

// An abandoned entry's containers close without touching anything: the Writer is back at
// the record, Buf gone, for the next entry.
func TestAbandonedEntryUnwinds(t *testing.T) {
	w := NewWriter()
	dst := make([]byte, 0, 256)
	w.Buf = dst
	w.Begin(0, Budget{Limit: 64}, nil)
	w.Start(0, KindMap)
	w.Buf = append(w.Buf, wire.Map32, 0, 0, 0, 0)
	for range 10 {
		if w.Room(HeaderRoom + ContainerRoom) {
			w.Key("k")
			w.Open(KindArray)
			w.Elem()
		}
	}
	if !w.Abandoned() {
		t.Fatal("the entry fits")
	}
	w.CloseTo(0)
	if out := w.EndRecord(); out != nil || w.cur.depth != 0 || len(w.stack) != 0 {
		t.Errorf("after the stop: %d bytes, depth %d, %d containers open", len(out), w.cur.depth, len(w.stack))
	}
	if string(dst[:cap(dst)][:5]) != string([]byte{wire.Map32, 0, 0, 0, 0}) {
		t.Error("the abandoned record's header was patched")
	}
}
