package fluentcore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fluentcore/fluentcore/internal/dial"
	"github.com/fluentcore/fluentcore/internal/ring"
	"github.com/fluentcore/fluentcore/internal/wire"
)

// ErrHandshake is wrapped by every error of the shared-key handshake: the receiver did not
// send a valid HELO, rejected the PING (wrong shared key, user or password), answered with
// a PONG that does not prove it knows the key, or closed or timed out before PONG; also by
// the error of a receiver that asks for the handshake when Config.SharedKey is not set.
// Test for it with errors.Is on what Sync and Close return. Its messages never contain the
// shared key or the password.
var ErrHandshake = wire.ErrHandshake

// forwarder is one connection of a stream to its receivers. Only the sender goroutine that
// owns it calls send; close is called once that sender has stopped. The counters and
// lastError may be read from any goroutine. It reads the time (failures, the servers'
// health, the frames' ack deadlines) from connSettings.clock; its sockets' deadlines are set
// on the runtime's time, which is what they are measured against.
type forwarder struct {
	s      connSettings
	health *dial.Health // shared by the stream's forwarders; bal's
	bal    *dial.Balancer
	fr     *wire.Framer
	conn   *fconn
	tried  []bool // scratch: servers tried in this connection attempt

	ackWindow // with RequireAck: the frames in flight (forward_acks.go)

	// dialRaw opens the transport connection (TLS runs on top of it). It is given an IP
	// address (or a unix socket's path), never a name: dial.Dial looks names up through
	// connSettings.resolver first.
	dialRaw dial.Func

	// The ack token of send's last frame, reused while it is resent.
	retry ring.AckToken

	// unreadAt is when a write last timed out without acks (the receiver read nothing for
	// WriteTimeout); zero once frames are taken again. A frame written since then into a
	// new connection sits in its socket buffers, read or not, so it counts as delivered but
	// not as progress (lastTaken) until writes still succeed WriteTimeout after the timeout:
	// into a receiver that reads nothing, a write times out sooner, once the buffers of the
	// connection are full. The sender's alone.
	unreadAt time.Time

	connects          atomic.Uint64   // connections opened (and handshaken)
	server            atomic.Int32    // index of the server connected to; -1 while none
	deliveredTo       []atomic.Uint64 // entries delivered, by server
	lastTaken         []atomic.Int64  // unix nanos of the last frame taken (progress), by server; 0 before the first
	attemptAt         atomic.Int64    // unix nanos when the post under way began (dial and write); 0 if none
	handshakeFailures atomic.Uint64
	downSince         atomic.Int64 // unix nanos of the first failure since the last success; 0 if none
	errMu             sync.Mutex
	lastErr           error // of the last attempt; nil after a success
	readers           sync.WaitGroup
}

// newForwarder returns the forwarder of a stream's only connection.
func newForwarder(s connSettings) *forwarder { return newForwarders(s, 1)[0] }

// newForwarders returns a stream's n forwarders, one per connection; n 0 means one per
// server that is not a standby (each address of a name counted, as New's lookup found
// them) — more to a server of a larger weight, when the weights differ and the connections
// that takes are at most s.spreadMost (dial.Health.Spread) —, at least 1 and at most
// s.spreadMost. They share one view of the servers: their health (a
// server one connection finds down is left alone by all of them for its backoff), the
// connections on each (each new connection goes to the server with the fewest for its
// weight, so that they spread over the servers by weight from the start), and the
// addresses of the servers given by host names, which the first lookup finds (here, at
// most lookupTimeout, when there are to be several connections to count and place; in the
// background for one) and the connections then look up again every resolveInterval; until
// a lookup has placed a name's addresses, its connections look the name up as they dial
// (dial.Dial). Every lookup goes through s.resolver: a name is never handed to the dialer.
func newForwarders(s connSettings, n int) []*forwarder {
	h := dial.NewHealth(len(s.endpoints), s.newBackoff)
	h.Track(s.endpoints, s.resolver, s.resolveInterval, min(s.dialTimeout, lookupTimeout))
	if n == 1 {
		h.Refresh(s.clock.Now()) // in the background: one connection needs no count of them
	} else {
		h.Lookup(s.clock.Now())
	}
	if n == 0 {
		n = h.Spread(s.endpoints, max(s.spreadMost, 1))
	}
	fs := make([]*forwarder, n)
	for i := range fs {
		f := &forwarder{
			s:      s,
			health: h,
			bal:    dial.NewBalancer(s.endpoints, h),
			fr:     wire.NewFramer(s.compression),
			tried:  make([]bool, len(s.endpoints)),

			deliveredTo: make([]atomic.Uint64, len(s.endpoints)),
			lastTaken:   make([]atomic.Int64, len(s.endpoints)),
		}
		f.server.Store(-1)
		f.setMaxInflight(s.maxInflight)
		d := &net.Dialer{KeepAlive: 30 * time.Second}
		f.dialRaw = d.DialContext
		// Ties between equally loaded servers go by the round robin, each connection's
		// started i picks on: the first connections of a stream begin on different servers.
		f.bal.Skip(i)
		fs[i] = f
	}
	return fs
}

