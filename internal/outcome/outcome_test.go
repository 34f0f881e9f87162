package outcome

import (
	"testing"
	"time"
)

func TestEveryReasonHasItsOwnLabel(t *testing.T) {
	seen := map[string]Reason{}
	for r := range NumReasons {
		name := r.String()
		if name == "" {
			t.Errorf("reason %d has no label", r)
		}
		if o, dup := seen[name]; dup {
			t.Errorf("reasons %d and %d share the label %q", o, r, name)
		}
		seen[name] = r
	}
	for _, r := range []Reason{Degraded, Sampled, QueueFull, SpillFull} {
		if !Backpressure(r) {
			t.Errorf("%s is a drop for backpressure", r)
		}
	}
	for _, r := range []Reason{TooLarge, Closed, EncodeError, Shutdown, SpillFailed} {
		if Backpressure(r) {
			t.Errorf("%s is no drop for backpressure", r)
		}
	}
}

func TestKeepRatioAndMinusStayInBounds(t *testing.T) {
	if k := KeepRatio(Counts{}); k != 1 {
		t.Errorf("nothing offered: KeepRatio %v, want 1", k)
	}
	if k := KeepRatio(Counts{Offered: 4, Dropped: 1}); k != 0.75 {
		t.Errorf("KeepRatio %v, want 0.75", k)
	}
	// The drops are read before the entries, so a window may see more drops than entries.
	if k := KeepRatio(Counts{Offered: 2, Dropped: 3}); k != 0 {
		t.Errorf("more dropped than offered: KeepRatio %v, want 0", k)
	}
	got := Counts{Offered: 5, Dropped: 1, Pressed: 1}.Minus(Counts{Offered: 3, Dropped: 2, Pressed: 1})
	if want := (Counts{Offered: 2}); got != want {
		t.Errorf("Minus = %+v, want %+v (never below 0)", got, want)
	}
}

// The window answers with the newest count at least d old; while none is that old, with
// the oldest it has; and it keeps the last recentSlots counts as it rolls.
func TestWindowReadsTheNewestCountOldEnough(t *testing.T) {
	start := time.Unix(1_700_000_000, 0)
	var w Window
	w.Start(start)
	if got := w.Before(start, KeepWindow); got != (Counts{}) {
		t.Errorf("only the start: %+v, want the zero count", got)
	}
	for s := 1; s <= 3*recentSlots; s++ {
		now := start.Add(time.Duration(s) * time.Second)
		if !w.Due(now) {
			t.Fatalf("second %d: not due", s)
		}
		w.Roll(now, Counts{Offered: uint64(s)})
		if w.Due(now.Add(time.Second / 2)) {
			t.Fatalf("second %d: due again within the same second", s)
		}
		if w.Newest() != now.UnixNano() {
			t.Fatalf("second %d: Newest %d, want %d", s, w.Newest(), now.UnixNano())
		}
		// None that old yet: the start's count, 0.
		want := uint64(max(s-int(KeepWindow/time.Second), 0))
		if got := w.Before(now, KeepWindow).Offered; got != want {
			t.Fatalf("second %d: the count %v before is %d, want %d", s, KeepWindow, got, want)
		}
		if got := w.Before(now, DropWindow).Offered; got != uint64(s-1) {
			t.Fatalf("second %d: the count %v before is %d, want %d", s, DropWindow, got, s-1)
		}
	}
}
