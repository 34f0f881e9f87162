package forwardtest

import (
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"
)

// ledger is what a receiver has been sent: the stored entries, the counters, the entries by
// tag and the violations, and the waiters to wake when any of them changes.
//
// Invariants: every field after mu is read and written with mu held; every change is followed,
// under the same hold, by notifyLocked, so a waiter that saw the state before the change
// sees changed closed after it; entries is nil until the first entry is stored (CountOnly
// stores none); reset forgets all but the violations. The ledger never blocks while it
// holds mu.
type ledger struct {
	done <-chan struct{} // the receiver's: closed by Close, ends every wait

	mu         sync.Mutex
	entries    []Entry
	stats      Stats
	byTag      map[string]int64 // entries by tag, in CountOnly mode too
	violations []error
	changed    chan struct{} // closed on the next change; nil while nobody waits
}

func newLedger(done <-chan struct{}) *ledger { return &ledger{done: done} }

// request stores a decoded request: its entries (none in CountOnly mode), their number n,
// its tag's bytes (read before the next request reuses them) and its size.
func (l *ledger) request(batch []Entry, n int, tag []byte, size int) {
	l.mu.Lock()
	l.entries = append(l.entries, batch...)
	l.stats.Frames++
	l.stats.Entries += int64(n)
	if l.byTag == nil {
		l.byTag = map[string]int64{}
	}
	l.byTag[string(tag)] += int64(n)
	l.stats.Bytes += int64(size)
	l.notifyLocked()
	l.mu.Unlock()
}

// counter names one of the Stats that count events one by one.
type counter int

const (
	connections counter = iota
	truncated
	acks
	faultedAcks
	handshakes
	handshakeFailures
)

// count adds one to the counter c.
func (l *ledger) count(c counter) {
	l.mu.Lock()
	switch c {
	case connections:
		l.stats.Connections++
	case truncated:
		l.stats.Truncated++
	case acks:
		l.stats.Acks++
	case faultedAcks:
		l.stats.FaultedAcks++
	case handshakes:
		l.stats.Handshakes++
	case handshakeFailures:
		l.stats.HandshakeFailures++
	}
	l.notifyLocked()
	l.mu.Unlock()
}

// violation records a protocol violation and counts it.
func (l *ledger) violation(err error) {
	l.mu.Lock()
	l.violations = append(l.violations, err)
	l.stats.Violations++
	l.notifyLocked()
	l.mu.Unlock()
}

// counters returns the Stats.
func (l *ledger) counters() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stats
}

// entriesNow returns a copy of the entries (nil while none is stored).
func (l *ledger) entriesNow() []Entry {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.entriesLocked()
}

// snapshot returns a copy of the entries (nil while none is stored) and the Stats.
func (l *ledger) snapshot() ([]Entry, Stats) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.entriesLocked(), l.stats
}

func (l *ledger) entriesLocked() []Entry {
	if l.entries == nil {
		return nil
	}
	return append([]Entry(nil), l.entries...)
}

// tagCounts returns a copy of the entries counted by tag.
func (l *ledger) tagCounts() map[string]int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.byTag)
}

// byTagEntries returns copies of the entries grouped by tag (nil while none is stored).
func (l *ledger) byTagEntries() map[string][]Entry {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.entries == nil {
		return nil
	}
	m := map[string][]Entry{}
	for _, e := range l.entries {
		m[e.Tag] = append(m[e.Tag], e)
	}
	return m
}

// loggedViolations returns a copy of the violations, oldest first.
func (l *ledger) loggedViolations() []error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]error(nil), l.violations...)
}

// reset forgets the entries and the counters, not the violations.
func (l *ledger) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	clear(l.entries)
	l.entries = l.entries[:0]
	l.stats = Stats{}
	clear(l.byTag)
	l.notifyLocked()
}

// waitForEntries waits until at least n entries have arrived and returns a copy of the
// stored ones; on timeout or close it returns those stored so far and an error.
func (l *ledger) waitForEntries(n int, timeout time.Duration) ([]Entry, error) {
	var got []Entry
	var s Stats
	err := l.wait(timeout, func() bool {
		s = l.stats
		if s.Entries >= int64(n) {
			got = l.entriesLocked()
			return true
		}
		return false
	})
	if err != nil {
		got, s = l.snapshot()
		return got, fmt.Errorf("forwardtest: %d of %d entries arrived: %w (stats %+v)", s.Entries, n, err, s)
	}
	return got, nil
}

// waitFor waits until cond, called without mu held, returns true for the Stats.
func (l *ledger) waitFor(cond func(Stats) bool, timeout time.Duration) error {
	var s Stats
	err := l.wait(timeout, func() bool { s = l.stats; return false }, func() bool { return cond(s) })
	if err != nil {
		return fmt.Errorf("forwardtest: condition not met: %w (stats %+v)", err, s)
	}
	return nil
}

// wait runs locked (with mu held) and then unlocked (without) until one of them reports
// true, re-running both after every change of the ledger.
func (l *ledger) wait(timeout time.Duration, locked func() bool, unlocked ...func() bool) error {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		l.mu.Lock()
		ok := locked()
		closed := isClosed(l.done)
		if l.changed == nil {
			l.changed = make(chan struct{})
		}
		ch := l.changed
		l.mu.Unlock()
		for _, f := range unlocked {
			ok = ok || f()
		}
		if ok {
			return nil
		}
		if closed {
			return errors.New("receiver closed")
		}
		select {
		case <-ch:
		case <-l.done:
		case <-timer.C:
			return fmt.Errorf("timed out after %v", timeout)
		}
	}
}

// notifyLocked wakes every waiter. l.mu must be held.
func (l *ledger) notifyLocked() {
	if l.changed != nil {
		close(l.changed)
		l.changed = nil
	}
}

// isClosed reports whether done is closed.
func isClosed(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}