// lookupTimeout bounds New's first lookup of the servers' names (with DialTimeout, if
// shorter): New does not wait longer than this for a resolver that does not answer, and
// the connections then look each name up as they dial until a lookup places its addresses.
const lookupTimeout = time.Second

// send writes one frame of n entries and, with RequireAck, waits for its ack: one frame at
// a time, as the spill's replay sends. It must not be called while frames are in flight.
// A resend of the same entries after a failure reuses the ack token. It returns the frame
// size and whether a new connection was opened for it; on an error, see post.
func (f *forwarder) send(ctx context.Context, tag string, entries []byte, n int) (int, bool, error) {
	var chunk string
	if f.s.requireAck {
		chunk = f.retry.ForEntries(entries)
	}
	size, fresh, err := f.post(ctx, tag, entries, n, chunk, nil)
	for err == nil && len(f.flights) > 0 {
		_, err = f.awaitAck(ctx)
	}
	if err != nil {
		return 0, fresh, err
	}
	f.retry = ring.AckToken{}
	return size, fresh, nil
}

// post writes one frame of n entries, opening a connection first if there is none. With a
// chunk (RequireAck) the frame asks for an ack and stays in flight, carrying b, until
// awaitAck or one of onAck, onDead and onDue reports it; the caller makes sure the
// connection is not full first. It returns the frame size and whether a new connection
// was opened for it. On any error the connection is closed (its server marked down, unless
// the error was only a wrong ack) and the frames that were in flight on it wait in lost,
// oldest first, for the caller to send again (b is not among them).
func (f *forwarder) post(ctx context.Context, tag string, entries []byte, n int, chunk string, b *ring.Batch) (int, bool, error) {
	if f.s.addrErr != nil {
		return 0, false, f.fail(f.s.addrErr)
	}
	now := f.s.clock.Now()
	f.attemptAt.Store(now.UnixNano()) // SendInProgress: until the write ends, then the ack wait
	defer f.attemptAt.Store(0)
	fresh, err := f.ensureConn(ctx, now)
	if err != nil {
		return 0, false, f.fail(err)
	}
	c := f.conn
	ep := &f.s.endpoints[c.server]

	hdr, payload, opt := f.fr.Frame(tag, entries, n, chunk)
	size := len(hdr) + len(payload) + len(opt)

	// Close aborts a write or an ack wait at once: the connection's cancel hook (see
	// watchCancel) moves its deadline into the past. A cancellation that came before this
	// deadline was set is caught by the check after it. The deadline is on the runtime's
	// time, not settings.clock's: the poller measures it against that.
	_ = c.SetWriteDeadline(time.Now().Add(f.s.writeTimeout))
	if err := ctx.Err(); err != nil {
		return 0, fresh, err
	}

	// First ask the kernel whether the receiver closed the connection while it sat idle:
	// the reader that would see the same close may not have run yet, and without acks a
	// frame written into a closed connection is counted delivered and lost. The parts are
	// then written one by one, not in one writev: if the close comes in between, the
	// header's write draws the reset that fails the payload's (at once on a local
	// connection), so the frame is retried. Nothing here allocates: an allocating sender
	// is made to assist the garbage collector, and under a logging flood that stalls
	// delivery.
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
		if chunk == "" && errors.Is(err, os.ErrDeadlineExceeded) && ctx.Err() == nil {
			f.unreadAt = f.s.clock.Now() // not Close's cancel hook, which moves the deadline too
		}
		err = fmt.Errorf("fluentcore: write to %s: %w", ep.Addr, c.cause(err)) // before closing it ourselves
		return 0, fresh, f.lose(err, true)
	}
	if chunk != "" {
		now := f.s.clock.Now()
		f.flights = append(f.flights, flight{chunk: chunk, at: now, n: n, b: b})
		f.inflight.Store(int32(len(f.flights)))
		if len(f.flights) == 1 {
			f.oldestAt.Store(now.UnixNano())
			f.armAckTimer(now)
		}
		return size, fresh, nil
	}
	f.succeeded(c, n)
	return size, fresh, nil
}

