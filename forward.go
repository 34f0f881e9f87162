package fluentcore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fluentcore/fluentcore/internal/dial"
	"github.com/fluentcore/fluentcore/internal/wire"
)

// ErrHandshake is wrapped by every error of the shared-key handshake: the receiver did not
// send a valid HELO, rejected the PING (wrong shared key, user or password), answered with
// a PONG that does not prove it knows the key, or closed or timed out before PONG; also by
// the error of a receiver that asks for the handshake when Config.SharedKey is not set.
// Test for it with errors.Is on what Sync and Close return. Its messages never contain the
// shared key or the password.
var ErrHandshake = wire.ErrHandshake

// errNoAckOnUnix explains an ack timeout on a unix socket: fluentd's in_unix never acks, so
// with RequireAck every frame times out, is resent, and err entries end in the spill
// although they were delivered.
var errNoAckOnUnix = errors.New("fluentd's in_unix never sends acks (the frames may well have arrived): set RequireAck only for tcp:// and tls:// receivers")

// forwarder is one connection of a stream to its receivers. Only the sender goroutine that
// owns it calls send; close is called once that sender has stopped. The counters and
// lastError may be read from any goroutine.
type forwarder struct {
	s     *settings
	bal   *dial.Balancer
	fr    *wire.Framer
	conn  *fconn
	tried []bool // scratch: servers tried in this connection attempt

	// With RequireAck: the frames written on the connection whose acks have not come back,
	// oldest first (at most maxInflight), and the timer of the oldest one's ack deadline
	// (nil until the first frame). lost holds the batches of frames in flight on a
	// connection that ended, until the sender takes them back (takeUnacked).
	flights     []flight
	lost        []*batch
	lostSince   time.Time // when the oldest frame in lost was written
	maxInflight int
	ackT        *time.Timer
	inflight    atomic.Int32 // len(flights), for other goroutines

	// dialRaw opens the transport connection (TLS runs on top of it). It is given the
	// address as configured, host name included, so every reconnect resolves it again.
	dialRaw dial.Func

	// The ack token of send's last frame, reused while it is resent.
	retry ackToken

	connects          atomic.Uint64   // connections opened (and handshaken)
	server            atomic.Int32    // index of the server connected to; -1 while none
	deliveredTo       []atomic.Uint64 // entries delivered, by server
	handshakeFailures atomic.Uint64
	downSince         atomic.Int64 // unix nanos of the first failure since the last success; 0 if none
	errMu             sync.Mutex
	lastErr           error // of the last attempt; nil after a success
	readers           sync.WaitGroup
}

// newForwarder returns the forwarder of a stream's only connection.
func newForwarder(s *settings) *forwarder { return newForwarders(s, 1)[0] }

// newForwarders returns a stream's n forwarders, one per connection. They share one view of
// the servers' health (a server one connection finds down is left alone by all of them for
// its backoff), and connection i starts its round robin i picks on, so that the
// connections spread over the servers by weight from the start.
func newForwarders(s *settings, n int) []*forwarder {
	h := dial.NewHealth(len(s.endpoints), s.newBackoff)
	fs := make([]*forwarder, n)
	for i := range fs {
		f := &forwarder{
			s:     s,
			bal:   dial.NewBalancer(s.endpoints, h),
			fr:    wire.NewFramer(s.compression),
			tried: make([]bool, len(s.endpoints)),

			deliveredTo: make([]atomic.Uint64, len(s.endpoints)),
		}
		f.server.Store(-1)
		f.setMaxInflight(s.maxInflight)
		d := &net.Dialer{KeepAlive: 30 * time.Second}
		f.dialRaw = d.DialContext
		now := time.Now()
		for range i {
			f.bal.Pick(now, nil)
		}
		fs[i] = f
	}
	return fs
}

// setMaxInflight sets how many frames may wait for their acks at once (at least 1).
func (f *forwarder) setMaxInflight(n int) {
	f.maxInflight = max(n, 1)
	f.flights = make([]flight, 0, f.maxInflight)
	f.lost = make([]*batch, 0, f.maxInflight)
}

