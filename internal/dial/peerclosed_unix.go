//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package dial

import (
	"errors"
	"io"
	"net"
	"syscall"
)

// PeerCheck tells whether the peer of a connection has already closed it, by peeking at
// the socket without blocking and without taking a byte from it. Without acks it is the
// last check before a write: a frame written into a connection the receiver has closed is
// otherwise counted sent and lost, and the goroutine reading the connection, which would
// see the same close, may not have been scheduled yet; the kernel already knows.
// The zero value (and a PeerCheck of something that is not a socket) never reports a
// close. Not safe for concurrent use; safe while another goroutine reads the connection.
type PeerCheck struct {
	rc   syscall.RawConn
	peek func(fd uintptr) // bound once, so that Closed does not allocate
	err  error
}

// NewPeerCheck returns the check for conn, the transport (under TLS, if any).
func NewPeerCheck(conn net.Conn) *PeerCheck {
	p := &PeerCheck{}
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return p
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return p
	}
	p.rc = rc
	p.peek = func(fd uintptr) {
		var b [1]byte
		for {
			n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			switch {
			case errors.Is(err, syscall.EINTR):
				continue
			case errors.Is(err, syscall.EAGAIN):
				p.err = nil // open, nothing to read
			case err != nil:
				p.err = err // reset
			case n == 0:
				p.err = errPeerClosed
			default:
				p.err = nil // open, with bytes for the reader
			}
			return
		}
	}
	return p
}

var errPeerClosed = &peerClosedError{}

type peerClosedError struct{}

func (*peerClosedError) Error() string { return "connection closed by the peer" }
func (*peerClosedError) Unwrap() error { return io.EOF }

// Closed returns nil while the connection is open (or when it cannot tell), an error
// wrapping io.EOF after an orderly close by the peer, and the socket's error after a reset
// or when the connection was closed here.
func (p *PeerCheck) Closed() error {
	if p == nil || p.rc == nil {
		return nil
	}
	// Control, not Read: the reader goroutine holds the connection's read lock while it waits.
	if err := p.rc.Control(p.peek); err != nil {
		return err
	}
	return p.err
}
