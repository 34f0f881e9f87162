package forwardtest

import (
	"io"
	"slices"
	"time"

	"github.com/tinylib/msgp/msgp"
)

// acker answers one connection's requests that ask for an ack, as the AckFault set now
// says, at once or, with WithAckDelay, delay after the request was read, by a writer
// goroutine of its own.
//
// Invariants: acks are written in the order of their requests; every ack written is
// counted in the ledger as an ack, or as a faulted one when a fault shaped it or withheld
// it; buf is reused from one ack to the next. The delayed writer starts on the first
// delayed ack and is the only one that writes acks from then on; end lets it write what it
// holds and waits for it, so that a connection closed after a request acks it first.
type acker struct {
	id     int64
	peer   string
	w      io.Writer
	faults *faults
	got    *ledger
	logf   func(format string, args ...any) // never nil
	done   <-chan struct{}                  // the receiver's: closed by Close
	delay  time.Duration                    // WithAckDelay
	buf    []byte                           // the ack being written

	// The delayed writer: the acks it holds, closed by end; closed when it is done;
	// closed when a write failed.
	delayed                chan delayedAck
	ackerDone, ackerFailed chan struct{}
}

// delayedAck is an ack WithAckDelay holds back until at.
type delayedAck struct {
	at    time.Time
	ack   []byte
	fault AckFault
	frame int64
}

// ack answers the chunk of request number frame; false if the connection failed or the
// receiver closed, which ends the connection.
func (a *acker) ack(chunk string, frame int64) bool {
	fault := AckFault(a.faults.ack.Load())
	if fault == AckWithhold {
		a.got.count(faultedAcks)
		return true
	}
	token := chunk
	if fault == AckWrongToken {
		token = wrongToken
	}
	a.buf = msgp.AppendMapHeader(a.buf[:0], 1)
	a.buf = msgp.AppendString(a.buf, "ack")
	a.buf = msgp.AppendString(a.buf, token)
	switch fault {
	case AckMalformed:
		a.buf = append(a.buf[:0], malformedAck...)
	case AckTwice:
		a.buf = append(a.buf, a.buf...)
	}
	if a.delay > 0 {
		return a.later(fault, frame)
	}
	return a.write(a.buf, fault, frame)
}

// write writes the ack of request number frame; false if the connection failed.
func (a *acker) write(ack []byte, fault AckFault, frame int64) bool {
	if _, err := a.w.Write(ack); err != nil {
		if !isClosed(a.done) {
			a.logf("forwardtest: conn %d (%s): writing ack for request %d: %v", a.id, a.peer, frame, err)
		}
		return false
	}
	if fault != AckOK {
		a.got.count(faultedAcks)
		return true
	}
	a.got.count(acks)
	return true
}

// later queues the ack in a.buf for the delayed writer, starting it on first use; false
// if the receiver closed or the writer failed.
func (a *acker) later(fault AckFault, frame int64) bool {
	if a.delayed == nil {
		a.delayed, a.ackerDone, a.ackerFailed = make(chan delayedAck, 1024), make(chan struct{}), make(chan struct{})
		go a.writeDelayed()
	}
	d := delayedAck{at: time.Now().Add(a.delay), ack: slices.Clone(a.buf), fault: fault, frame: frame}
	select {
	case a.delayed <- d:
		return true
	case <-a.ackerFailed:
		return false
	case <-a.done:
		return false
	}
}

// writeDelayed writes the queued acks in order, each at its time, until the queue is
// closed (end) or a write fails.
func (a *acker) writeDelayed() {
	defer close(a.ackerDone)
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for d := range a.delayed {
		if wait := time.Until(d.at); wait > 0 {
			t.Reset(wait)
			select {
			case <-t.C:
			case <-a.done:
				return
			}
		}
		if !a.write(d.ack, d.fault, d.frame) {
			close(a.ackerFailed)
			return
		}
	}
}

// end lets the delayed writer send what it holds, and waits for it.
func (a *acker) end() {
	if a.delayed == nil {
		return
	}
	close(a.delayed)
	select {
	case <-a.ackerDone:
	case <-a.done:
	}
}