// fconn is a connection plus the goroutine that reads from it: acks when they are asked for,
// and otherwise the EOF or reset that tells us the peer is gone before we write into it.
type fconn struct {
	net.Conn
	raw       net.Conn // the transport under TLS; Conn itself without TLS
	peer      *dial.PeerCheck
	server    int           // index in settings.endpoints
	opened    time.Time     // when it was ready to send: its deliveries mark the server up only if later than its last failure
	keepalive bool          // false: the receiver closes after each request (HELO said so)
	acks      chan string   // ack tokens, in arrival order
	dead      chan struct{} // closed by the reader when the connection fails
	err       error         // why; written before dead is closed
	unwatch   func() bool   // stops the cancel hook (watchCancel); nil if none
	unwatched chan struct{} // closed when the cancel hook, if it ran, has returned
	closing   atomic.Bool   // the core is closing: the reader leaves the socket to shutdown
}

// watchCancel makes the cancellation of ctx (Close) abort whatever the connection is doing,
// by moving its deadline into the past. It is set up once per connection, not per send.
// The reader, which the past deadline also stops, then leaves the socket open, so that a
// healthy connection is closed by shutdown, with TLS's close_notify: a receiver (fluentd)
// otherwise logs every Close as an unexpected SSL EOF.
func (c *fconn) watchCancel(ctx context.Context) {
	c.unwatched = make(chan struct{})
	c.unwatch = context.AfterFunc(ctx, func() {
		defer close(c.unwatched)
		c.closing.Store(true)
		_ = c.SetDeadline(time.Unix(1, 0))
	})
}

