package fluentcore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/fluentcore/fluentcore/internal/ring"
)

// errNoAckOnUnix explains an ack timeout on a unix socket: fluentd's in_unix never acks, so
// with RequireAck every frame times out, is resent, and err entries end in the spill
// although they were delivered.
var errNoAckOnUnix = errors.New("fluentd's in_unix never sends acks (the frames may well have arrived): for a unix:// receiver that does not ack, set Err.Acks to AcksOff and leave RequireAck unset")

// flight is a frame written on the connection whose ack has not come back yet.
type flight struct {
	chunk string
	at    time.Time   // when it was written; its ack is due AckTimeout later
	n     int         // entries
	b     *ring.Batch // the batch it carries; nil for a frame of the spill's replay, or once spilled
	// spilled: its batch went to the spill while it waited (detach); its ack, if it comes,
	// delivers a duplicate of what the spill has.
	spilled bool
}

// ackWindow is a connection's frames in flight, with RequireAck: the frames written on the
// connection whose acks have not come back, oldest first (at most maxInflight), and the
// ticker of the oldest one's ack deadline (nil until the first frame). lost holds the
// batches of frames in flight on a connection that ended, until the sender takes them
// back (takeUnacked). Only the sender that owns the forwarder uses it; other goroutines
// read only loadInFlight.
type ackWindow struct {
	flights     []flight
	lost        []*ring.Batch
	lostSince   time.Time // when the oldest frame in lost was written
	maxInflight int
	ackT        *time.Ticker // the settings' clock's (armAckTimer)
	inflight    atomic.Int32 // len(flights), for other goroutines
	oldestAt    atomic.Int64 // unix nanos when flights[0] was written, 0 if none: for other goroutines
}

// setMaxInflight sets how many frames may wait for their acks at once (at least 1).
func (w *ackWindow) setMaxInflight(n int) {
	w.maxInflight = max(n, 1)
	w.flights = make([]flight, 0, w.maxInflight)
	w.lost = make([]*ring.Batch, 0, w.maxInflight)
}

// inFlight returns how many frames wait for their acks. Only the owning sender calls it.
func (w *ackWindow) inFlight() int { return len(w.flights) }

// loadInFlight returns inFlight for other goroutines.
func (w *ackWindow) loadInFlight() int { return int(w.inflight.Load()) }

// hasUnacked reports whether takeUnacked would return any batch: some were lost with an
// earlier connection, or are in flight.
func (w *ackWindow) hasUnacked() bool { return len(w.lost) > 0 || len(w.flights) > 0 }

// oldestLost returns when the oldest frame in lost was written; zero if none.
func (w *ackWindow) oldestLost() time.Time { return w.lostSince }

// dropFlights moves the batches of the frames in flight to lost.
func (w *ackWindow) dropFlights() {
	if len(w.flights) > 0 && (w.lostSince.IsZero() || w.flights[0].at.Before(w.lostSince)) {
		w.lostSince = w.flights[0].at
	}
	for _, fl := range w.flights {
		// A batch's frames are in flight one after another: it is lost once.
		if fl.b != nil && (len(w.lost) == 0 || w.lost[len(w.lost)-1] != fl.b) {
			w.lost = append(w.lost, fl.b)
		}
	}
	clear(w.flights)
	w.flights = w.flights[:0]
	w.inflight.Store(0)
	w.oldestAt.Store(0)
	if w.ackT != nil {
		w.ackT.Stop()
	}
}

// detach appends to dst, oldest first, the batches of the frames in flight that still
// carry one, each once (a batch's frames are in flight one after another), and leaves
// those frames in flight without them, marked spilled: the caller hands the batches to
// the spill, and an ack that comes later finishes nothing.
func (w *ackWindow) detach(dst []*ring.Batch) []*ring.Batch {
	for i := range w.flights {
		if fl := &w.flights[i]; fl.b != nil {
			if len(dst) == 0 || dst[len(dst)-1] != fl.b {
				dst = append(dst, fl.b)
			}
			fl.b, fl.spilled = nil, true
		}
	}
	return dst
}

// carriesBatches reports whether a frame in flight still carries its batch (see detach).
func (w *ackWindow) carriesBatches() bool {
	for i := range w.flights {
		if w.flights[i].b != nil {
			return true
		}
	}
	return false
}

// takeUnacked appends to dst, oldest first, the batches whose frames will not be acked on
// this connection: those lost with an earlier one, then those in flight. It forgets them.
func (w *ackWindow) takeUnacked(dst []*ring.Batch) []*ring.Batch {
	w.dropFlights()
	dst = append(dst, w.lost...)
	clear(w.lost)
	w.lost, w.lostSince = w.lost[:0], time.Time{}
	return dst
}

// full reports whether the connection has as many frames in flight as it may: MaxInflight,
// or one on a connection the receiver closes after each request (HELO said so), since
// the frames after the first would be lost with it.
func (f *forwarder) full() bool {
	return len(f.flights) >= f.maxInflight || (len(f.flights) > 0 && !f.conn.keepalive)
}

// armAckTimer sets the ack ticker to tick at the oldest frame in flight's deadline. The
// ticker is the settings' clock's (connSettings.clock), made at the first frame and Reset
// after, so that the clock decides when a deadline has passed; onDue reads the time on it
// at each tick. A deadline already past ticks at once.
func (f *forwarder) armAckTimer(now time.Time) {
	d := max(f.flights[0].at.Add(f.s.ackTimeout).Sub(now), time.Nanosecond) // a ticker's period is positive
	if f.ackT == nil {
		f.ackT = f.s.clock.NewTicker(d)
		return
	}
	f.ackT.Reset(d) // since Go 1.23 a Reset ticker never delivers a stale value
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
		if i == 0 {
			if len(f.flights) > 0 {
				f.oldestAt.Store(f.flights[0].at.UnixNano())
				f.armAckTimer(f.s.clock.Now())
			} else {
				f.oldestAt.Store(0)
			}
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

// onDue handles a tick of the ack ticker: the oldest frame's ack is overdue, which ends the
// connection (nil if it is not due yet).
func (f *forwarder) onDue() error {
	now := f.s.clock.Now()
	if now.Before(f.flights[0].at.Add(f.s.ackTimeout)) {
		f.armAckTimer(now) // a clock's ticker may tick early; it follows the oldest frame
		return nil
	}
	ep := &f.s.endpoints[f.conn.server]
	if ep.Network == "unix" {
		// fluentd's in_unix takes chunk options and never answers them.
		return f.lose(fmt.Errorf("fluentcore: no ack from %s within %v: %w", ep.Addr, f.s.ackTimeout, errNoAckOnUnix), true)
	}
	return f.lose(fmt.Errorf("fluentcore: no ack from %s within %v", ep.Addr, f.s.ackTimeout), true)
}
