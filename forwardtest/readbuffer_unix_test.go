//go:build unix

package forwardtest

import (
	"net"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReadBufferFixesTheKernelsReceiveBuffer reads SO_RCVBUF off the receiver's side of
// a connection: the size WithReadBuffer set (Linux reports it doubled), where without the
// option it is the kernel's default (on Linux tcp_rmem's middle value, which then grows).
func TestReadBufferFixesTheKernelsReceiveBuffer(t *testing.T) {
	const size = 16 << 10
	readBuffer := func(opts ...Option) int {
		r := NewReceiver(t, opts...)
		c, err := net.Dial("tcp", strings.TrimPrefix(r.Addr(), "tcp://"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return serverReadBuffer(t, r)
	}
	if def := readBuffer(); def <= 2*size {
		t.Skipf("the kernel's default receive buffer is %d bytes: too small to tell the option's apart", def)
	}
	if got := readBuffer(WithReadBuffer(size)); got < size || got > 2*size {
		t.Errorf("SO_RCVBUF = %d, want %d (or twice that)", got, size)
	}
}

func TestNegativeReadBufferIsRefused(t *testing.T) {
	if r, err := Start(WithReadBuffer(-1)); err == nil {
		r.Close()
		t.Error("Start accepted a negative read buffer")
	}
}

// serverReadBuffer waits for r's first connection and reads its SO_RCVBUF.
func serverReadBuffer(t *testing.T, r *Receiver) int {
	t.Helper()
	if err := r.WaitFor(func(s Stats) bool { return s.Connections > 0 }, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	var nc net.Conn
	for _, c := range r.acc.openConns() {
		nc = c
	}
	raw, err := nc.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var got int
	var gerr error
	if err := raw.Control(func(fd uintptr) {
		got, gerr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF)
	}); err != nil {
		t.Fatal(err)
	}
	if gerr != nil {
		t.Fatal(gerr)
	}
	return got
}
