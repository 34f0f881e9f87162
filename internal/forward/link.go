package forward

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fluentcore/fluentcore/internal/dial"
	"github.com/fluentcore/fluentcore/internal/wire"
)

// link is a forwarder's connection and how it gets one: which server it goes to (the
// balancer over the stream's shared health), the dial, TLS and handshake, the reconnect
// after a failure and the move to a server that should take it.
//
// Invariants: conn is nil or the connection (live, or dead until ensure or a failure drops
// it) that the balancer counts on conn.server (Take, until Release in drop), and
// status.server says which; each connection's reader is counted in readers until it
// returns. Only the forwarder's sender uses it.
type link struct {
	s       *Settings
	health  *dial.Health // the stream's, shared with the other connections' balancers
	bal     *dial.Balancer
	conn    *conn
	tried   []bool // scratch: servers tried in this connection attempt
	status  *Status
	readers sync.WaitGroup
}

// init sets up the link of one of p's connections, which shows its server and counts on st.
func (l *link) init(p *pool, st *Status) {
	l.s, l.health, l.status = p.s, p.health, st
	l.bal = dial.NewBalancer(p.s.Endpoints, p.health)
	l.tried = make([]bool, len(p.s.Endpoints))
}

// ensure makes sure there is a live connection, to the best server available: it replaces
// a dead one, leaves one whose address its name no longer has, and moves one to a server
// that should take it (a regular server due again while this one is a standby, or a server
// with fewer connections for its weight: see dial.Balancer.ShouldMove) — one attempt per
// call, keeping the connection it has if that fails. Without a connection it tries each
// server at most once per call, in the balancer's order, marking down those that fail, and
// returns every attempt's error if all fail. A connection with frames in flight (busy) is
// kept until they are acked: leaving it would lose them. A new connection has room for
// room acks. It also starts a lookup of the servers' names when one is due
// (dial.Health.Refresh).
func (l *link) ensure(ctx context.Context, now time.Time, busy bool, room int) (fresh bool, err error) {
	l.health.Refresh(now)
	if c := l.conn; c != nil {
		select {
		case <-c.dead:
			if busy {
				break // the write fails, and the frames in flight go back with it (Post)
			}
			l.drop(true) // e.g. the receiver closed an idle connection: not a server failure
		default:
		}
	}
	if c := l.conn; c != nil {
		if busy || !l.bal.ShouldMove(c.server, c.gen, now) {
			return false, nil
		}
		if l.bal.Gone(c.server, c.gen) {
			l.drop(false) // its address left the name: in good order, then a new one
		} else {
			return l.move(ctx, now, room), nil
		}
	}
	clear(l.tried)
	var errs []error
	for first := true; ; first = false {
		i := l.bal.Take(now, l.tried)
		if i < 0 {
			break
		}
		if !first && !l.bal.Available(i, now) {
			// Every server left is down and not due, perhaps marked so by another of the
			// stream's connections a moment ago: one such server per attempt, and the
			// sender's backoff paces the next.
			l.bal.Release(i)
			break
		}
		l.tried[i] = true
		c, err := l.connect(ctx, i, room)
		if err != nil {
			l.bal.Release(i)
			l.bal.MarkDown(i, l.s.Clock.Now())
			errs = append(errs, err)
			if ctx.Err() != nil {
				break
			}
			continue
		}
		l.conn = c
		l.status.server.Store(int32(i))
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
func (l *link) move(ctx context.Context, now time.Time, room int) bool {
	old := l.conn.server
	i := l.bal.Take(now, nil)
	if i < 0 {
		return false
	}
	if i == old || l.bal.IsStandby(i) || !l.bal.Available(i, now) {
		l.bal.Release(i)
		return false
	}
	c, err := l.connect(ctx, i, room)
	if err != nil {
		l.bal.Release(i)
		l.bal.MarkDown(i, l.s.Clock.Now())
		return false
	}
	l.drop(false)
	l.conn = c
	l.status.server.Store(int32(i))
	return true
}

// connect opens a connection to server i, with room for room acks: transport, TLS, then
// the shared-key handshake, each within its deadline, and starts the connection's reader.
func (l *link) connect(ctx context.Context, i, room int) (*conn, error) {
	ep := &l.s.Endpoints[i]
	target, gen := l.bal.Target(i)
	dctx, cancel := context.WithTimeout(ctx, l.s.DialTimeout)
	nc, raw, err := dial.Dial(dctx, l.s.Dial, l.s.Resolver, ep, target)
	cancel()
	if err != nil {
		return nil, err
	}
	keepalive := true
	if l.s.Creds != nil {
		_ = nc.SetDeadline(time.Now().Add(l.s.HandshakeTimeout))
		stop := context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Unix(1, 0)) })
		keepalive, err = wire.Handshake(nc, l.s.Creds, ep.Addr)
		if stop() {
			_ = nc.SetDeadline(time.Time{})
		}
		if err != nil {
			_ = raw.Close() // no close_notify: see abort
			if ctx.Err() == nil {
				l.status.handshakeFailures.Add(1)
			}
			return nil, err
		}
	}
	fc := newConn(nc, raw, i, gen, l.s.Clock.Now(), keepalive, room)
	l.readers.Add(1)
	go fc.readLoop(l.s.RequireAck, &l.readers)
	if l.s.Creds == nil && !l.s.RequireAck {
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
	l.status.connects.Add(1)
	return fc, nil
}

// heloGrace is how long a new connection without a shared key listens for an unexpected
// HELO before its first frame: a server that requires the handshake sends HELO right after
// accepting, so on any network with a round trip under this, the mismatch is caught before
// data is lost.
const heloGrace = 50 * time.Millisecond

// drop closes the connection: at once if it failed, else in good order.
func (l *link) drop(failed bool) {
	if l.conn != nil {
		l.conn.stopWatching()
		if failed {
			l.conn.abort()
		} else {
			l.conn.shutdown()
		}
		l.bal.Release(l.conn.server)
		l.conn = nil
		l.status.server.Store(-1)
	}
}

// close closes the connection in good order and waits for its readers.
func (l *link) close() {
	l.drop(false)
	l.readers.Wait()
}
