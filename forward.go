package fluentcore

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tinylib/msgp/msgp"
)

// errUnexpectedHELO: the receiver requires the shared-key handshake and the client has no
// key configured.
var errUnexpectedHELO = fmt.Errorf("%w: receiver sent HELO: it requires the shared_key handshake (set Config.SharedKey)", ErrHandshake)

// maxResponseBytes bounds what a receiver may send us in one message (an ack): a hostile or
// broken peer cannot make the client buffer more than this.
const maxResponseBytes = 512

// parseAddr splits a Config.Addr into a network and an address. Accepted forms:
// "tcp://host:port", "host:port", "tls://host:port" and "unix:///path".
func parseAddr(addr string) (network, address string, useTLS bool, err error) {
	switch {
	case addr == "":
		return "", "", false, errors.New("fluentcore: empty address")
	case strings.HasPrefix(addr, "unix://"):
		path := strings.TrimPrefix(addr, "unix://")
		if path == "" {
			return "", "", false, fmt.Errorf("fluentcore: address %q has no socket path", addr)
		}
		return "unix", path, false, nil
	case strings.HasPrefix(addr, "tls://"):
		address, useTLS = strings.TrimPrefix(addr, "tls://"), true
	case strings.HasPrefix(addr, "tcp://"):
		address = strings.TrimPrefix(addr, "tcp://")
	case strings.Contains(addr, "://"):
		return "", "", false, fmt.Errorf("fluentcore: address %q: scheme must be tcp, tls or unix", addr)
	default:
		address = addr
	}
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return "", "", false, fmt.Errorf("fluentcore: address %q: %w", addr, err)
	}
	if host == "" || port == "" {
		return "", "", false, fmt.Errorf("fluentcore: address %q needs a host and a port", addr)
	}
	return "tcp", address, useTLS, nil
}

// forwarder is one stream's connection to its receivers. Only the stream's sender
// goroutine calls send; close is called once the sender has stopped. The counters and
// lastError may be read from any goroutine.
type forwarder struct {
	s     *settings
	bal   *balancer
	fr    *framer
	conn  *fconn
	tried []bool      // scratch: servers tried in this connection attempt
	ackT  *time.Timer // reused by awaitAck; nil until the first ack wait

	// dialRaw opens the transport connection (TLS runs on top of it). It is given the
	// address as configured, host name included, so every reconnect resolves it again.
	dialRaw func(ctx context.Context, network, address string) (net.Conn, error)

	// The ack token of a batch whose send failed: resending the same batch reuses it, as
	// fluentd does, so a receiver could tell a resend from new data.
	retryChunk string
	retryOf    *byte
	retryLen   int

	connects          atomic.Uint64 // connections opened (and handshaken)
	handshakeFailures atomic.Uint64
	downSince         atomic.Int64 // unix nanos of the first failure since the last success; 0 if none
	errMu             sync.Mutex
	lastErr           error // of the last attempt; nil after a success
	readers           sync.WaitGroup
}

func newForwarder(s *settings) *forwarder {
	f := &forwarder{
		s:     s,
		bal:   newBalancer(s.endpoints, s.newBackoff),
		fr:    newFramer(s.compression),
		tried: make([]bool, len(s.endpoints)),
	}
	d := &net.Dialer{KeepAlive: 30 * time.Second}
	f.dialRaw = d.DialContext
	return f
}

// fconn is a connection plus the goroutine that reads from it: acks when they are asked for,
// and otherwise the EOF or reset that tells us the peer is gone before we write into it.
type fconn struct {
	net.Conn
	raw       net.Conn      // the transport under TLS; Conn itself without TLS
	server    int           // index in settings.endpoints
	keepalive bool          // false: the receiver closes after each request (HELO said so)
	acks      chan string   // ack tokens, in arrival order
	dead      chan struct{} // closed by the reader when the connection fails
	err       error         // why; written before dead is closed
	unwatch   func() bool   // stops the cancel hook (watchCancel); nil if none
}

// watchCancel makes the cancellation of ctx (Close) abort whatever the connection is doing,
// by moving its deadline into the past. It is set up once per connection, not per send.
func (c *fconn) watchCancel(ctx context.Context) {
	c.unwatch = context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
}

// closeNotifyWait bounds TLS's close_notify when a healthy connection is closed: an alert
// that cannot be written at once (the receiver stopped reading) is not worth waiting for.
const closeNotifyWait = 100 * time.Millisecond

// abort closes a connection that failed without TLS's close_notify. That alert is a write,
// and crypto/tls gives it 5 s of its own: into a receiver that stopped reading it would
// stall the sender past WriteTimeout and AckTimeout, and Close past CloseTimeout.
func (c *fconn) abort() { _ = c.raw.Close() }

