package tagtable

import (
	"fmt"
	"sync"
	"testing"
)

func newTestTable(max int) *Table {
	return New([Streams]string{"app", "app.err"}, max, 8, func(name string, stream int) string {
		return fmt.Sprintf("app.%s.%d", name, stream)
	})
}

// Names get indexes 1 to max in the order they come, each once whatever the goroutines
// asking; past max, a name too long, or one that is only dots gets index 0 and Over.
func TestLookupGivesEachNameOneIndexUpToTheCap(t *testing.T) {
	tb := newTestTable(3)
	if r := tb.Lookup(""); r != (Ref{}) {
		t.Errorf(`Lookup("") = %+v, want the streams' own tag`, r)
	}
	if tb.InUse() {
		t.Error("in use before any name")
	}
	var wg sync.WaitGroup
	refs := make([]Ref, 8)
	for i := range refs {
		wg.Add(1)
		go func() { defer wg.Done(); refs[i] = tb.Lookup("a") }()
	}
	wg.Wait()
	for _, r := range refs {
		if r != (Ref{Idx: 1}) {
			t.Fatalf("concurrent lookups of one name gave %+v, want index 1", refs)
		}
	}
	if !tb.InUse() {
		t.Error("not in use with a name")
	}
	if r := tb.Lookup("b"); r.Idx != 2 || r.Over {
		t.Errorf("second name: %+v", r)
	}
	for _, name := range []string{"toolongname", "...", "."} {
		if r := tb.Lookup(name); r != (Ref{Over: true}) {
			t.Errorf("Lookup(%q) = %+v, want past the cap", name, r)
		}
	}
	if r := tb.Lookup("c"); r.Idx != 3 {
		t.Errorf("third name: %+v", r)
	}
	if r := tb.Lookup("d"); r != (Ref{Over: true}) {
		t.Errorf("a name past max: %+v", r)
	}
	if r := tb.Lookup("a"); r.Idx != 1 {
		t.Errorf("a known name once full: %+v", r)
	}
	if tb.Count() != 3 || tb.Max() != 3 {
		t.Errorf("Count %d, Max %d; want 3, 3", tb.Count(), tb.Max())
	}
	if got := tb.TagOf(2, 1); got != "app.b.1" {
		t.Errorf("TagOf(2, err) = %q", got)
	}
	if got := tb.TagOf(0, 1); got != "app.err" {
		t.Errorf("TagOf(0, err) = %q", got)
	}
}

// Stats adds up the counters of the names that make one tag, per stream; index 0 has none.
func TestStatsAddsNamesThatMakeOneTag(t *testing.T) {
	tb := New([Streams]string{"app", "app.err"}, 4, 8, func(name string, stream int) string {
		return fmt.Sprintf("app.%s.%d", name[:1], stream) // "x1" and "x2" make one tag
	})
	if TotalsOf[Totals](tb, 0) != nil {
		t.Error("Stats of an empty table is not nil")
	}
	if tb.Counters(0) != nil {
		t.Error("index 0 has counters")
	}
	x1, x2, y := tb.Lookup("x1"), tb.Lookup("x2"), tb.Lookup("y")
	tb.Counters(x1.Idx).Entries[0].Add(2)
	tb.Counters(x2.Idx).Entries[0].Add(3)
	tb.Counters(x2.Idx).Delivered[0].Add(1)
	tb.Counters(y.Idx).Dropped[1].Add(4)
	got := TotalsOf[Totals](tb, 0)
	if got["app.x.0"] != (Totals{Entries: 5, Delivered: 1}) || got["app.y.0"] != (Totals{}) || len(got) != 2 {
		t.Errorf("info stream: %+v", got)
	}
	if got := TotalsOf[Totals](tb, 1); got["app.y.1"] != (Totals{Dropped: 4}) {
		t.Errorf("err stream: %+v", got)
	}
}
