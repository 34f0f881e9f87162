package forward

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/fluentcore/fluentcore/internal/ring"
	"go.uber.org/zap/zapcore"
)

// errNoAckOnUnix explains an ack timeout on a unix socket: fluentd's in_unix never acks, so
// with RequireAck every frame times out, is resent, and err entries end in the spill
// although they were delivered.
var errNoAckOnUnix = errors.New("fluentd's in_unix never sends acks (the frames may well have arrived): for a unix:// receiver that does not ack, set Err.Acks to AcksOff and leave Info.Acks off")

// Flight is a frame written on the connection whose ack has not come back yet; the zero
// Flight is none.
type Flight struct {
	Chunk string      // its ack token
	At    time.Time   // when it was written; its ack is due AckTimeout later
	N     int         // entries
	Batch *ring.Batch // the batch it carries; nil for a frame of the spill's replay, or once spilled
	// Spilled: its batch went to the spill while it waited (Window.Detach); its ack, if it
	// comes, delivers a duplicate of what the spill has.
	Spilled bool
}

// Window is a connection's frames in flight, with RequireAck: the frames written on the
// connection whose acks have not come back, oldest first, and the ticker of the oldest
// one's ack deadline (nil until the first frame); and the batches of frames that were in
// flight on a connection that ended (lost), until the sender takes them back
// (TakeUnacked).
//
// Invariants: at most maxInflight frames are in flight; a batch is in lost at most once,
// in the order its frames were written, and lostSince is when the oldest of them was
// written (zero while lost is empty); while a frame is in flight the ticker ticks at the
// oldest one's deadline (or early: onDue checks the time), and Status shows the number of
// frames and the oldest one's write. Only the sender that owns the forwarder uses it;
// other goroutines read Status.
type Window struct {
	flights     []Flight
	lost        []*ring.Batch
	lostSince   time.Time // when the oldest frame in lost was written
	maxInflight int
	ackT        *time.Ticker // clock's (armAckTimer)
	clock       zapcore.Clock
	ackTimeout  time.Duration
	shown       *Status // where other goroutines read the frames in flight
}

// init sets the window of a connection on s, shown on st, MaxInflight frames wide.
func (w *Window) init(s *Settings, st *Status) {
	w.clock, w.ackTimeout, w.shown = s.Clock, s.AckTimeout, st
	w.setMaxInflight(s.MaxInflight)
}

// setMaxInflight sets how many frames may wait for their acks at once (at least 1).
func (w *Window) setMaxInflight(n int) {
	w.maxInflight = max(n, 1)
	w.flights = make([]Flight, 0, w.maxInflight)
	w.lost = make([]*ring.Batch, 0, w.maxInflight)
}

// InFlight returns how many frames wait for their acks.
func (w *Window) InFlight() int { return len(w.flights) }

// HasUnacked reports whether TakeUnacked would return any batch: some were lost with an
// earlier connection, or are in flight.
func (w *Window) HasUnacked() bool { return len(w.lost) > 0 || len(w.flights) > 0 }

// OldestLost returns when the oldest frame in lost was written; zero if none.
func (w *Window) OldestLost() time.Time { return w.lostSince }

// push adds fl, just written, to the frames in flight; the first one arms the ack timer.
func (w *Window) push(fl Flight) {
	w.flights = append(w.flights, fl)
	w.shown.inflight.Store(int32(len(w.flights)))
	if len(w.flights) == 1 {
		w.shown.oldestAt.Store(fl.At.UnixNano())
		w.armAckTimer(fl.At)
	}
}

// remove takes the frame at i out of flight and returns it; the ack timer follows the
// oldest frame left.
func (w *Window) remove(i int) Flight {
	fl := w.flights[i]
	w.flights = slices.Delete(w.flights, i, i+1)
	w.shown.inflight.Store(int32(len(w.flights)))
	if i == 0 {
		if len(w.flights) > 0 {
			w.shown.oldestAt.Store(w.flights[0].At.UnixNano())
			w.armAckTimer(w.clock.Now())
		} else {
			w.shown.oldestAt.Store(0)
		}
	}
	return fl
}

// dropFlights moves the batches of the frames in flight to lost.
func (w *Window) dropFlights() {
	if len(w.flights) > 0 && (w.lostSince.IsZero() || w.flights[0].At.Before(w.lostSince)) {
		w.lostSince = w.flights[0].At
	}
	for _, fl := range w.flights {
		// A batch's frames are in flight one after another: it is lost once.
		if fl.Batch != nil && (len(w.lost) == 0 || w.lost[len(w.lost)-1] != fl.Batch) {
			w.lost = append(w.lost, fl.Batch)
		}
	}
	clear(w.flights)
	w.flights = w.flights[:0]
	w.shown.inflight.Store(0)
	w.shown.oldestAt.Store(0)
	if w.ackT != nil {
		w.ackT.Stop()
	}
}

// Detach appends to dst, oldest first, the batches of the frames in flight that still
// carry one, each once (a batch's frames are in flight one after another), and leaves
// those frames in flight without them, marked Spilled: the caller hands the batches to
// the spill, and an ack that comes later finishes nothing.
func (w *Window) Detach(dst []*ring.Batch) []*ring.Batch {
	for i := range w.flights {
		if fl := &w.flights[i]; fl.Batch != nil {
			if len(dst) == 0 || dst[len(dst)-1] != fl.Batch {
				dst = append(dst, fl.Batch)
			}
			fl.Batch, fl.Spilled = nil, true
		}
	}
	return dst
}

