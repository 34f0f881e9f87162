package forward

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fluentcore/fluentcore/internal/dial"
	"github.com/fluentcore/fluentcore/internal/wire"
)

// conn is a connection plus the goroutine that reads from it (readLoop): acks when they
// are asked for, and otherwise the EOF or reset that tells us the peer is gone before we
// write into it.
//
// Invariants: acks has room for an ack of every frame that may be in flight; err is
// written before dead is closed, and only by the reader; once closing is set (Close's
// cancel hook), the reader leaves the socket to the sender, which closes it (shutdown, or
// abort after a failure) and stops the hook first (stopWatching).
type conn struct {
	net.Conn
	raw       net.Conn // the transport under TLS; Conn itself without TLS
	peer      *dial.PeerCheck
	server    int           // index in Settings.Endpoints
	gen       uint64        // the server's address generation when it was opened (dial.Balancer.Gone)
	opened    time.Time     // when it was ready to send: its deliveries mark the server up only if later than its last failure
	keepalive bool          // false: the receiver closes after each request (HELO said so)
	acks      chan string   // ack tokens, in arrival order
	dead      chan struct{} // closed by the reader when the connection fails
	err       error         // why; written before dead is closed
	unwatch   func() bool   // stops the cancel hook (watchCancel); nil if none
	unwatched chan struct{} // closed when the cancel hook, if it ran, has returned
	closing   atomic.Bool   // the core is closing: the reader leaves the socket to shutdown
}

// newConn returns the connection nc (raw the socket under it) to server i, at the server's
// address generation gen, ready since opened, with room for room acks. Its reader is not
// started yet.
func newConn(nc, raw net.Conn, i int, gen uint64, opened time.Time, keepalive bool, room int) *conn {
	return &conn{Conn: nc, raw: raw, peer: dial.NewPeerCheck(raw), server: i, gen: gen, opened: opened, keepalive: keepalive, acks: make(chan string, room), dead: make(chan struct{})}
}

// watchCancel makes the cancellation of ctx (Close) abort whatever the connection is doing,
// by moving its deadline into the past. It is set up once per connection, not per send.
// The reader, which the past deadline also stops, then leaves the socket open, so that a
// healthy connection is closed by shutdown, with TLS's close_notify: a receiver (fluentd)
// otherwise logs every Close as an unexpected SSL EOF.
func (c *conn) watchCancel(ctx context.Context) {
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
func (c *conn) stopWatching() {
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
func (c *conn) abort() { _ = c.raw.Close() }

// shutdown closes a healthy connection: with TLS, with a close_notify bounded by
// closeNotifyWait.
func (c *conn) shutdown() {
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
func (c *conn) cause(err error) error {
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

// readLoop reads what the receiver sends (wire.AckReader): one ack per frame that asked
// for one (requireAck), and nothing otherwise. Anything else ends the connection with an
// error the sender reports. It marks readers done when it returns.
func (c *conn) readLoop(requireAck bool, readers *sync.WaitGroup) {
	defer readers.Done()
	defer close(c.dead)
	r := wire.NewAckReader(requireAck)
	for {
		tok, err := r.Next(c)
		if err != nil {
			c.err = err
			if !c.closing.Load() { // when closing, the sender closes it: link.drop
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