// shutdown closes a healthy connection: with TLS, with a close_notify bounded by
// closeNotifyWait.
func (c *fconn) shutdown() {
	// c.Close is the top layer's (TLS's, when there is one); c.raw is the socket under it.
	if c.raw == c.Conn {
		_ = c.Close()
		return
	}
	t := time.AfterFunc(closeNotifyWait, c.abort)
	_ = c.Close()
	t.Stop()
}

// cause returns why a write failed. When the peer is gone, the reader may know better —
// a TLS alert such as a rejected client certificate arrives just before the close — so its
// error is preferred. It waits for the reader only then: the reader returns promptly once
// the peer has closed (or the reader itself closed the connection under the write).
func (c *fconn) cause(err error) error {
	if !errors.Is(err, net.ErrClosed) && !errors.Is(err, syscall.EPIPE) && !errors.Is(err, syscall.ECONNRESET) {
		return err
	}
	t := time.NewTimer(time.Second) // a bound, in case the peer half-closed
	defer t.Stop()
	select {
	case <-c.dead:
		if c.err != nil && !errors.Is(c.err, net.ErrClosed) {
			return c.err
		}
	case <-t.C:
	}
	return err
}

// handshakeMessage reports whether b starts with an array whose first element is "HELO"
// or "PONG": a receiver that expects a handshake the client did not start.
func handshakeMessage(b []byte) bool {
	_, b, err := msgp.ReadArrayHeaderBytes(b)
	if err != nil {
		return false
	}
	typ, _, err := msgp.ReadStringZC(b)
	return err == nil && (string(typ) == "HELO" || string(typ) == "PONG")
}

// send writes one frame of n entries and, with RequireAck, waits for its ack. It returns
// the frame size and whether a new connection was opened for it. On any error the
// connection is closed (and its server marked down, unless the error was only a
// mismatched ack); the caller retries with the same entries.
func (f *forwarder) send(ctx context.Context, tag string, entries []byte, n int) (int, bool, error) {
	if f.s.addrErr != nil {
		return 0, false, f.fail(f.s.addrErr)
	}
	fresh, err := f.ensureConn(ctx, time.Now())
	if err != nil {
		return 0, false, f.fail(err)
	}
	c := f.conn
	ep := &f.s.endpoints[c.server]

	var chunk string
	if f.s.requireAck {
		chunk = f.chunkFor(entries)
	}
	hdr, payload, opt := f.fr.frame(tag, entries, n, chunk)
	size := len(hdr) + len(payload) + len(opt)

	// Close aborts a write or an ack wait at once: the connection's cancel hook (see
	// watchCancel) moves its deadline into the past. A cancellation that came before this
	// deadline was set is caught by the check after it.
	_ = c.SetWriteDeadline(time.Now().Add(f.s.writeTimeout))
	if err := ctx.Err(); err != nil {
		return 0, fresh, err
	}

	// The frame's parts are written one by one, not in one writev: on a connection the
	// receiver has already closed, the header's write draws the reset that fails the
	// payload's (at once on a local connection), so the frame is retried instead of counted
	// delivered and lost — what the fault suite's receiver-down rows check without acks.
	// Nothing here allocates: an allocating sender pays GC assists, and under a logging
	// flood it was parked in them.
	var werr error
	for _, part := range [...][]byte{hdr, payload, opt} {
		if len(part) > 0 {
			if _, werr = c.Write(part); werr != nil {
				break
			}
		}
	}
	if err := werr; err != nil {
		err = fmt.Errorf("fluentcore: write to %s: %w", ep.addr, c.cause(err)) // before closing it ourselves
		f.dropConn(true)
		f.bal.markDown(c.server, time.Now())
		return 0, fresh, f.fail(err)
	}
	if chunk != "" {
		if serverDown, err := f.awaitAck(ctx, c, ep, chunk); err != nil {
			f.dropConn(true)
			if serverDown {
				f.bal.markDown(c.server, time.Now())
			}
			return 0, fresh, f.fail(err)
		}
	}
	f.bal.markUp(c.server)
	f.retryChunk, f.retryOf = "", nil
	f.downSince.Store(0)
	f.setLastError(nil)
	if !c.keepalive {
		f.dropConn(false) // the receiver closes after each request anyway
	}
	return size, fresh, nil
}

// fail records a failed attempt and returns err.
func (f *forwarder) fail(err error) error {
	if errors.Is(err, errUnexpectedHELO) {
		f.handshakeFailures.Add(1) // the receiver wants a handshake we were not configured for
	}
	f.downSince.CompareAndSwap(0, time.Now().UnixNano())
	f.setLastError(err)
	return err
}

