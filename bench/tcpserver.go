package bench

import (
	"fmt"
	"net"
	"sync"
	"time"
)

// tcpServer is what the bench's own receivers (LineReceiver, ClockReceiver) share: a
// loopback listener, one goroutine per connection, Stall/Resume, change notification for
// waiters, and Close. A receiver embeds it, keeps its own counters under mu, and passes
// start its connection reader and its count. Safe for concurrent use.
type tcpServer struct {
	ln     net.Listener
	done   chan struct{}
	wg     sync.WaitGroup
	once   sync.Once
	handle func(net.Conn) // reads one connection until it fails; the server closes it
	count  func() int64   // the receiver's progress; called with mu held

	mu      sync.Mutex
	closed  bool
	conns   map[net.Conn]struct{}
	changed chan struct{} // closed on the next change; nil while nobody waits
	stalled chan struct{} // non-nil while stalled
}

// listenTCP opens a listener on a free loopback port; start begins accepting. They are
// separate so that the receiver embedding the server is complete before a connection can
// reach it.
func listenTCP() (*tcpServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("bench: listen: %w", err)
	}
	return &tcpServer{ln: ln, done: make(chan struct{}), conns: make(map[net.Conn]struct{})}, nil
}

func (s *tcpServer) start(handle func(net.Conn), count func() int64) {
	s.handle, s.count = handle, count
	s.wg.Add(1)
	go s.accept()
}

// Addr returns "tcp://127.0.0.1:PORT".
func (s *tcpServer) Addr() string { return "tcp://" + s.ln.Addr().String() }

// Count returns the receiver's progress so far.
func (s *tcpServer) Count() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.count()
}

// CPU is 0: the receiver runs in the caller's process.
func (s *tcpServer) CPU() time.Duration { return 0 }

// changedLocked wakes the waiters; the caller holds mu.
func (s *tcpServer) changedLocked() {
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
}

func (s *tcpServer) waitFor(cond func(int64) bool, timeout time.Duration) (int64, bool) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		s.mu.Lock()
		n := s.count()
		if cond(n) {
			s.mu.Unlock()
			return n, true
		}
		if s.changed == nil {
			s.changed = make(chan struct{})
		}
		ch := s.changed
		s.mu.Unlock()
		select {
		case <-ch:
		case <-s.done:
			return s.Count(), false
		case <-t.C:
			return s.Count(), false
		}
	}
}

// Stall stops reading from every connection until Resume.
func (s *tcpServer) Stall() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stalled == nil {
		s.stalled = make(chan struct{})
	}
}

// Resume undoes Stall.
func (s *tcpServer) Resume() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stalled != nil {
		close(s.stalled)
		s.stalled = nil
	}
}

// Close stops the receiver, closes every connection and waits for its goroutines.
func (s *tcpServer) Close() error {
	var err error
	s.once.Do(func() {
		s.mu.Lock()
		s.closed = true
		for c := range s.conns {
			_ = c.Close()
		}
		s.mu.Unlock()
		close(s.done)
		err = s.ln.Close()
		s.wg.Wait()
	})
	return err
}

func (s *tcpServer) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			_ = c.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			s.handle(c)
			_ = c.Close()
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
		}()
	}
}

// gate blocks while stalled and reports false once the receiver is closed.
func (s *tcpServer) gate() bool {
	for {
		s.mu.Lock()
		ch, closed := s.stalled, s.closed
		s.mu.Unlock()
		if closed {
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
