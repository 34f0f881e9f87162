package forwardtest

import (
	"sync"
	"time"
)

// pacer holds a reader to rate entries a second (WithReadRate over all connections,
// WithConnReadRate on one).
//
// Invariants: next is when the entries taken so far fit the rate, read and moved with mu
// held; it only moves forward from the later of itself and now; a rate of 0 is no limit
// and never waits.
type pacer struct {
	rate float64

	mu   sync.Mutex
	next time.Time
}

// take waits until n more entries fit the rate; false if done closed meanwhile.
func (p *pacer) take(n int, done <-chan struct{}) bool {
	if p.rate <= 0 {
		return true
	}
	p.mu.Lock()
	now := time.Now()
	at := p.next
	if at.Before(now) {
		at = now
	}
	p.next = at.Add(time.Duration(float64(n) / p.rate * float64(time.Second)))
	p.mu.Unlock()
	t := time.NewTimer(time.Until(at))
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-done:
		return false
	}
}
