package forward

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/fluentcore/fluentcore/internal/dial"
	"github.com/fluentcore/fluentcore/internal/ring"
	"github.com/fluentcore/fluentcore/internal/wire"
	"go.uber.org/zap/zapcore"
)

// Settings is what a stream's connections need: the servers, the credentials, the framing,
// the timeouts and the retry schedule, how the servers' names are looked up, and the time
// they read. Each stream's connections share one copy, read-only once New has it.
type Settings struct {
	// Clock is the time of the failures, the servers' health and the frames' ack deadlines.
	// The sockets' deadlines are set on the runtime's time, which the poller measures them
	// against.
	Clock zapcore.Clock
	// Endpoints are the servers, a name's slots made by dial.Expand: at least one.
	Endpoints []dial.Endpoint
	// Creds are the shared-key handshake's; nil for none.
	Creds *wire.Credentials
	// AddrErr, if not nil, is a bad address or server: every send fails with it.
	AddrErr error
	// Compression is "" or wire.Gzip.
	Compression string
	// RequireAck has every frame ask for an ack and wait for it in the ack window.
	RequireAck bool
	// MaxInflight is how many frames one connection keeps in flight, before the stream's
	// share (Forwarder.Start).
	MaxInflight int
	// DialTimeout bounds a dial (and a lookup of the names, with lookupTimeout);
	// HandshakeTimeout the shared-key handshake; WriteTimeout a frame's write; AckTimeout
	// the wait for a frame's ack.
	DialTimeout, HandshakeTimeout, WriteTimeout, AckTimeout time.Duration
	// NewBackoff returns the retry schedule of one server or one sender.
	NewBackoff func() backoff.BackOff
	// Resolver looks the servers' names up, every ResolveInterval.
	Resolver        dial.Resolver
	ResolveInterval time.Duration
	// SpreadMost is the most connections a stream opens when New is asked for one per
	// server (n 0).
	SpreadMost int
	// Dial opens the transport (TLS runs on top of it). It is given an IP address or a unix
	// socket's path, never a name: dial.Dial looks names up through Resolver first.
	Dial dial.Func
}

// Forwarder is one connection of a stream to its receivers: it writes frames (Post, Send),
// connects, reconnects and fails over between the stream's servers (link), and with
// RequireAck keeps the frames in flight until their acks come (Window).
//
// Invariants: only the sender goroutine that owns it calls its methods, Start first, and
// Close once that sender has stopped; other goroutines call only Status, Sending, Servers
// and Target. A frame is in the window from its write until its ack, the end of its connection
// or the ack deadline of the oldest one, whichever comes first; on a failure every frame in
// flight moves to the window's lost batches, oldest first, for the sender to send again,
// and the connection is closed at once (its server marked down unless only an ack was
// wrong). The ack token of a frame that failed (Send) is reused while it is resent.
type Forwarder struct {
	s      *Settings // the pool's
	pool   *pool
	index  int // its place among the stream's connections: it sends if under pool's count
	link   link
	acks   Window
	status Status
	fr     *wire.Framer

	// retry is the ack token of Send's last frame, reused while it is resent.
	retry ring.AckToken

	// unreadAt is when a write last timed out without acks (the receiver read nothing for
	// WriteTimeout); zero once frames are taken again. A frame written since then into a
	// new connection sits in its socket buffers, read or not, so it counts as delivered but
	// not as progress (Status.LastTaken) until writes still succeed WriteTimeout after the
	// timeout: into a receiver that reads nothing, a write times out sooner, once the
	// buffers of the connection are full.
	unreadAt time.Time
}