func (f *forwarder) setLastError(err error) {
	f.errMu.Lock()
	f.lastErr = err
	f.errMu.Unlock()
}

// lastError returns the error of the last send attempt, nil if it succeeded. Safe for
// concurrent use.
func (f *forwarder) lastError() error {
	f.errMu.Lock()
	defer f.errMu.Unlock()
	return f.lastErr
}

// chunkFor returns the ack token for a batch: a new one, or the one its failed attempt
// used. The sender retries a batch until it is delivered, so the batch of a failed attempt
// is always the next one sent.
func (f *forwarder) chunkFor(entries []byte) string {
	if f.retryChunk != "" && len(entries) > 0 && &entries[0] == f.retryOf && len(entries) == f.retryLen {
		return f.retryChunk
	}
	chunk := newChunkID()
	if len(entries) > 0 {
		f.retryChunk, f.retryOf, f.retryLen = chunk, &entries[0], len(entries)
	}
	return chunk
}

// ensureConn makes sure there is a live connection, to the best server available: it
// replaces a dead one, and leaves a standby for a regular server once one is due. It tries
// each server at most once per call, in the balancer's order, marking down those that fail;
// if all fail it keeps a standby connection it had, or returns every attempt's error.
func (f *forwarder) ensureConn(ctx context.Context, now time.Time) (fresh bool, err error) {
	if c := f.conn; c != nil {
		select {
		case <-c.dead:
			f.dropConn(true) // e.g. the receiver closed an idle connection: not a server failure
		default:
		}
	}
	if f.conn != nil && !f.bal.preferred(f.conn.server, now) {
		return false, nil
	}
	clear(f.tried)
	var errs []error
	for {
		i := f.bal.pick(now, f.tried)
		if i < 0 {
			break
		}
		if f.conn != nil && (f.s.endpoints[i].standby || !f.bal.available(i, now)) {
			break // only a regular server that is due is worth leaving the standby for
		}
		f.tried[i] = true
		c, err := f.connect(ctx, i)
		if err != nil {
			f.bal.markDown(i, time.Now())
			errs = append(errs, err)
			if ctx.Err() != nil {
				break
			}
			continue
		}
		f.dropConn(false)
		f.conn = c
		return true, nil
	}
	if f.conn != nil {
		return false, nil
	}
	if len(errs) == 0 { // not expected: the first pick always finds a server
		return false, errors.New("fluentcore: no server to connect to")
	}
	return false, errors.Join(errs...)
}

// connect opens a connection to server i: transport, TLS, then the shared-key handshake,
// each within its deadline, and starts the connection's reader.
func (f *forwarder) connect(ctx context.Context, i int) (*fconn, error) {
	ep := &f.s.endpoints[i]
	dctx, cancel := context.WithTimeout(ctx, f.s.dialTimeout)
	nc, err := f.dialRaw(dctx, ep.network, ep.address)
	raw := nc
	if err == nil && ep.useTLS {
		tc := tls.Client(nc, ep.tlsConfig)
		if err = tc.HandshakeContext(dctx); err != nil {
			_ = nc.Close()
			err = fmt.Errorf("TLS handshake: %w", err)
		}
		nc = tc
	}
	cancel()
	if err != nil {
		return nil, fmt.Errorf("fluentcore: connect to %s: %w", ep.addr, err)
	}
	keepalive := true
	if f.s.creds != nil {
		_ = nc.SetDeadline(time.Now().Add(f.s.handshakeTimeout))
		stop := context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Unix(1, 0)) })
		keepalive, err = handshake(nc, f.s.creds, ep.addr)
		if stop() {
			_ = nc.SetDeadline(time.Time{})
		}
		if err != nil {
			_ = raw.Close() // no close_notify: see abort
			if ctx.Err() == nil {
				f.handshakeFailures.Add(1)
			}
			return nil, err
		}
	}
	fc := &fconn{Conn: nc, raw: raw, server: i, keepalive: keepalive, acks: make(chan string, 1), dead: make(chan struct{})}
	f.readers.Add(1)
	go f.readLoop(fc)
	if f.s.creds == nil && !f.s.requireAck {
		// A receiver that requires the shared-key handshake sends HELO as soon as it accepts,
		// and discards whatever arrives before a PING. Without acks, nothing else would tell
		// us: the first frame of every connection would be written, counted delivered, and
		// thrown away. (With acks, that frame is simply never acked, and the HELO is
		// reported by the reader.)
		t := time.NewTimer(heloGrace)
		select {
		case <-fc.dead:
			t.Stop()
			return nil, fmt.Errorf("fluentcore: connect to %s: %w", ep.addr, fc.err)
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			fc.abort()
			return nil, ctx.Err()
		}
	}
	fc.watchCancel(ctx)
	f.connects.Add(1)
	return fc, nil
}