// CarriesBatches reports whether a frame in flight still carries its batch (see Detach).
func (w *Window) CarriesBatches() bool {
	for i := range w.flights {
		if w.flights[i].Batch != nil {
			return true
		}
	}
	return false
}

// TakeUnacked appends to dst, oldest first, the batches whose frames will not be acked on
// this connection: those lost with an earlier one, then those in flight. It forgets them.
func (w *Window) TakeUnacked(dst []*ring.Batch) []*ring.Batch {
	w.dropFlights()
	dst = append(dst, w.lost...)
	clear(w.lost)
	w.lost, w.lostSince = w.lost[:0], time.Time{}
	return dst
}

// armAckTimer sets the ack ticker to tick at the oldest frame in flight's deadline. The
// ticker is the clock's (Settings.Clock), made at the first frame and Reset after, so that
// the clock decides when a deadline has passed; onDue reads the time on it at each tick. A
// deadline already past ticks at once.
func (w *Window) armAckTimer(now time.Time) {
	d := max(w.flights[0].At.Add(w.ackTimeout).Sub(now), time.Nanosecond) // a ticker's period is positive
	if w.ackT == nil {
		w.ackT = w.clock.NewTicker(d)
		return
	}
	w.ackT.Reset(d) // since Go 1.23 a Reset ticker never delivers a stale value
}

// Full reports whether the connection has as many frames in flight as it may: its share
// of MaxInflight (Start), or one on a connection the receiver closes after each request
// (HELO said so), since the frames after the first would be lost with it.
func (f *Forwarder) Full() bool {
	w := &f.acks
	return len(w.flights) >= w.maxInflight || (len(w.flights) > 0 && !f.link.conn.keepalive)
}

// AckEvents returns what the next event of the frames in flight comes on: an ack, the end
// of the connection, the oldest frame's ack deadline; all nil while none is in flight,
// except acks while there is a connection: an ack then is one nobody asked for. Each is
// handled by OnAck, OnDead and OnDue.
func (f *Forwarder) AckEvents() (<-chan string, <-chan struct{}, <-chan time.Time) {
	if len(f.acks.flights) == 0 {
		if f.link.conn == nil || !f.s.RequireAck {
			return nil, nil, nil
		}
		return f.link.conn.acks, nil, nil
	}
	return f.link.conn.acks, f.link.conn.dead, f.acks.ackT.C
}

// AwaitAck waits for the next event of the frames in flight and returns the frame it
// acknowledged; an error ends the connection (see Post), except ctx's, which leaves
// everything in flight.
func (f *Forwarder) AwaitAck(ctx context.Context) (Flight, error) {
	for {
		acks, dead, due := f.AckEvents()
		if dead == nil {
			return Flight{}, nil // nothing in flight
		}
		var fl Flight
		var err error
		select {
		case tok := <-acks:
			fl, err = f.OnAck(tok)
		case <-dead:
			fl, err = f.OnDead()
		case <-due:
			err = f.OnDue()
		case <-ctx.Done():
			return Flight{}, ctx.Err()
		}
		if err != nil || fl.Chunk != "" {
			return fl, err
		}
	}
}

// OnAck matches an ack to its frame in flight, wherever it is: a receiver may answer in
// any order. An ack that matches none (another chunk, or one acked already) ends the
// connection, not its server: the frames in flight are sent again.
func (f *Forwarder) OnAck(tok string) (Flight, error) {
	for i := range f.acks.flights {
		if f.acks.flights[i].Chunk != tok {
			continue
		}
		fl := f.acks.remove(i)
		f.succeeded(f.link.conn, fl.N)
		return fl, nil
	}
	return Flight{}, f.lose(fmt.Errorf("fluentcore: ack from %s does not match the chunk of any frame in flight", f.s.Endpoints[f.link.conn.server].Addr), false)
}

// OnDead handles the end of the connection. The reader queues an ack before it can see the
// close that follows it (fluentd with deny_keepalive acks, then closes): a queued ack is
// taken first, or an acknowledged frame would be sent again.
func (f *Forwarder) OnDead() (Flight, error) {
	c := f.link.conn
	select {
	case tok := <-c.acks:
		return f.OnAck(tok)
	default:
	}
	return Flight{}, f.lose(fmt.Errorf("fluentcore: connection to %s lost while waiting for ack: %w", f.s.Endpoints[c.server].Addr, c.err), true)
}

// OnDue handles a tick of the ack ticker: the oldest frame's ack is overdue, which ends the
// connection (nil if it is not due yet).
func (f *Forwarder) OnDue() error {
	now := f.s.Clock.Now()
	if now.Before(f.acks.flights[0].At.Add(f.s.AckTimeout)) {
		f.acks.armAckTimer(now) // a clock's ticker may tick early; it follows the oldest frame
		return nil
	}
	ep := &f.s.Endpoints[f.link.conn.server]
	if ep.Network == "unix" {
		// fluentd's in_unix takes chunk options and never answers them.
		return f.lose(fmt.Errorf("fluentcore: no ack from %s within %v: %w", ep.Addr, f.s.AckTimeout, errNoAckOnUnix), true)
	}
	return f.lose(fmt.Errorf("fluentcore: no ack from %s within %v", ep.Addr, f.s.AckTimeout), true)
}
