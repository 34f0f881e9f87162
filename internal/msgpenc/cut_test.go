package msgpenc

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	"github.com/tinylib/msgp/msgp"

	"github.com/fluentcore/fluentcore/internal/testkit"
	"github.com/fluentcore/fluentcore/internal/wire"
)

// field is one key of a record and what writes its value.
type field struct {
	key string
	put func(w *Writer)
}

func str(k, v string) field { return field{k, func(w *Writer) { w.PutStr(v) }} }

// writeEntry writes one Forward entry, [EventTime, {fields}], with a Writer, no budget.
func writeEntry(fs ...field) []byte {
	w := NewWriter()
	w.Begin(0, Budget{}, nil)
	w.Buf = wire.AppendEventTime(append(w.Buf, wire.Array2), 1700000000, 5)
	w.Start(len(w.Buf), KindMap)
	w.Buf = append(w.Buf, wire.Map32, 0, 0, 0, 0)
	for _, f := range fs {
		w.Key(f.key)
		f.put(&w)
	}
	return w.EndRecord()
}

// record decodes entry's record.
func record(t *testing.T, entry []byte) map[string]any {
	t.Helper()
	v, _, err := testkit.ReadIntf(entry)
	if err != nil {
		t.Fatal(err)
	}
	return v.([]any)[1].(map[string]any)
}

func TestCapEntry(t *testing.T) {
	big := strings.Repeat("日本語", 20000) // multi-byte: cuts must keep whole characters
	list := func(w *Writer) {
		d := w.Open(KindArray)
		for _, s := range []string{strings.Repeat("x", 5000), "y", strings.Repeat("é", 3000)} {
			w.Elem()
			w.PutStr(s)
		}
		w.CloseTo(d)
	}
	obj := func(w *Writer) {
		d := w.Open(KindMap)
		w.Key("deep")
		w.PutStr(strings.Repeat("z", 40000))
		w.Key("n")
		w.Buf = msgp.AppendInt(w.Buf, 1)
		w.CloseTo(d)
	}
	orig := writeEntry(str("level", "error"), str("msg", "hello"), str("small", "kept as it is"), str("big", big),
		field{"bin", func(w *Writer) { w.PutBin(bytes.Repeat([]byte{0xff, 0}, 30000)) }},
		field{"list", list}, field{"obj", obj},
		str(strings.Repeat("k", 300), "a long key stays whole"),
		str("stacktrace", strings.Repeat("goroutine 1 [running]:\n\tmain.go:1\n", 2000)))
	mark := AppendStr(nil, "msgTruncated")
	a := NewAppender()
	prev := 0
	for _, limit := range []int{len(orig) - 1, 100_000, 64 << 10, 20_000, 4096, 1200} {
		capped, ok := a.CapEntry(nil, orig, limit, mark)
		if !ok {
			t.Fatalf("limit %d: could not cap a %d-byte entry", limit, len(orig))
		}
		cut := testkit.CheckCapped(t, orig, capped, limit, "msgTruncated")
		if cut < prev {
			t.Errorf("limit %d: %d values cut, fewer than with a larger limit (%d)", limit, cut, prev)
		}
		prev = cut
		if limit >= 4096 && len(capped) < limit-64 {
			t.Errorf("limit %d: capped to %d bytes, wasting the budget", limit, len(capped))
		}
		if rec := record(t, capped); rec["small"] != "kept as it is" || rec["msg"] != "hello" {
			t.Errorf("limit %d: short values were cut: %v %v", limit, rec["small"], rec["msg"])
		}
	}

	// Already small enough: returned as it is.
	if out, ok := a.CapEntry(nil, orig, len(orig), mark); !ok || !bytes.Equal(out, orig) {
		t.Error("an entry within the limit was changed")
	}
	// Too many small values: no cut makes it fit.
	many := make([]field, 2000)
	for i := range many {
		many[i] = field{"f" + strconv.Itoa(i), func(w *Writer) { w.Buf = msgp.AppendInt(w.Buf, i) }}
	}
	if _, ok := a.CapEntry(nil, writeEntry(many...), 4096, mark); ok {
		t.Error("CapEntry claims to fit 2000 fields in 4 KiB")
	}
	// Not an entry at all.
	if _, ok := a.CapEntry(nil, msgp.AppendString(nil, strings.Repeat("x", 100)), 10, mark); ok {
		t.Error("CapEntry accepted a bare string")
	}
	// The cut is appended to dst.
	dst := []byte{0xc0}
	if out, ok := a.CapEntry(dst, orig, 4096, mark); !ok || out[0] != 0xc0 || len(out) > 4097 {
		t.Errorf("cut not appended to dst: %v, % x…", ok, out[:min(len(out), 4)])
	}
}

// TestCapEntryHeaderGrowth: a record of 15 pairs has a fixmap header in generated code;
// a Writer's is map32, but CapEntry must handle any header, so feed it a hand-made fixmap.
func TestCapEntryHeaderGrowth(t *testing.T) {
	b := []byte{0x92}
	b = wire.AppendEventTime(b, 1, 2)
	b = msgp.AppendMapHeader(b, 15)
	for i := range 15 {
		b = msgp.AppendString(b, "k"+strconv.Itoa(i))
		b = msgp.AppendString(b, strings.Repeat("v", 100*i))
	}
	a := NewAppender()
	capped, ok := a.CapEntry(nil, b, 3000, AppendStr(nil, "msgTruncated"))
	if !ok {
		t.Fatal("cannot cap")
	}
	testkit.CheckCapped(t, b, capped, 3000, "msgTruncated")
	if rec := record(t, capped); len(rec) != 16 {
		t.Errorf("record has %d keys, want 16", len(rec))
	}
}
