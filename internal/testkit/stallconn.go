package testkit

import (
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// StallConn is a transport whose writes block, as into a receiver that stopped reading
// with the socket buffers full, while stalled is set: until the write deadline or Close.
type StallConn struct {
	net.Conn
	stalled *atomic.Bool
	mu      sync.Mutex
	wdl     time.Time
	changed chan struct{} // closed and replaced when the deadline changes
	closed  chan struct{}
	once    sync.Once
}

// NewStallConn returns c, whose writes block while stalled is set.
func NewStallConn(c net.Conn, stalled *atomic.Bool) *StallConn {
	return &StallConn{Conn: c, stalled: stalled, changed: make(chan struct{}), closed: make(chan struct{})}
}

func (c *StallConn) setWriteDeadline(t time.Time) {
	c.mu.Lock()
	c.wdl = t
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

// SetDeadline sets both deadlines; a blocked write sees the new one.
func (c *StallConn) SetDeadline(t time.Time) error {
	c.setWriteDeadline(t)
	return c.Conn.SetDeadline(t)
}

// SetWriteDeadline sets the write deadline; a blocked write sees the new one.
func (c *StallConn) SetWriteDeadline(t time.Time) error {
	c.setWriteDeadline(t)
	return c.Conn.SetWriteDeadline(t)
}

// Write blocks while the connection is stalled, until the write deadline passes (an
// os.ErrDeadlineExceeded) or Close (net.ErrClosed); then it writes p.
func (c *StallConn) Write(p []byte) (int, error) {
	for c.stalled.Load() {
		c.mu.Lock()
		dl, changed := c.wdl, c.changed
		c.mu.Unlock()
		var expire <-chan time.Time
		if !dl.IsZero() {
			t := time.NewTimer(time.Until(dl))
			defer t.Stop()
			expire = t.C
		}
		select {
		case <-expire:
			return 0, &net.OpError{Op: "write", Net: "tcp", Err: os.ErrDeadlineExceeded}
		case <-c.closed:
			return 0, net.ErrClosed
		case <-changed:
		}
	}
	return c.Conn.Write(p)
}

// Close closes the connection and ends a blocked write.
func (c *StallConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}