// stopWatching stops the cancel hook and, if it has started, waits for it: the hook runs on
// its own goroutine, and a past deadline it set in the middle of shutdown would cut the
// close_notify off.
func (c *fconn) stopWatching() {
	if c.unwatch != nil && !c.unwatch() {
		<-c.unwatched
	}
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

// ackToken is the ack token (the "chunk" option) of one frame's entries. A resend of the
// same entries reuses it, as fluentd does, so a receiver could tell a resend from new
// data; other entries (a new frame, or a batch compact has added to) get a new one.
type ackToken struct {
	id  string
	of  *byte // the entries it was made for: first byte and length
	len int
}

// forEntries returns the token for entries.
func (t *ackToken) forEntries(entries []byte) string {
	if t.id != "" && len(entries) > 0 && &entries[0] == t.of && len(entries) == t.len {
		return t.id
	}
	*t = ackToken{id: wire.NewChunkID()}
	if len(entries) > 0 {
		t.of, t.len = &entries[0], len(entries)
	}
	return t.id
}

// flight is a frame written on the connection whose ack has not come back yet.
type flight struct {
	chunk string
	at    time.Time // when it was written; its ack is due AckTimeout later
	n     int       // entries
	b     *batch    // the batch it carries; nil for a frame of the spill's replay
}

// send writes one frame of n entries and, with RequireAck, waits for its ack: one frame at
// a time, as the spill's replay sends. It must not be called while frames are in flight.
// A resend of the same entries after a failure reuses the ack token. It returns the frame
// size and whether a new connection was opened for it; on an error, see post.
func (f *forwarder) send(ctx context.Context, tag string, entries []byte, n int) (int, bool, error) {
	var chunk string
	if f.s.requireAck {
		chunk = f.retry.forEntries(entries)
	}
	size, fresh, err := f.post(ctx, tag, entries, n, chunk, nil)
	for err == nil && len(f.flights) > 0 {
		_, err = f.awaitAck(ctx)
	}
	if err != nil {
		return 0, fresh, err
	}
	f.retry = ackToken{}
	return size, fresh, nil
}

// full reports whether the connection has as many frames in flight as it may: MaxInflight,
// or one on a connection the receiver closes after each request (HELO said so), since
// the frames after the first would be lost with it.
func (f *forwarder) full() bool {
	return len(f.flights) >= f.maxInflight || (len(f.flights) > 0 && !f.conn.keepalive)
}

// post writes one frame of n entries, opening a connection first if there is none. With a
// chunk (RequireAck) the frame asks for an ack and stays in flight, carrying b, until
// awaitAck or one of onAck, onDead and onDue reports it; the caller makes sure the
// connection is not full first. It returns the frame size and whether a new connection
// was opened for it. On any error the connection is closed (its server marked down, unless
// the error was only a wrong ack) and the frames that were in flight on it wait in lost,
// oldest first, for the caller to send again (b is not among them).
func (f *forwarder) post(ctx context.Context, tag string, entries []byte, n int, chunk string, b *batch) (int, bool, error) {
	if f.s.addrErr != nil {
		return 0, false, f.fail(f.s.addrErr)
	}
	fresh, err := f.ensureConn(ctx, time.Now())
	if err != nil {
		return 0, false, f.fail(err)
	}
	c := f.conn
	ep := &f.s.endpoints[c.server]

	hdr, payload, opt := f.fr.Frame(tag, entries, n, chunk)
	size := len(hdr) + len(payload) + len(opt)

	// Close aborts a write or an ack wait at once: the connection's cancel hook (see
	// watchCancel) moves its deadline into the past. A cancellation that came before this
	// deadline was set is caught by the check after it.
	_ = c.SetWriteDeadline(time.Now().Add(f.s.writeTimeout))
	if err := ctx.Err(); err != nil {
		return 0, fresh, err
	}

	// First ask the kernel whether the receiver closed the connection while it sat idle:
	// the reader that would see the same close may not have run yet, and without acks a
	// frame written into a closed connection is counted delivered and lost. The parts are
	// then written one by one, not in one writev: if the close comes in between, the
	// header's write draws the reset that fails the payload's (at once on a local
	// connection), so the frame is retried. The fault suite's receiver-down rows check both
	// without acks. Nothing here allocates: an allocating sender is made to assist the
	// garbage collector, and under a logging flood that stalls delivery.
	werr := c.peer.Closed()
	for _, part := range [...][]byte{hdr, payload, opt} {
		if werr != nil {
			break
		}
		if len(part) > 0 {
			_, werr = c.Write(part)
		}
	}
	if err := werr; err != nil {
		err = fmt.Errorf("fluentcore: write to %s: %w", ep.Addr, c.cause(err)) // before closing it ourselves
		return 0, fresh, f.lose(err, true)
	}
	if chunk != "" {
		now := time.Now()
		f.flights = append(f.flights, flight{chunk: chunk, at: now, n: n, b: b})
		f.inflight.Store(int32(len(f.flights)))
		if len(f.flights) == 1 {
			f.armAckTimer(now)
		}
		return size, fresh, nil
	}
	f.succeeded(c, n)
	return size, fresh, nil
}

// succeeded records the delivery of n entries on c: its server is up, and the stream's
// failure is over. A receiver that closes after each request is left to do so.
func (f *forwarder) succeeded(c *fconn, n int) {
	f.deliveredTo[c.server].Add(uint64(n))
	f.bal.MarkUp(c.server, c.opened)
	f.downSince.Store(0)
	f.setLastError(nil)
	if !c.keepalive && len(f.flights) == 0 {
		f.dropConn(false)
	}
}

// lose ends the connection after err: it is closed at once, its server marked down if
// serverDown, and its frames in flight move to lost. It returns err.
func (f *forwarder) lose(err error, serverDown bool) error {
	if c := f.conn; c != nil {
		f.dropConn(true)
		if serverDown {
			f.bal.MarkDown(c.server, time.Now())
		}
	}
	f.dropFlights()
	return f.fail(err)
}

// reclaim closes the connection, not as a failure, and moves its frames in flight to lost:
// they are no longer waited for.
func (f *forwarder) reclaim() {
	if len(f.flights) > 0 {
		f.dropConn(true)
		f.dropFlights()
	}
}

// dropFlights moves the batches of the frames in flight to lost.
func (f *forwarder) dropFlights() {
	if len(f.flights) > 0 && (f.lostSince.IsZero() || f.flights[0].at.Before(f.lostSince)) {
		f.lostSince = f.flights[0].at
	}
	for _, fl := range f.flights {
		if fl.b != nil {
			f.lost = append(f.lost, fl.b)
		}
	}
	clear(f.flights)
	f.flights = f.flights[:0]
	f.inflight.Store(0)
	if f.ackT != nil {
		f.ackT.Stop()
	}
}

// takeUnacked appends to dst, oldest first, the batches whose frames will not be acked on
// this connection: those lost with an earlier one, then those in flight. It forgets them.
func (f *forwarder) takeUnacked(dst []*batch) []*batch {
	f.dropFlights()
	dst = append(dst, f.lost...)
	clear(f.lost)
	f.lost, f.lostSince = f.lost[:0], time.Time{}
	return dst
}

// armAckTimer sets the ack timer to the oldest frame in flight's deadline.
func (f *forwarder) armAckTimer(now time.Time) {
	d := f.flights[0].at.Add(f.s.ackTimeout).Sub(now)
	if f.ackT == nil {
		f.ackT = time.NewTimer(d)
		return
	}
	f.ackT.Reset(d) // since Go 1.23 a Reset timer never delivers a stale value
}

// ackEvents returns what the next event of the frames in flight comes on: an ack, the end
// of the connection, the oldest frame's ack deadline; all nil while none is in flight,
// except acks while there is a connection: an ack then is one nobody asked for. Each is
// handled by onAck, onDead and onDue.
func (f *forwarder) ackEvents() (<-chan string, <-chan struct{}, <-chan time.Time) {
	if len(f.flights) == 0 {
		if f.conn == nil || !f.s.requireAck {
			return nil, nil, nil
		}
		return f.conn.acks, nil, nil
	}
	return f.conn.acks, f.conn.dead, f.ackT.C
}

// awaitAck waits for the next event of the frames in flight and returns the frame it
// acknowledged; an error ends the connection (see lose), except ctx's, which leaves
// everything in flight.
func (f *forwarder) awaitAck(ctx context.Context) (flight, error) {
	for {
		acks, dead, due := f.ackEvents()
		if dead == nil {
			return flight{}, nil // nothing in flight
		}
		var fl flight
		var err error
		select {
		case tok := <-acks:
			fl, err = f.onAck(tok)
		case <-dead:
			fl, err = f.onDead()
		case <-due:
			err = f.onDue()
		case <-ctx.Done():
			return flight{}, ctx.Err()
		}
		if err != nil || fl.chunk != "" {
			return fl, err
		}
	}
}

// onAck matches an ack to its frame in flight, wherever it is: a receiver may answer in
// any order. An ack that matches none (another chunk, or one acked already) ends the
// connection, not its server: the frames in flight are sent again.
func (f *forwarder) onAck(tok string) (flight, error) {
	for i := range f.flights {
		if f.flights[i].chunk != tok {
			continue
		}
		fl := f.flights[i]
		f.flights = slices.Delete(f.flights, i, i+1)
		f.inflight.Store(int32(len(f.flights)))
		if i == 0 && len(f.flights) > 0 {
			f.armAckTimer(time.Now())
		}
		f.succeeded(f.conn, fl.n)
		return fl, nil
	}
	return flight{}, f.lose(fmt.Errorf("fluentcore: ack from %s does not match the chunk of any frame in flight", f.s.endpoints[f.conn.server].Addr), false)
}

// onDead handles the end of the connection. The reader queues an ack before it can see the
// close that follows it (fluentd with deny_keepalive acks, then closes): a queued ack is
// taken first, or an acknowledged frame would be sent again.
func (f *forwarder) onDead() (flight, error) {
	c := f.conn
	select {
	case tok := <-c.acks:
		return f.onAck(tok)
	default:
	}
	return flight{}, f.lose(fmt.Errorf("fluentcore: connection to %s lost while waiting for ack: %w", f.s.endpoints[c.server].Addr, c.err), true)
}

// onDue handles the ack timer: the oldest frame's ack is overdue, which ends the
// connection (nil if it is not due yet).
func (f *forwarder) onDue() error {
	now := time.Now()
	if now.Before(f.flights[0].at.Add(f.s.ackTimeout)) {
		f.armAckTimer(now) // not expected: the timer follows the oldest frame
		return nil
	}
	ep := &f.s.endpoints[f.conn.server]
	if ep.Network == "unix" {
		// fluentd's in_unix takes chunk options and never answers them.
		return f.lose(fmt.Errorf("fluentcore: no ack from %s within %v: %w", ep.Addr, f.s.ackTimeout, errNoAckOnUnix), true)
	}
	return f.lose(fmt.Errorf("fluentcore: no ack from %s within %v", ep.Addr, f.s.ackTimeout), true)
}

// fail records a failed attempt and returns err.
func (f *forwarder) fail(err error) error {
	if errors.Is(err, wire.ErrUnexpectedHELO) {
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

// ensureConn makes sure there is a live connection, to the best server available: it
// replaces a dead one, and leaves a standby for a regular server once one is due. It tries
// each server at most once per call, in the balancer's order, marking down those that fail;
// if all fail it keeps a standby connection it had, or returns every attempt's error.
func (f *forwarder) ensureConn(ctx context.Context, now time.Time) (fresh bool, err error) {
	if c := f.conn; c != nil {
		select {
		case <-c.dead:
			if len(f.flights) > 0 {
				break // the write fails, and the frames in flight go back with it (post)
			}
			f.dropConn(true) // e.g. the receiver closed an idle connection: not a server failure
		default:
		}
	}
	// A connection with frames in flight is kept until they are acked: leaving it for a
	// better server would lose them.
	if f.conn != nil && (len(f.flights) > 0 || !f.bal.ShouldYield(f.conn.server, now)) {
		return false, nil
	}
	clear(f.tried)
	var errs []error
	for first := true; ; first = false {
		i := f.bal.Pick(now, f.tried)
		if i < 0 {
			break
		}
		due := f.bal.Available(i, now)
		if f.conn != nil && (f.s.endpoints[i].Standby || !due) {
			break // only a regular server that is due is worth leaving the standby for
		}
		if !first && !due {
			// Every server left is down and not due, perhaps marked so by another of the
			// stream's connections a moment ago: one such server per attempt, and the
			// sender's backoff paces the next.
			break
		}
		f.tried[i] = true
		c, err := f.connect(ctx, i)
		if err != nil {
			f.bal.MarkDown(i, time.Now())
			errs = append(errs, err)
			if ctx.Err() != nil {
				break
			}
			continue
		}
		f.dropConn(false)
		f.conn = c
		f.server.Store(int32(i))
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
	nc, raw, err := dial.Dial(dctx, f.dialRaw, ep)
	cancel()
	if err != nil {
		return nil, err
	}
	keepalive := true
	if f.s.creds != nil {
		_ = nc.SetDeadline(time.Now().Add(f.s.handshakeTimeout))
		stop := context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Unix(1, 0)) })
		keepalive, err = wire.Handshake(nc, f.s.creds, ep.Addr)
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
	fc := &fconn{Conn: nc, raw: raw, peer: dial.NewPeerCheck(raw), server: i, opened: time.Now(), keepalive: keepalive, acks: make(chan string, f.maxInflight), dead: make(chan struct{})}
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
			return nil, fmt.Errorf("fluentcore: connect to %s: %w", ep.Addr, fc.err)
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

// readLoop reads what the receiver sends (wire.AckReader): one ack per frame that asked
// for one, and nothing otherwise. Anything else ends the connection with an error the
// sender reports.
func (f *forwarder) readLoop(c *fconn) {
	defer f.readers.Done()
	defer close(c.dead)
	r := wire.NewAckReader(f.s.requireAck)
	for {
		tok, err := r.Next(c)
		if err != nil {
			c.err = err
			if !c.closing.Load() { // when closing, the sender closes it: dropConn
				c.abort()
			}
			return
		}
		select {
		case c.acks <- tok:
		default:
			// There is room for an ack of every frame in flight: the receiver sent acks
			// nobody asked for.
			c.err = fmt.Errorf("fluentcore: %s sent more acks than frames in flight", c.RemoteAddr())
			if !c.closing.Load() {
				c.abort()
			}
			return
		}
	}
}

// failing reports whether the last send attempt failed. Safe for concurrent use.
func (f *forwarder) failing() bool { return f.downSince.Load() != 0 }

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
		f.conn.stopWatching()
		if failed {
			f.conn.abort()
		} else {
			f.conn.shutdown()
		}
		f.conn = nil
		f.server.Store(-1)
	}
}

// close closes the connection and waits for its reader.
func (f *forwarder) close() {
	f.dropConn(false)
	f.readers.Wait()
}
