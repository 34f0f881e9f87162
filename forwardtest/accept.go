package forwardtest

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"
)

// acceptor is a receiver's network side and lifetime: the listener, the connections it
// accepted, and the goroutines that accept and serve them, which close ends.
//
// Invariants: ln is nil while refusing (SetRefuse) and after close; a connection is
// registered in conns, and its serving goroutine counted in wg, only with mu held and
// only while ln is still the listener that accepted it and the acceptor is not closed, so
// that closeConns and close see every connection that is served; done is closed once, by
// close, after closed is set and before the listener and connections are closed; close
// returns only when every goroutine has.
type acceptor struct {
	network    string // "tcp" or "unix"
	bound      string // the address listened on, for listening again after SetRefuse
	tlsConf    *tls.Config
	readBuffer int                              // WithReadBuffer; 0 leaves it to the kernel
	logf       func(format string, args ...any) // never nil
	got        *ledger                          // counts the connections
	serve      func(rw net.Conn, id int64)      // serves one connection until it ends
	done       chan struct{}                    // closed by close
	wg         sync.WaitGroup
	closeOnce  sync.Once
	closeErr   error

	mu         sync.Mutex
	ln         net.Listener // nil while refusing connections
	closed     bool
	conns      map[net.Conn]struct{}
	nextConnID int64
}

// listen opens the listener at a.bound, with TLS if configured.
func (a *acceptor) listen() (net.Listener, error) {
	ln, err := new(net.ListenConfig).Listen(context.Background(), a.network, a.bound)
	if err != nil {
		return nil, fmt.Errorf("forwardtest: listen: %w", err)
	}
	if a.tlsConf != nil {
		ln = tls.NewListener(ln, a.tlsConf)
	}
	return ln, nil
}

// start makes ln the listener and accepts on it.
func (a *acceptor) start(ln net.Listener) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.bound = ln.Addr().String()
	a.ln = ln
	a.wg.Add(1)
	go a.acceptLoop(ln)
}

// refuse closes the listener (refuse) or listens again on the same address (!refuse);
// idempotent, and a no-op once closed.
func (a *acceptor) refuse(refuse bool) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil
	}
	if refuse {
		if a.ln == nil {
			return nil
		}
		ln := a.ln
		a.ln = nil // the accept loop sees it and returns
		return ln.Close()
	}
	if a.ln != nil {
		return nil
	}
	ln, err := a.listen()
	if err != nil {
		return err
	}
	a.ln = ln
	a.wg.Add(1)
	go a.acceptLoop(ln)
	return nil
}

// openConns returns the connections being served.
func (a *acceptor) openConns() []net.Conn {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.openConnsLocked()
}

func (a *acceptor) openConnsLocked() []net.Conn {
	conns := make([]net.Conn, 0, len(a.conns))
	for c := range a.conns {
		conns = append(conns, c)
	}
	return conns
}

// closeConns closes every open connection; new ones are accepted as usual.
func (a *acceptor) closeConns() {
	for _, c := range a.openConns() {
		_ = c.Close()
	}
}

// close stops listening, closes done and every connection, and waits for every goroutine.
// It is idempotent; every call returns the error of closing the listener.
func (a *acceptor) close() error {
	a.closeOnce.Do(func() {
		a.mu.Lock()
		a.closed = true
		ln := a.ln
		a.ln = nil
		conns := a.openConnsLocked()
		a.mu.Unlock()
		close(a.done)
		if ln != nil {
			a.closeErr = ln.Close()
		}
		for _, c := range conns {
			_ = c.Close()
		}
		a.wg.Wait()
	})
	return a.closeErr
}

// acceptLoop accepts connections on ln until ln is closed by close or refuse.
func (a *acceptor) acceptLoop(ln net.Listener) {
	defer a.wg.Done()
	var delay time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			a.mu.Lock()
			gone := a.ln != ln
			a.mu.Unlock()
			if isClosed(a.done) || gone {
				return
			}
			// A transient failure (for example EMFILE): back off and try again.
			delay = min(max(2*delay, 5*time.Millisecond), 200*time.Millisecond)
			a.logf("forwardtest: accept: %v; retrying in %v", err, delay)
			select {
			case <-a.done:
				return
			case <-time.After(delay):
			}
			continue
		}
		delay = 0
		if a.readBuffer > 0 {
			a.fixReadBuffer(nc)
		}
		id, ok := a.register(nc, ln)
		if !ok {
			_ = nc.Close()
			return
		}
		a.got.count(connections)
		go a.run(nc, id)
	}
}

// register records nc, accepted on ln, and counts its goroutine; false if the acceptor
// closed or refuses (SetRefuse) since the kernel accepted nc: it is then refused like those
// that came after, not kept, for registering it would let it slip past a closeConns that
// ran in between and serve on through the fault.
func (a *acceptor) register(nc net.Conn, ln net.Listener) (int64, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed || a.ln != ln {
		return 0, false
	}
	a.nextConnID++
	a.conns[nc] = struct{}{}
	a.wg.Add(1)
	return a.nextConnID, true
}

// run serves nc, then closes and forgets it.
func (a *acceptor) run(nc net.Conn, id int64) {
	defer a.wg.Done()
	defer func() {
		_ = nc.Close()
		a.mu.Lock()
		delete(a.conns, nc)
		a.mu.Unlock()
	}()
	a.serve(nc, id)
}

// fixReadBuffer sets an accepted connection's kernel receive buffer (WithReadBuffer).
func (a *acceptor) fixReadBuffer(nc net.Conn) {
	c := nc
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	sb, ok := c.(interface{ SetReadBuffer(int) error })
	if !ok {
		a.logf("forwardtest: %T has no read buffer to set", c)
		return
	}
	if err := sb.SetReadBuffer(a.readBuffer); err != nil {
		a.logf("forwardtest: read buffer: %v", err)
	}
}

func parseAddr(addr string) (network, address string, err error) {
	switch {
	case strings.HasPrefix(addr, "unix://"):
		network, address = "unix", strings.TrimPrefix(addr, "unix://")
	case strings.HasPrefix(addr, "tcp://"):
		network, address = "tcp", strings.TrimPrefix(addr, "tcp://")
	case strings.Contains(addr, "://"):
		return "", "", fmt.Errorf("forwardtest: address %q: only tcp:// and unix:// are supported", addr)
	default:
		network, address = "tcp", addr
	}
	if address == "" {
		return "", "", fmt.Errorf("forwardtest: address %q has no host:port or path", addr)
	}
	return network, address, nil
}
