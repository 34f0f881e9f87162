// Package degrade is what lies beneath the info stream's degrade policy (the root's
// degrade.go): its two kinds, each in two parts, and the state the callers and the
// metrics see. It imports no other fluentcore package but internal/shed (see
// ARCHITECTURE.md).
//
//   - Admission is what the write path asks for each entry: Admit, safe for concurrent
//     use, allocation-free.
//   - Controller is what the clock steps: Step, given an Observation, one call at a time;
//     it returns the State the Gate then shows.
//   - Switch is the switching kinds (a state machine on the fill, and the sampler): it
//     implements those two and nothing else.
//   - Adaptive is the adaptive kind over internal/shed: it implements those two, and has
//     what only it does as its own methods (the room it counts, the weights, the yield).
//   - Gate is whether Check asks Admit, the degraded state and its transitions, and their
//     events.
package degrade

import (
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap/zapcore"
)

// Verdict is what Admit says of an entry: kept, or why not.
type Verdict uint8

const (
	// Keep keeps the entry.
	Keep Verdict = iota
	// Dropped is a switching kind's drop while degraded (drop all, keep Warn).
	Dropped
	// Sampled is the switching sampler's drop while degraded.
	Sampled
	// Thinned is the adaptive kind's shed: the stream must show degraded before the
	// entry is counted (Gate.Shed).
	Thinned
)

// Admission is the write path's side of a kind of policy. Admit decides whether an entry
// (its level, tag index, message, and time in unix nanos) is kept. Not the entry's pointer:
// through an interface it would escape, and every logging call would allocate. Safe for
// concurrent use.
type Admission interface {
	Admit(level zapcore.Level, tag uint16, msg string, at int64) Verdict
}

// Controller is the clock's side of a kind of policy. Step reads one Observation through
// read and returns the state it leads to. It reads it when the step can use it, in the
// order of its steps (a kind stepped from elsewhere too reads it under the lock that orders
// them): an observation read before another must not be stepped after it, or what only
// grows in it (Delivered) would go back.
type Controller interface {
	Step(read func() Observation) State
}

// State is what a step leads to: whether the stream is degraded, and whether Check must
// ask Admit, at Now, the observation's time.
type State struct {
	Now      time.Time
	Degraded bool
	Checking bool
}

// Observation is what the clock tells a Controller.
type Observation struct {
	Now             time.Time
	Buffered, Limit int64         // bytes buffered, and the buffer budget
	Room            int64         // bytes the stream's batches can still take
	Reserved        int64         // of them, the bytes held in reserve for keys kept whole
	DisconnectedFor time.Duration // how long sends have been failing; 0 when they succeed
	Delivered       uint64        // entries delivered so far
	Written         uint64        // entries the stream's writers have taken in so far
	EntryBytes      float64       // the size of an entry, on average
}

// Gate is the info stream's degrade state as its callers and its metrics see it: whether
// Check must ask Admit (one atomic load on the caller's path), whether the stream is
// degraded, how often that changed, and the events that report it.
//
// Invariants: the degraded state is entered before Check may drop an entry in it, and
// before an entry the adaptive kind thinned is counted; active is stored before the event
// (the event's reader sees the state it reports) and settled after it, so a caller that
// sheds waits on mu until the event has been delivered.
type Gate struct {
	// checking is 1 while Check must ask Admit: a word read by atomic.LoadUint32 rather
	// than an atomic.Bool, one call fewer for the inliner, so that Check inlines the test.
	checking    uint32
	active      atomic.Bool // degraded
	settled     atomic.Bool // active, once its event has been delivered
	transitions atomic.Uint64

	mu       sync.Mutex                         // serialises the transitions and their events
	onChange func(now time.Time, degraded bool) // reports a transition; nil for none
}

// NewGate returns a Gate, not checking and not degraded. onChange, if not nil, is called on
// each transition, before any entry is counted as shed in the new state.
func NewGate(onChange func(now time.Time, degraded bool)) *Gate {
	return &Gate{onChange: onChange}
}

// Checking reports whether Check must ask Admit.
func (g *Gate) Checking() bool { return atomic.LoadUint32(&g.checking) != 0 }

// StartChecking makes Check ask Admit from now on, until the next Apply says otherwise.
func (g *Gate) StartChecking() { atomic.StoreUint32(&g.checking, 1) }

// Degraded reports whether the stream is degraded.
func (g *Gate) Degraded() bool { return g.active.Load() }

// Transitions counts the changes between the normal and the degraded state.
func (g *Gate) Transitions() uint64 { return g.transitions.Load() }

// Apply shows the state a step led to, at now.
func (g *Gate) Apply(now time.Time, st State) {
	if st.Degraded {
		// Entered before Check may drop anything in it.
		g.set(now, true)
		g.setChecking(st.Checking)
		return
	}
	g.setChecking(st.Checking)
	g.set(now, false)
}

// Shed is told of an entry Admit did not keep, before it is counted: a Thinned one enters
// the degraded state first, whichever path thinned it. The clock is read only when the
// state moves. The switching kinds shed only while their state machine has entered it.
func (g *Gate) Shed(v Verdict, clock zapcore.Clock) {
	if v == Thinned && !g.settled.Load() {
		g.set(clock.Now(), true)
	}
}

func (g *Gate) setChecking(on bool) {
	var v uint32
	if on {
		v = 1
	}
	atomic.StoreUint32(&g.checking, v)
}

// set moves the degraded state and reports the transition, if it is one.
func (g *Gate) set(now time.Time, degraded bool) {
	if g.settled.Load() == degraded && g.active.Load() == degraded {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.active.Load() != degraded {
		g.active.Store(degraded)
		g.transitions.Add(1)
		if g.onChange != nil {
			g.onChange(now, degraded)
		}
	}
	g.settled.Store(degraded)
}
