package msgpenc

import (
	"bytes"
	"strings"
	"testing"

	"github.com/tinylib/msgp/msgp"
)

// owner counts the reports it gets.
type owner struct{ reports int }

func (o *owner) OverBudget() { o.reports++ }

// An entry past its budget is abandoned at the first value that does not fit: its owner is
// told once, Buf is let go, and every later value is refused at once; the caller's buffer
// is not written past the limit. The next entry starts whole.
func TestStopAbandonsTheEntryAndTellsItsOwnerOnce(t *testing.T) {
	a := NewAppender()
	dst := make([]byte, 3, 64)
	var o owner
	a.Buf = dst
	a.Begin(len(dst), Budget{Limit: 20}, &o)
	if !a.Room(20) {
		t.Fatal("20 bytes do not fit a budget of 20")
	}
	a.Buf = append(a.Buf, strings.Repeat("x", 15)...)
	if a.Room(6) || !a.Abandoned() || a.Buf != nil || o.reports != 1 {
		t.Fatalf("past the limit: room, abandoned %v, Buf %d bytes, %d reports; want abandoned, nil, 1",
			a.Abandoned(), len(a.Buf), o.reports)
	}
	for range 3 {
		if a.Room(0) {
			t.Fatal("a value fits after the stop")
		}
	}
	a.Truncate(5) // nothing to truncate once abandoned
	if o.reports != 1 || a.Buf != nil {
		t.Errorf("%d reports, Buf %v after more values: want 1, nil", o.reports, a.Buf)
	}
	if cap(dst) != 64 || len(dst) != 3 {
		t.Errorf("the caller's buffer changed: len %d cap %d", len(dst), cap(dst))
	}

	// The next entry: a new budget, no owner, nothing abandoned.
	a.Buf = dst[:0]
	a.Begin(0, Budget{}, nil)
	if !a.Room(1<<20) || a.Abandoned() || o.reports != 1 {
		t.Errorf("next entry: abandoned %v, %d reports", a.Abandoned(), o.reports)
	}
}

// Cutting, a stop ends the entry where it is: nothing is abandoned, no owner is told, and
// the room set aside (Reserve) is there again once Restored.
func TestCuttingStopKeepsTheEntry(t *testing.T) {
	a := NewAppender()
	var o owner
	end := a.Begin(0, CutShort(200), &o)
	a.Reserve(50)
	a.Buf = append(a.Buf, make([]byte, end-60)...)
	if a.Room(20) {
		t.Fatal("room set aside was used")
	}
	if a.Abandoned() || a.Buf == nil || o.reports != 0 {
		t.Fatalf("cutting: abandoned %v, Buf nil %v, %d reports", a.Abandoned(), a.Buf == nil, o.reports)
	}
	a.Restore(end)
	if !a.Room(50) {
		t.Error("the room set aside is not there after Restore")
	}
}

// Values longer than the value cap are cut: cutting, with their marker, to the cap (whole
// UTF-8 characters); otherwise stored cut for CapEntry, the j-th to precutLen(limit, j)
// bytes. StrRoom and BinRoom are never less than what PutStr and PutBin write.
func TestValuesAreCutToTheValueCap(t *testing.T) {
	long := strings.Repeat("é", 300) // 600 bytes
	bin := bytes.Repeat([]byte{1}, 600)

	a := NewAppender()
	a.Begin(0, CutShort(16*100), nil) // a value cap of 100
	for _, put := range []func(){
		func() { a.PutStr(long) }, func() { a.PutStrBytes([]byte(long)) }, func() { a.PutBin(bin) },
	} {
		a.Buf = a.Buf[:0]
		put()
		v, _, err := msgp.ReadIntfBytes(a.Buf)
		if err != nil {
			t.Fatal(err)
		}
		var got []byte
		switch v := v.(type) {
		case string:
			got = []byte(v)
			if room := a.StrRoom(long); room < len(a.Buf) {
				t.Errorf("StrRoom %d, PutStr wrote %d", room, len(a.Buf))
			}
		case []byte:
			got = v
			if room := a.BinRoom(len(bin)); room < len(a.Buf) {
				t.Errorf("BinRoom %d, PutBin wrote %d", room, len(a.Buf))
			}
		}
		i := bytes.Index(got, []byte(CapMarker))
		if i < 0 || i > 100 || !strings.HasSuffix(string(got), " bytes)") {
			t.Errorf("cut value %.40q…: want at most 100 bytes and the marker", got)
		}
	}

	// Stored cut (not cutting): no marker; each next value keeps less.
	a = NewAppender()
	a.Begin(0, FirstPass(1000, true), nil)
	for j := 1; j <= 3; j++ {
		mark := len(a.Buf)
		a.PutStr(strings.Repeat("x", 2000))
		v, _, _ := msgp.ReadStringBytes(a.Buf[mark:])
		if want := precutLen(1000, j); len(v) != want {
			t.Errorf("value %d stored cut to %d bytes, want %d", j, len(v), want)
		}
	}
	if len(a.precut) != 3 {
		t.Errorf("%d values recorded as stored cut, want 3", len(a.precut))
	}
	a.Truncate(0)
	if len(a.precut) != 0 {
		t.Errorf("%d values still recorded after truncating them", len(a.precut))
	}
}

// TrimScratch keeps no scratch buffer larger than KeptScratch (the root test of the shards'
// encoders walks every buffer).
func TestTrimScratchBoundsWhatIsKept(t *testing.T) {
	a := NewAppender()
	a.Begin(0, CutShort(16<<17), nil)
	a.PutStr(strings.Repeat("x", 1<<20)) // cut to 128 KiB through scratch
	if cap(a.scratch) <= KeptScratch {
		t.Fatalf("scratch did not grow (%d): the test does not test", cap(a.scratch))
	}
	a.TrimScratch()
	if cap(a.scratch) > KeptScratch {
		t.Errorf("scratch keeps %d bytes after TrimScratch", cap(a.scratch))
	}
}
