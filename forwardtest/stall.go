package forwardtest

import "sync"

// stall is the switch that stops every connection from reading (Stall, Resume) and lets
// a stalled receiver read so many requests more (Allow).
//
// Invariants: ch is non-nil exactly while stalled, and a reader waits on it; allowed is
// 0 while not stalled; Allow and Resume close ch to wake the readers, and Allow replaces it
// so that the receiver stays stalled; once done is closed gate lets nobody through.
type stall struct {
	done <-chan struct{} // the receiver's: closed by Close, ends every stall

	mu      sync.Mutex
	ch      chan struct{} // non-nil while stalled
	allowed int           // requests a stalled receiver may still read
}

func newStall(done <-chan struct{}) *stall { return &stall{done: done} }

// stop stalls; it is idempotent.
func (s *stall) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
}

// resume ends the stall and forgets what allow let through and was not read.
func (s *stall) resume() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
	s.allowed = 0
}

// allow lets a stalled receiver read n more requests; it does nothing when not stalled or
// with n < 1.
func (s *stall) allow(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil || n < 1 {
		return
	}
	s.allowed += n
	close(s.ch) // wakes the readers waiting in gate; the receiver stays stalled
	s.ch = make(chan struct{})
}

// gate blocks while stalled and nothing is allowed; take, for a request about to be
// read, uses up one allowed. It reports false once the receiver is closed.
func (s *stall) gate(take bool) bool {
	for {
		s.mu.Lock()
		ch := s.ch
		if ch != nil && s.allowed > 0 {
			if take {
				s.allowed--
			}
			ch = nil
		}
		s.mu.Unlock()
		if isClosed(s.done) {
			return false
		}
		if ch == nil {
			return true
		}
		select {
		case <-ch:
		case <-s.done:
			return false
		}
	}
}
