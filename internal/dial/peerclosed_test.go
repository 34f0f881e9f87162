//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package dial

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore/internal/testkit"
)

// pair returns both ends of a loopback TCP connection.
func pair(t *testing.T) (client, server *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(); _ = s.Close() })
	return c.(*net.TCPConn), s.(*net.TCPConn)
}

func TestPeerCheckSeesAnOrderlyClose(t *testing.T) {
	c, s := pair(t)
	p := NewPeerCheck(c)
	if err := p.Closed(); err != nil {
		t.Fatalf("open connection: Closed() = %v, want nil", err)
	}
	if n := testkit.SteadyAllocs(100, func() { _ = p.Closed() }); n != 0 {
		t.Errorf("Closed allocates %v times per call; it runs before every frame", n)
	}
	_ = s.Close()
	testkit.WaitUntil(t, "the close is seen", func() bool { return errors.Is(p.Closed(), io.EOF) })
}

func TestPeerCheckLeavesBytesForTheReader(t *testing.T) {
	c, s := pair(t)
	p := NewPeerCheck(c)
	if _, err := s.Write([]byte("ab")); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	// Data before the close: the peek sees a byte, not the close, and must not take it.
	for i := 0; i < 100; i++ {
		if err := p.Closed(); err != nil {
			t.Fatalf("Closed() = %v with bytes still unread, want nil", err)
		}
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if b, err := io.ReadAll(c); string(b) != "ab" || err != nil {
		t.Fatalf("the reader got %q, %v; want \"ab\"", b, err)
	}
	if err := p.Closed(); !errors.Is(err, io.EOF) {
		t.Errorf("after the bytes were read: Closed() = %v, want io.EOF", err)
	}
}

func TestPeerCheckSeesAReset(t *testing.T) {
	c, s := pair(t)
	p := NewPeerCheck(c)
	_ = s.SetLinger(0) // close with a reset
	_ = s.Close()
	testkit.WaitUntil(t, "the reset is seen", func() bool { return p.Closed() != nil })
}

func TestPeerCheckDoesNotWaitForABlockedReader(t *testing.T) {
	c, s := pair(t)
	p := NewPeerCheck(c)
	read := make(chan error, 1)
	go func() {
		var b [1]byte
		_, err := c.Read(b[:])
		read <- err
	}()
	done := make(chan error, 1)
	go func() { done <- p.Closed() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Closed() = %v while the peer is open", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Closed waited for the reader")
	}
	_ = s.Close()
	if err := <-read; !errors.Is(err, io.EOF) {
		t.Errorf("the reader got %v, want EOF", err)
	}
}

func TestPeerCheckOfAClosedConnection(t *testing.T) {
	c, _ := pair(t)
	p := NewPeerCheck(c)
	_ = c.Close()
	if err := p.Closed(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Closed() = %v after a local close, want net.ErrClosed", err)
	}
	if err := (&PeerCheck{}).Closed(); err != nil {
		t.Errorf("zero PeerCheck: Closed() = %v, want nil", err)
	}
}
