package fluentcore

import (
	"context"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore/forwardtest"
	"github.com/fluentcore/fluentcore/internal/testkit"
)

// Tests of one connection's parts (forward_conn.go): closing it, bounded, when the
// receiver stopped reading.

// stallConn is a transport whose writes block, as into a receiver that stopped reading
// with the socket buffers full, while stalled is set: until the write deadline or Close.
type stallConn struct {
	net.Conn
	stalled *atomic.Bool
	mu      sync.Mutex
	wdl     time.Time
	changed chan struct{} // closed and replaced when the deadline changes
	closed  chan struct{}
	once    sync.Once
}

func (c *stallConn) setWriteDeadline(t time.Time) {
	c.mu.Lock()
	c.wdl = t
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

func (c *stallConn) SetDeadline(t time.Time) error {
	c.setWriteDeadline(t)
	return c.Conn.SetDeadline(t)
}

func (c *stallConn) SetWriteDeadline(t time.Time) error {
	c.setWriteDeadline(t)
	return c.Conn.SetWriteDeadline(t)
}

func (c *stallConn) Write(p []byte) (int, error) {
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

func (c *stallConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

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
			f := newForwarder(settingsFor(Config{Addr: r.Addr(), TLS: cert.ClientConfig(), WriteTimeout: timeout, AckTimeout: timeout, RequireAck: tc.ack}).connFor(infoStream))
			var stalled atomic.Bool
			f.dialRaw = func(ctx context.Context, network, address string) (net.Conn, error) {
				var d net.Dialer
				c, err := d.DialContext(ctx, network, address)
				if err != nil {
					return nil, err
				}
				return &stallConn{Conn: c, stalled: &stalled, changed: make(chan struct{}), closed: make(chan struct{})}, nil
			}
			if !tc.ack {
				if _, _, err := f.send(context.Background(), "t", testkit.Entries(1, "x"), 1); err != nil {
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
			_, _, err := f.send(context.Background(), "t", testkit.Entries(1, "x"), 1)
			<-armed
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("send: %v, want %q", err, tc.want)
			}
			stalled.Store(true)
			f.close()
			// Functional bounds with slack, not performance figures: the bug took 5 s more.
			if d := time.Since(start); d > timeout+2*time.Second {
				t.Fatalf("send and close took %v; the timeout is %v", d, timeout)
			}
		})
	}
}
