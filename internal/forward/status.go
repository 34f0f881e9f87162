package forward

import (
	"sync"
	"sync/atomic"
	"time"
)

// Status is what other goroutines read of a connection: its server, its counts, its
// attempts, failures and frames in flight. The forwarder's sender writes it; every method is
// safe for concurrent use.
//
// Invariants: server is -1 while there is no connection; attemptAt is not 0 only while a
// Post is under way, oldestAt only while a frame is in flight (the oldest one's write) and
// inflight is the number of those frames; downSince is not 0 from the first failure after a
// success until the next success, and lastErr is nil after a success. Times are unix nanos
// on Settings.Clock.
type Status struct {
	server            atomic.Int32    // index of the server connected to; -1 while none
	connects          atomic.Uint64   // connections opened (and handshaken)
	handshakeFailures atomic.Uint64   // handshakes that failed, and receivers that asked for one unasked
	deliveredTo       []atomic.Uint64 // entries delivered, by server
	lastTaken         []atomic.Int64  // when a server last took a frame (progress), by server; 0 before the first
	attemptAt         atomic.Int64    // when the Post under way began (dial and write); 0 if none
	downSince         atomic.Int64    // the first failure since the last success; 0 if none
	inflight          atomic.Int32    // frames in flight (Window)
	oldestAt          atomic.Int64    // when the oldest frame in flight was written; 0 if none
	errMu             sync.Mutex
	lastErr           error // of the last attempt; nil after a success
}

// init sizes the counts by server for n servers, and sets no connection.
func (st *Status) init(n int) {
	st.deliveredTo = make([]atomic.Uint64, n)
	st.lastTaken = make([]atomic.Int64, n)
	st.server.Store(-1)
}

// Server returns the index of the server the connection is on (Forwarder.Servers); -1
// while there is none.
func (st *Status) Server() int { return int(st.server.Load()) }

// Connects returns how many connections were opened (and handshaken).
func (st *Status) Connects() uint64 { return st.connects.Load() }

// HandshakeFailures returns how many handshakes failed, counting a receiver that asked for
// one that was not configured.
func (st *Status) HandshakeFailures() uint64 { return st.handshakeFailures.Load() }

// Delivered returns the entries delivered to server i.
func (st *Status) Delivered(i int) uint64 { return st.deliveredTo[i].Load() }

// LastTaken returns when server i last took a frame (unix nanos), 0 before the first.
func (st *Status) LastTaken(i int) int64 { return st.lastTaken[i].Load() }

// FramesInFlight returns how many frames wait for their acks.
func (st *Status) FramesInFlight() int { return int(st.inflight.Load()) }

// BusySince returns when the oldest send under way on the connection began (unix nanos):
// the Post writing a frame, or the oldest frame waiting for its ack; 0 if none.
func (st *Status) BusySince() int64 {
	a, o := st.attemptAt.Load(), st.oldestAt.Load()
	if a == 0 || (o != 0 && o < a) {
		return o
	}
	return a
}

// StuckSince returns when the connection's stall began (unix nanos), if a send is under
// way (BusySince): the send's start, or the last frame a server took after it (an ack that
// came for a later frame: the receiver still answers). 0 if no send is under way.
func (st *Status) StuckSince() int64 {
	at := st.BusySince()
	if at == 0 {
		return 0
	}
	for i := range st.lastTaken {
		at = max(at, st.lastTaken[i].Load())
	}
	return at
}

// Failing reports whether the last send attempt failed.
func (st *Status) Failing() bool { return st.downSince.Load() != 0 }

// DisconnectedFor reports how long sends have been failing at now (0 while they succeed).
func (st *Status) DisconnectedFor(now time.Time) time.Duration {
	since := st.downSince.Load()
	if since == 0 {
		return 0
	}
	return now.Sub(time.Unix(0, since))
}

// LastError returns the error of the last send attempt, nil if it succeeded.
func (st *Status) LastError() error {
	st.errMu.Lock()
	defer st.errMu.Unlock()
	return st.lastErr
}

func (st *Status) setLastError(err error) {
	st.errMu.Lock()
	st.lastErr = err
	st.errMu.Unlock()
}
