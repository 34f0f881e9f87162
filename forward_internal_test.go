package fluentcore

import (
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore/forwardtest"
	"github.com/fluentcore/fluentcore/internal/testkit"
	"github.com/fluentcore/fluentcore/internal/wire"
	"github.com/tinylib/msgp/msgp"
)

// Every reconnect hands the dialer the host name as configured, never an address cached
// from an earlier lookup, so a name that moves is followed (Go resolves on every dial).
func TestReconnectResolvesTheNameAgain(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(r.Addr(), "tcp://"))
	f := newForwarder(settingsFor(Config{Addr: "localhost:" + port, RequireAck: true}))
	defer f.close()
	var mu sync.Mutex
	var dialed []string
	onDial(f, func(address string) {
		mu.Lock()
		dialed = append(dialed, address)
		mu.Unlock()
	})
	entries := testkit.Entries(1, "x")
	ctx := context.Background()
	for round := range 3 {
		deadline := time.Now().Add(5 * time.Second)
		for {
			_, _, err := f.send(ctx, "t", entries, 1)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		r.CloseConnections()
	}
	mu.Lock()
	defer mu.Unlock()
	if len(dialed) < 3 {
		t.Fatalf("dialed %v, want a dial per round", dialed)
	}
	for _, a := range dialed {
		if a != "localhost:"+port {
			t.Fatalf("dialed %q, want the name localhost:%s every time", a, port)
		}
	}
}

func TestDialTimeout(t *testing.T) {
	f := newForwarder(settingsFor(Config{Addr: "fluentd.invalid:24224", DialTimeout: 50 * time.Millisecond}))
	defer f.close()
	f.dialRaw = func(ctx context.Context, network, address string) (net.Conn, error) {
		<-ctx.Done() // a peer that never answers
		return nil, ctx.Err()
	}
	start := time.Now()
	_, _, err := f.send(context.Background(), "t", testkit.Entries(1, "x"), 1)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("send: %v, want the dial deadline", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("send took %v with a 50ms dial timeout", d)
	}
	if f.disconnectedFor(time.Now()) == 0 || f.lastError() == nil {
		t.Fatal("failure not recorded")
	}
}

// A batch that failed is resent with the same ack token, as fluentd does; a new batch,
// or the same buffer holding another length of entries (compact), gets a new one.
func TestResendReusesTheChunk(t *testing.T) {
	var tok ackToken
	a, b := testkit.Entries(2, "a"), testkit.Entries(2, "b")
	first := tok.forEntries(a)
	if again := tok.forEntries(a); again != first {
		t.Fatalf("resend got token %q, first attempt %q", again, first)
	}
	if other := tok.forEntries(b); other == first || len(other) != 24 {
		t.Fatalf("new batch got token %q (first %q)", other, first)
	}
	second := tok.forEntries(a)
	if shorter := tok.forEntries(a[:len(a)-1]); shorter == second {
		t.Fatalf("entries of another length kept token %q", shorter)
	}
}

// WriteTimeout bounds a write into a receiver that stopped reading; once it reads again,
// the next attempt goes through.
func TestWriteTimeout(t *testing.T) {
	r := forwardtest.NewReceiver(t, forwardtest.CountOnly())
	f := newForwarder(settingsFor(Config{Addr: r.Addr(), WriteTimeout: 50 * time.Millisecond}))
	defer f.close()
	entries := testkit.Entries(40_000, "fills the socket buffers quickly") // about 2 MB
	r.Stall()
	var err error
	for i := 0; i < 200 && err == nil; i++ {
		_, _, err = f.send(context.Background(), "t", entries, 40_000)
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("send into a stalled receiver: %v, want a write deadline error", err)
	}
	r.Resume()
	// The receiver first drains what was written; attempts may still time out meanwhile.
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, _, err := f.send(context.Background(), "t", entries, 40_000)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("send after Resume: %v", err)
		}
	}
}

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
			f := newForwarder(settingsFor(Config{Addr: r.Addr(), TLS: cert.ClientConfig(), WriteTimeout: timeout, AckTimeout: timeout, RequireAck: tc.ack}))
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

// An ack already queued wins over the close that followed it (fluentd with deny_keepalive
// acks, then closes): with both ready, awaitAck must report the frame acknowledged, every
// time, not choose at random.
func TestAwaitAckPrefersAQueuedAckOverTheClose(t *testing.T) {
	f := newForwarder(settingsFor(Config{RequireAck: true}))
	f.ackT = time.NewTimer(time.Hour)
	defer f.ackT.Stop()
	for i := 0; i < 100; i++ {
		c := &fconn{acks: make(chan string, 1), dead: make(chan struct{}), err: io.EOF, keepalive: true}
		c.acks <- "tok"
		close(c.dead)
		f.conn = c
		f.flights = append(f.flights[:0], flight{chunk: "tok", at: time.Now()})
		fl, err := f.awaitAck(context.Background())
		if err != nil || fl.chunk != "tok" {
			t.Fatalf("attempt %d: %v, %q; the queued ack was there", i, err, fl.chunk)
		}
	}
}

