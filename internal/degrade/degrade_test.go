package degrade

import (
	"testing"
	"time"
)

// Shedding an entry the adaptive kind thinned puts the stream in the degraded state, with
// its event, before Shed returns; the switching kinds' drops enter only on their state
// machine.
func TestShedEntersDegradedFirst(t *testing.T) {
	var events []bool
	g := NewGate(func(_ time.Time, degraded bool) { events = append(events, degraded) })
	now := time.Unix(1_000, 0)
	clock := &clockAt{now: now}
	a := NewAdaptive(0.25, clock, func() Observation { return calm(clock.Now()) })
	a.mark(now.UnixNano())
	g.Shed(Thinned, clock)
	if !g.Degraded() || len(events) != 1 || !events[0] || g.Transitions() != 1 {
		t.Fatalf("after a shed: degraded %v, events %v, transitions %d", g.Degraded(), events, g.Transitions())
	}
	clock.now = now.Add(time.Millisecond)
	a.mark(now.Add(time.Millisecond).UnixNano())
	g.Shed(Thinned, clock)
	if len(events) != 1 {
		t.Fatalf("a second shed fired again: %v", events)
	}
	// The clock leaves the state once nothing has been shed for adaptiveHold.
	g.Apply(now.Add(2*adaptiveHold), a.Step(func() Observation { return calm(now.Add(2 * adaptiveHold)) }))
	if g.Degraded() || len(events) != 2 || events[1] {
		t.Fatalf("after adaptiveHold without a shed: degraded %v, events %v", g.Degraded(), events)
	}
	s := NewGate(func(time.Time, bool) { t.Fatal("event") })
	for _, v := range []Verdict{Dropped, Sampled} {
		s.Shed(v, clock)
	}
	if s.Degraded() {
		t.Fatal("a switching kind's drop entered degraded outside its state machine")
	}
}

// Apply enters the degraded state before Check asks Admit, and stops Check asking before it
// leaves it: an entry is never dropped while the stream shows normal.
func TestApplyEntersBeforeCheckingAndLeavesAfter(t *testing.T) {
	var g *Gate
	var seen []State
	g = NewGate(func(_ time.Time, degraded bool) {
		seen = append(seen, State{Degraded: degraded, Checking: g.Checking()})
	})
	now := time.Unix(1_000, 0)
	g.Apply(now, State{Degraded: true, Checking: true})
	if !g.Checking() {
		t.Fatal("degraded and not checking")
	}
	g.Apply(now, State{})
	if want := []State{{Degraded: true}, {}}; len(seen) != 2 || seen[0] != want[0] || seen[1] != want[1] {
		t.Fatalf("at the events (degraded, checking): %+v, want %+v", seen, want)
	}
}