// succeeded records the delivery of n entries on c: its server is up, and the stream's
// failure is over; it is progress (lastTaken) unless a write timed out less than
// WriteTimeout ago (see unreadAt). A receiver that closes after each request is left to do
// so.
func (f *forwarder) succeeded(c *fconn, n int) {
	f.deliveredTo[c.server].Add(uint64(n))
	now := f.s.clock.Now()
	if !f.unreadAt.IsZero() && now.Sub(f.unreadAt) >= f.s.writeTimeout {
		f.unreadAt = time.Time{}
	}
	if f.unreadAt.IsZero() {
		f.lastTaken[c.server].Store(now.UnixNano())
	}
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
			f.bal.MarkDown(c.server, f.s.clock.Now())
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

// busySince returns when the oldest send under way on the connection began (unix nanos):
// the post writing a frame, or the oldest frame waiting for its ack; 0 if none. Safe for
// concurrent use.
func (f *forwarder) busySince() int64 {
	a, o := f.attemptAt.Load(), f.oldestAt.Load()
	if a == 0 || (o != 0 && o < a) {
		return o
	}
	return a
}

// stuckSince returns when the connection's stall began (unix nanos), if a send is under
// way (busySince): the send's start, or the last frame a server took after it (an ack that
// came for a later frame: the receiver still answers). 0 if no send is under way. Safe for
// concurrent use.
func (f *forwarder) stuckSince() int64 {
	at := f.busySince()
	if at == 0 {
		return 0
	}
	for i := range f.lastTaken {
		at = max(at, f.lastTaken[i].Load())
	}
	return at
}

// fail records a failed attempt and returns err.
func (f *forwarder) fail(err error) error {
	if errors.Is(err, wire.ErrUnexpectedHELO) {
		f.handshakeFailures.Add(1) // the receiver wants a handshake we were not configured for
	}
	f.downSince.CompareAndSwap(0, f.s.clock.Now().UnixNano())
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
// replaces a dead one, leaves one whose address its name no longer has, and moves one to a
// server that should take it (a regular server due again while this one is a standby, or
// a server with fewer connections for its weight: see dial.Balancer.ShouldMove) — one
// attempt per call, keeping the connection it has if that fails. Without a connection it
// tries each server at most once per call, in the balancer's order, marking down those
// that fail, and returns every attempt's error if all fail. A connection with frames in
// flight is kept until they are acked: leaving it would lose them. It also starts a lookup
// of the servers' names when one is due (dial.Health.Refresh).
func (f *forwarder) ensureConn(ctx context.Context, now time.Time) (fresh bool, err error) {
	f.health.Refresh(now)
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
	if c := f.conn; c != nil {
		if len(f.flights) > 0 || !f.bal.ShouldMove(c.server, c.gen, now) {
			return false, nil
		}
		if f.bal.Gone(c.server, c.gen) {
			f.dropConn(false) // its address left the name: in good order, then a new one
		} else {
			return f.move(ctx, now), nil
		}
	}
	clear(f.tried)
	var errs []error
	for first := true; ; first = false {
		i := f.bal.Take(now, f.tried)
		if i < 0 {
			break
		}
		if !first && !f.bal.Available(i, now) {
			// Every server left is down and not due, perhaps marked so by another of the
			// stream's connections a moment ago: one such server per attempt, and the
			// sender's backoff paces the next.
			f.bal.Release(i)
			break
		}
		f.tried[i] = true
		c, err := f.connect(ctx, i)
		if err != nil {
			f.bal.Release(i)
			f.bal.MarkDown(i, f.s.clock.Now())
			errs = append(errs, err)
			if ctx.Err() != nil {
				break
			}
			continue
		}
		f.conn = c
		f.server.Store(int32(i))
		return true, nil
	}
	if len(errs) == 0 { // not expected: the first pick always finds a server
		return false, errors.New("fluentcore: no server to connect to")
	}
	return false, errors.Join(errs...)
}

// move tries once to replace the live connection by one to the server the balancer takes
// now, if that is another server that is available and not a standby; it keeps the
// connection it has otherwise, and when the new one fails (that server is marked down;
// the stream's sends go on, so the failure is no send error). It reports whether it moved.
func (f *forwarder) move(ctx context.Context, now time.Time) bool {
	old := f.conn.server
	i := f.bal.Take(now, nil)
	if i < 0 {
		return false
	}
	if i == old || f.bal.IsStandby(i) || !f.bal.Available(i, now) {
		f.bal.Release(i)
		return false
	}
	c, err := f.connect(ctx, i)
	if err != nil {
		f.bal.Release(i)
		f.bal.MarkDown(i, f.s.clock.Now())
		return false
	}
	f.dropConn(false)
	f.conn = c
	f.server.Store(int32(i))
	return true
}

// connect opens a connection to server i: transport, TLS, then the shared-key handshake,
// each within its deadline, and starts the connection's reader.
func (f *forwarder) connect(ctx context.Context, i int) (*fconn, error) {
	ep := &f.s.endpoints[i]
	target, gen := f.bal.Target(i)
	dctx, cancel := context.WithTimeout(ctx, f.s.dialTimeout)
	nc, raw, err := dial.Dial(dctx, f.dialRaw, f.s.resolver, ep, target)
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
	fc := &fconn{Conn: nc, raw: raw, peer: dial.NewPeerCheck(raw), server: i, gen: gen, opened: f.s.clock.Now(), keepalive: keepalive, acks: make(chan string, f.maxInflight), dead: make(chan struct{})}
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
		f.bal.Release(f.conn.server)
		f.conn = nil
		f.server.Store(-1)
	}
}

// close closes the connection and waits for its reader, and stops the lookups of the
// servers' names (the stream's senders have all stopped).
func (f *forwarder) close() {
	f.dropConn(false)
	f.readers.Wait()
	f.health.Close()
}