// heloGrace is how long a new connection without a shared key listens for an unexpected
// HELO before its first frame: a server that requires the handshake sends HELO right after
// accepting, so on any network with a round trip under this, the mismatch is caught before
// data is lost.
const heloGrace = 50 * time.Millisecond

// awaitAck waits up to AckTimeout for the ack of chunk. serverDown says whether the
// failure counts against the server (no answer, a broken one, a lost connection) or only
// against the connection (an ack for another chunk).
func (f *forwarder) awaitAck(ctx context.Context, c *fconn, ep *endpoint, chunk string) (serverDown bool, err error) {
	if f.ackT == nil {
		f.ackT = time.NewTimer(f.s.ackTimeout)
	} else {
		f.ackT.Reset(f.s.ackTimeout) // since Go 1.23 a Reset timer never delivers a stale value
	}
	t := f.ackT
	defer t.Stop()
	check := func(got string) (bool, error) {
		if got != chunk {
			return false, fmt.Errorf("fluentcore: ack from %s does not match the chunk sent", ep.addr)
		}
		return false, nil
	}
	select {
	case got := <-c.acks:
		return check(got)
	case <-c.dead:
		// The reader queues an ack before it can see the close that follows it (fluentd with
		// deny_keepalive acks, then closes): a queued ack wins, or select's random choice
		// would resend an acknowledged batch.
		select {
		case got := <-c.acks:
			return check(got)
		default:
		}
		return true, fmt.Errorf("fluentcore: connection to %s lost while waiting for ack: %w", ep.addr, c.err)
	case <-t.C:
		return true, fmt.Errorf("fluentcore: no ack from %s within %v", ep.addr, f.s.ackTimeout)
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// readLoop reads what the receiver sends: one ack map per frame that asked for one, and
// nothing otherwise. Anything else, or more than maxResponseBytes in one message, ends the
// connection with an error the sender reports.
func (f *forwarder) readLoop(c *fconn) {
	defer f.readers.Done()
	defer close(c.dead)
	buf := make([]byte, maxResponseBytes)
	n := 0
	for {
		m, err := c.Read(buf[n:])
		if err != nil {
			c.err = err
			c.abort()
			return
		}
		n += m
		if !f.s.requireAck {
			c.err = errors.New("receiver sent data the client did not ask for")
			if handshakeMessage(buf[:n]) {
				c.err = errUnexpectedHELO
			}
			c.abort()
			return
		}
		for n > 0 {
			var a ackResponse
			rest, err := a.UnmarshalMsg(buf[:n])
			if errors.Is(err, msgp.ErrShortBytes) {
				if n == len(buf) {
					c.err = fmt.Errorf("ack longer than %d bytes", maxResponseBytes)
					c.abort()
					return
				}
				break
			}
			if err != nil {
				c.err = fmt.Errorf("malformed ack: %w", err)
				if handshakeMessage(buf[:n]) {
					c.err = errUnexpectedHELO
				}
				c.abort()
				return
			}
			n = copy(buf, buf[n-len(rest):n])
			select {
			case c.acks <- a.Ack:
			default: // an ack nobody waits for: the next wait sees a mismatch if it matters
			}
		}
	}
}

// disconnectedFor reports how long sends have been failing (0 while they succeed).
func (f *forwarder) disconnectedFor(now time.Time) time.Duration {
	since := f.downSince.Load()
	if since == 0 {
		return 0
	}
	return now.Sub(time.Unix(0, since))
}

// dropConn closes the connection: at once if it failed, else in good order.
func (f *forwarder) dropConn(failed bool) {
	if f.conn != nil {
		if f.conn.unwatch != nil {
			f.conn.unwatch()
		}
		if failed {
			f.conn.abort()
		} else {
			f.conn.shutdown()
		}
		f.conn = nil
	}
}

// close closes the connection and waits for its reader.
func (f *forwarder) close() {
	f.dropConn(false)
	f.readers.Wait()
}

// newChunkID returns an ack token: base64 of 16 random bytes, 24 ASCII characters.
func newChunkID() string {
	var id [16]byte
	_, _ = rand.Read(id[:]) // crypto/rand.Read never fails on supported platforms
	return base64.StdEncoding.EncodeToString(id[:])
}