// New returns a stream's forwarders, one per connection: n of them, or with n 0 one per
// server that is not a standby — each address of a name counted, as the first lookup finds
// them; more to a server of a larger weight, when the weights differ and the connections
// that takes are at most s.SpreadMost (dial.Health.Spread) —, at least 1 and at most
// s.SpreadMost. New never waits on a lookup: while the count waits for the first lookup of
// a name, it returns s.SpreadMost forwarders, and those past the count never start (Start).
//
// They share one view of the servers: their health (a server one connection finds down is
// left alone by all of them for its backoff), the connections on each (each new connection
// goes to the server with the fewest for its weight, so that they spread over the servers
// by weight), and the addresses of the servers given by names, which a lookup in the
// background finds, started here, and the connections then look up again every
// ResolveInterval; until a lookup has placed a name's addresses, a connection looks the name
// up as it dials (dial.Dial). Every lookup goes through s.Resolver: a name is never handed
// to the dialer.
func New(s Settings, n int) []*Forwarder {
	p := newPool(&s, n)
	fs := make([]*Forwarder, p.made)
	for i := range fs {
		f := &Forwarder{s: p.s, pool: p, index: i, fr: wire.NewFramer(p.s.Compression)}
		f.status.init(len(p.s.Endpoints))
		f.link.init(p, &f.status)
		f.acks.init(p.s, &f.status)
		// Ties between equally loaded servers go by the round robin, each connection's
		// started i picks on: the first connections of a stream begin on different servers.
		f.link.bal.Skip(i)
		fs[i] = f
	}
	return fs
}

// lookupTimeout bounds each lookup of the servers' names (with DialTimeout, if shorter).
const lookupTimeout = time.Second

// Start readies the forwarder to send, before the first frame: a stream's connections
// first wait for the first lookup of their servers' names when they are to be counted or
// placed over the name's addresses (several connections; never one). It reports false if
// this connection is past the stream's count (it never sends) or ctx ended first. The
// connections that send share inflight frames in flight (at most Settings.MaxInflight
// each).
func (f *Forwarder) Start(ctx context.Context, inflight int) bool {
	n, ok := f.pool.await(ctx)
	if !ok || f.index >= n {
		return false
	}
	f.acks.setMaxInflight(min(f.s.MaxInflight, inflight/n))
	return true
}

// Sending returns how many of the stream's connections send: the first Sending of them,
// the others never start. It changes at most once, when the first lookup counts the
// servers. Safe for concurrent use.
func (f *Forwarder) Sending() int { return int(f.pool.sending.Load()) }

// Send writes one frame of n entries and, with RequireAck, waits for its ack: one frame at
// a time, as the spill's replay sends. It must not be called while frames are in flight.
// A resend of the same entries after a failure reuses the ack token. It returns the frame
// size and whether a new connection was opened for it; on an error, see Post.
func (f *Forwarder) Send(ctx context.Context, tag string, entries []byte, n int) (int, bool, error) {
	var chunk string
	if f.s.RequireAck {
		chunk = f.retry.ForEntries(entries)
	}
	size, fresh, err := f.Post(ctx, tag, entries, n, chunk, nil)
	for err == nil && len(f.acks.flights) > 0 {
		_, err = f.AwaitAck(ctx)
	}
	if err != nil {
		return 0, fresh, err
	}
	f.retry = ring.AckToken{}
	return size, fresh, nil
}

// Post writes one frame of n entries, opening a connection first if there is none. With a
// chunk (RequireAck) the frame asks for an ack and stays in flight, carrying b, until
// AwaitAck or one of OnAck, OnDead and OnDue reports it; the caller makes sure the
// connection is not Full first. It returns the frame size and whether a new connection
// was opened for it. On any error the connection is closed (its server marked down, unless
// the error was only a wrong ack) and the frames that were in flight on it wait in the
// window's lost batches, oldest first, for the caller to send again (b is not among them).
func (f *Forwarder) Post(ctx context.Context, tag string, entries []byte, n int, chunk string, b *ring.Batch) (int, bool, error) {
	if f.s.AddrErr != nil {
		return 0, false, f.fail(f.s.AddrErr)
	}
	now := f.s.Clock.Now()
	f.status.attemptAt.Store(now.UnixNano()) // SendInProgress: until the write ends, then the ack wait
	defer f.status.attemptAt.Store(0)
	fresh, err := f.link.ensure(ctx, now, len(f.acks.flights) > 0, f.acks.maxInflight)
	if err != nil {
		return 0, false, f.fail(err)
	}
	c := f.link.conn
	ep := &f.s.Endpoints[c.server]

	hdr, payload, opt := f.fr.Frame(tag, entries, n, chunk)
	size := len(hdr) + len(payload) + len(opt)

	// Close aborts a write or an ack wait at once: the connection's cancel hook (see
	// watchCancel) moves its deadline into the past. A cancellation that came before this
	// deadline was set is caught by the check after it. The deadline is on the runtime's
	// time, not Settings.Clock's: the poller measures it against that.
	_ = c.SetWriteDeadline(time.Now().Add(f.s.WriteTimeout))
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
			f.unreadAt = f.s.Clock.Now() // not Close's cancel hook, which moves the deadline too
		}
		err = fmt.Errorf("fluentcore: write to %s: %w", ep.Addr, c.cause(err)) // before closing it ourselves
		return 0, fresh, f.lose(err, true)
	}
	if chunk != "" {
		f.acks.push(Flight{Chunk: chunk, At: f.s.Clock.Now(), N: n, Batch: b})
		return size, fresh, nil
	}
	f.succeeded(c, n)
	return size, fresh, nil
}

