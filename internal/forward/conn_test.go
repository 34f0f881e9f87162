package forward

import (
	"bytes"
	"context"
	"io"
	"net"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore/forwardtest"
	"github.com/fluentcore/fluentcore/internal/testkit"
)

// Tests of one connection's parts (conn.go): closing it, bounded, when the receiver
// stopped reading.

// Failed attempts and Close on a TLS connection are bounded by their own timeouts.
// crypto/tls closes a connection with a close_notify alert, a write it gives 5 s of its
// own: into a receiver that stopped reading, that was a 5 s stall after every failed write
// or ack wait, and 5 s more in Close.
func TestTLSCloseIsBoundedWhenTheReceiverStopsReading(t *testing.T) {
	cert, err := forwardtest.NewTLSCert()
	if err != nil {
		t.Fatal(err)
	}
	const timeout = 100 * time.Millisecond
	for _, tc := range []struct {
		name string
		ack  bool
		want string // "" means the send succeeds and only close is measured
	}{
		{"write timeout", false, "i/o timeout"},
		{"ack timeout", true, "no ack"},
		{"close", false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := forwardtest.NewReceiver(t, forwardtest.WithTLS(cert.ServerConfig()), forwardtest.WithLogf(nil))
			if tc.ack {
				r.SetAckFault(forwardtest.AckWithhold)
			}
			s := settingsFor(t, cert.ClientConfig(), r.Addr())
			s.WriteTimeout, s.AckTimeout, s.RequireAck = timeout, timeout, tc.ack
			var stalled atomic.Bool
			s.Dial = func(ctx context.Context, network, address string) (net.Conn, error) {
				var d net.Dialer
				c, err := d.DialContext(ctx, network, address)
				if err != nil {
					return nil, err
				}
				return testkit.NewStallConn(c, &stalled), nil
			}
			f := New(s, 1)[0]
			if !tc.ack {
				if _, _, err := f.Send(context.Background(), "t", testkit.Entries(1, "x"), 1); err != nil {
					t.Fatal(err) // connected, TLS done
				}
			}
			stalled.Store(tc.want != "" && !tc.ack)
			armed := make(chan struct{})
			go func() {
				defer close(armed)
				if tc.ack { // stop reading once the frame is in: the ack wait times out
					_ = r.WaitFor(func(s forwardtest.Stats) bool { return s.Frames >= 1 }, 10*time.Second)
					stalled.Store(true)
				}
			}()
			start := time.Now()
			_, _, err := f.Send(context.Background(), "t", testkit.Entries(1, "x"), 1)
			<-armed
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("send: %v, want %q", err, tc.want)
			}
			stalled.Store(true)
			f.Close()
			// Functional bounds with slack, not performance figures: the bug took 5 s more.
			if d := time.Since(start); d > timeout+2*time.Second {
				t.Fatalf("send and close took %v; the timeout is %v", d, timeout)
			}
		})
	}
}

// A receiver that sends what nobody asked for (no acks requested) loses the connection:
// the client reads at most 512 bytes of it and never blocks on it.
func TestUnaskedBytesEndTheConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // bytes nobody asked for, as long as the client reads them
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		go func() { _, _ = io.Copy(io.Discard, c) }()
		_ = c.SetWriteDeadline(time.Now().Add(10 * time.Second))
		fill := bytes.Repeat([]byte{'x'}, 4096)
		for {
			if _, err := c.Write(fill); err != nil {
				return
			}
		}
	}()
	s := settingsFor(t, nil, ln.Addr().String())
	s.WriteTimeout = time.Second
	f := newOne(t, s)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, _, err = f.Send(context.Background(), "t", testkit.Entries(1, "x"), 1)
	if err != nil && !strings.Contains(err.Error(), "did not ask for") {
		t.Fatalf("send: %v", err)
	}
	if c := f.link.conn; c != nil {
		select {
		case <-c.dead:
			if !strings.Contains(c.err.Error(), "did not ask for") {
				t.Fatalf("reader ended with %v", c.err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the reader kept a connection that sends unasked bytes")
		}
	}
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 256<<10 {
		t.Errorf("allocated %d bytes", alloc)
	}
}
