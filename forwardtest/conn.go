package forwardtest

import (
	"errors"
	"fmt"
	"io"

	"github.com/tinylib/msgp/msgp"
)

// readBufferSize is the per-connection read buffer.
const readBufferSize = 32 << 10

// conn serves one connection: the handshake if configured, then request after request,
// each read whole, decoded, stored in the ledger and acked, until the connection ends, a
// request violates the protocol, or the receiver closes.
//
// Invariants: only the connection's own goroutine uses a conn (its acker's delayed writer
// aside); the stall gate is passed before waiting for a request and again once its first
// byte is there, so that no request arriving after Stall returned is decoded; a violating
// request is neither stored nor acked, and ends the connection; frames counts the
// requests started, numbering them in messages.
type conn struct {
	id     int64
	peer   string
	o      *options
	w      io.Writer // where HELO and PONG go
	faults *faults
	got    *ledger
	stall  *stall
	logf   func(format string, args ...any) // never nil
	done   <-chan struct{}                  // the receiver's: closed by Close

	rate    *pacer // WithReadRate, shared by every connection
	ownRate pacer  // WithConnReadRate
	in      framer
	dec     decoder
	acks    acker
	frames  int64 // requests started on this connection
	lastN   int   // entries in the last request
}

// serve runs the connection until it ends; it acks what it holds before it returns.
func (c *conn) serve() {
	defer c.acks.end()
	if c.o.handshake() && !c.handshake() {
		return
	}
	for {
		if !c.stall.gate(false) {
			return
		}
		if err := c.in.arrived(); err != nil {
			return // closed between requests: normal
		}
		if !c.stall.gate(true) {
			return
		}
		if !c.step() || c.o.denyKeepalive {
			return // deny_keepalive: one request per connection, as fluentd
		}
		if !c.rate.take(c.lastN, c.done) || !c.ownRate.take(c.lastN, c.done) {
			return
		}
	}
}

// step reads, decodes, stores and acks one request. It reports whether the connection
// should go on.
func (c *conn) step() bool {
	c.frames++
	if err := c.in.read(); err != nil {
		if isClosed(c.done) {
			return false
		}
		var v violationError
		if errors.As(err, &v) {
			c.violation(fmt.Errorf("conn %d (%s) request %d: %w", c.id, c.peer, c.frames, v.err))
			return false
		}
		c.got.count(truncated)
		c.logf("forwardtest: conn %d (%s): closed after %d bytes of request %d: %v", c.id, c.peer, len(c.in.frame), c.frames, err)
		return false
	}
	res, err := c.dec.decode(c.in.frame)
	if err != nil {
		where := ""
		switch {
		case res.tag != "":
			where = fmt.Sprintf(" (%v, tag %q)", res.mode, res.tag)
		case res.mode != 0:
			where = fmt.Sprintf(" (%v)", res.mode)
		}
		c.violation(fmt.Errorf("conn %d (%s) request %d%s: %w", c.id, c.peer, c.frames, where, err))
		c.dec.clearBatch()
		return false
	}
	c.got.request(c.dec.batch, res.n, res.tagZC, len(c.in.frame))
	c.lastN = res.n
	c.dec.clearBatch()
	if res.hasChunk {
		return c.acks.ack(res.chunk, c.frames)
	}
	return true
}

// violation records a protocol violation; the caller then closes the connection.
func (c *conn) violation(err error) {
	c.got.violation(err)
	c.logf("forwardtest: protocol violation, closing the connection: %v", err)
}

// newConn builds the conn that serves rw, the id-th connection, from peer.
func (r *Receiver) newConn(rw io.ReadWriter, id int64, peer string) *conn {
	return &conn{
		id: id, peer: peer, o: &r.opts, w: rw,
		faults: &r.faults, got: r.got, stall: r.stall, logf: r.logf, done: r.acc.done,
		rate: &r.rate, ownRate: pacer{rate: r.opts.connReadRate},
		in:  framer{rd: msgp.NewReaderSize(rw, readBufferSize)},
		dec: decoder{countOnly: r.opts.countOnly},
		acks: acker{
			id: id, peer: peer, w: rw, faults: &r.faults, got: r.got, logf: r.logf,
			done: r.acc.done, delay: r.opts.ackDelay,
		},
	}
}