// succeeded records the delivery of n entries on c: its server is up, and the stream's
// failure is over; it is progress (Status.LastTaken) unless a write timed out less than
// WriteTimeout ago (see unreadAt). A receiver that closes after each request is left to do
// so.
func (f *Forwarder) succeeded(c *conn, n int) {
	f.status.deliveredTo[c.server].Add(uint64(n))
	now := f.s.Clock.Now()
	if !f.unreadAt.IsZero() && now.Sub(f.unreadAt) >= f.s.WriteTimeout {
		f.unreadAt = time.Time{}
	}
	if f.unreadAt.IsZero() {
		f.status.lastTaken[c.server].Store(now.UnixNano())
	}
	f.link.bal.MarkUp(c.server, c.opened)
	f.status.downSince.Store(0)
	f.status.setLastError(nil)
	if !c.keepalive && len(f.acks.flights) == 0 {
		f.link.drop(false)
	}
}

// lose ends the connection after err: it is closed at once, its server marked down if
// serverDown, and its frames in flight move to lost. It returns err.
func (f *Forwarder) lose(err error, serverDown bool) error {
	if c := f.link.conn; c != nil {
		f.link.drop(true)
		if serverDown {
			f.link.bal.MarkDown(c.server, f.s.Clock.Now())
		}
	}
	f.acks.dropFlights()
	return f.fail(err)
}

// Reclaim closes the connection, not as a failure, and moves its frames in flight to
// lost: they are no longer waited for.
func (f *Forwarder) Reclaim() {
	if len(f.acks.flights) > 0 {
		f.link.drop(true)
		f.acks.dropFlights()
	}
}

// fail records a failed attempt and returns err.
func (f *Forwarder) fail(err error) error {
	if errors.Is(err, wire.ErrUnexpectedHELO) {
		f.status.handshakeFailures.Add(1) // the receiver wants a handshake we were not configured for
	}
	f.status.downSince.CompareAndSwap(0, f.s.Clock.Now().UnixNano())
	f.status.setLastError(err)
	return err
}

// Close closes the connection and waits for its reader, and stops the lookups of the
// servers' names (the stream's senders have all stopped).
func (f *Forwarder) Close() {
	f.link.close()
	f.pool.health.Close()
}

// Window returns the forwarder's ack window: its frames in flight and the batches lost
// with a connection. Only the owning sender uses it.
func (f *Forwarder) Window() *Window { return &f.acks }

// Status returns what other goroutines read of the connection.
func (f *Forwarder) Status() *Status { return &f.status }

// RequireAck reports whether each frame asks for an ack.
func (f *Forwarder) RequireAck() bool { return f.s.RequireAck }

// Servers returns the stream's servers, in the order Status counts them by.
func (f *Forwarder) Servers() []dial.Endpoint { return f.s.Endpoints }

// NewBackoff returns a retry schedule of the connection's settings, for its sender.
func (f *Forwarder) NewBackoff() backoff.BackOff { return f.s.NewBackoff() }

// Target returns the address the connection is open to: one of its server's name's
// addresses, or "" for the endpoint's own (and while there is no connection). Safe for
// concurrent use.
func (f *Forwarder) Target() string {
	i := f.status.server.Load()
	if i < 0 {
		return ""
	}
	t, _ := f.link.bal.Target(int(i))
	return t
}