// The largest batch, incompressible, still makes a frame fluent-bit accepts: forwardtest
// enforces its 6144000-byte limit on the frame and on the decompressed entries.
func TestGzipFrameOfTheLargestIncompressibleBatchFits(t *testing.T) {
	r := forwardtest.NewReceiver(t, forwardtest.CountOnly())
	s := settingsFor(Config{Addr: r.Addr(), Compression: "gzip", MaxBatchBytes: maxBatchLimit, RequireAck: true})
	f := newForwarder(s)
	defer f.close()

	noise := make([]byte, maxBatchLimit-64)
	_, _ = rand.Read(noise)
	var entries []byte
	entries = msgp.AppendArrayHeader(entries, 2)
	entries = wire.AppendEventTime(entries, 1_700_000_000, 0)
	entries = msgp.AppendMapHeader(entries, 1)
	entries = msgp.AppendString(entries, "noise")
	entries = msgp.AppendBytes(entries, noise)
	if len(entries) > maxBatchLimit {
		t.Fatalf("test batch is %d bytes, over the limit", len(entries))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	size, _, err := f.send(ctx, "big", entries, 1)
	if err != nil {
		t.Fatal(err)
	}
	if size <= len(entries) || size > wire.MaxFrameBytes {
		t.Fatalf("frame of %d bytes (entries %d, limit %d)", size, len(entries), wire.MaxFrameBytes)
	}
	if err := r.WaitFor(func(st forwardtest.Stats) bool { return st.Acks == 1 }, 10*time.Second); err != nil {
		t.Fatal(err)
	}
}

// A server that one connection finds down is left alone by the stream's other connections
// for its backoff: they share its health, so the next connection goes straight to the server
// that is up instead of dialing the dead one again (for a server that swallows SYNs, a whole
// DialTimeout per connection).
func TestConnectionsShareTheServersHealth(t *testing.T) {
	dead := freePort(t) // nothing listens there: dials are refused
	r := forwardtest.NewReceiver(t)
	up := strings.TrimPrefix(r.Addr(), "tcp://")
	s := settingsFor(Config{Servers: []Server{{Addr: dead}, {Addr: up}}, RetryMin: time.Hour, RetryMax: time.Hour})
	fs := newForwarders(s, 3)
	var mu sync.Mutex
	dials := map[string]int{}
	for _, f := range fs {
		defer f.close()
		onDial(f, func(address string) {
			mu.Lock()
			dials[address]++
			mu.Unlock()
		})
	}
	// Connections 0 and 2 both start their round robin at the dead server.
	ctx := context.Background()
	for _, f := range []*forwarder{fs[0], fs[2]} {
		if _, _, err := f.send(ctx, "t", testkit.Entries(1, "x"), 1); err != nil {
			t.Fatalf("send: %v", err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if dials[dead] != 1 || dials[up] != 2 {
		t.Fatalf("dials = %v, want the dead server dialed once (by the first connection) and the live one twice", dials)
	}
	if _, err := r.WaitForEntries(2, 5*time.Second); err != nil {
		t.Fatal(err)
	}
}

// When every server is down and none is due, an attempt dials one of them, the one due
// first, and leaves the next try to the sender's backoff: a connection that arrives just
// after another found them all down does not dial each one again.
func TestWhenNoServerIsDueAnAttemptTriesOne(t *testing.T) {
	var dead []Server
	for range 2 {
		dead = append(dead, Server{Addr: freePort(t)}) // nothing listens there: dials are refused
	}
	fs := newForwarders(settingsFor(Config{Servers: dead, RetryMin: time.Hour, RetryMax: time.Hour}), 2)
	dials := make([]int, len(fs))
	for k, f := range fs {
		defer f.close()
		onDial(f, func(string) { dials[k]++ }) // each forwarder is used from this goroutine only
	}
	ctx := context.Background()
	for _, f := range fs {
		if _, _, err := f.send(ctx, "t", testkit.Entries(1, "x"), 1); err == nil {
			t.Fatal("send succeeded with every server refusing")
		}
	}
	if dials[0] != 2 || dials[1] != 1 {
		t.Fatalf("dials per connection = %v, want [2 1]: the first finds both servers down, the second tries one", dials)
	}
}

// onDial calls seen with each address f dials, before dialing it.
func onDial(f *forwarder, seen func(address string)) {
	real := f.dialRaw
	f.dialRaw = func(ctx context.Context, network, address string) (net.Conn, error) {
		seen(address)
		return real(ctx, network, address)
	}
}
