package forwardtest

import (
	"errors"
	"fmt"
	"net"
	"sync/atomic"
)

// Fault injection. Every fault can be switched on and off while the receiver runs, so a
// test can break the receiver, watch the client cope, heal it and watch the client
// recover. Besides these, Stall and Resume stop and restart reading.

// AckFault is what the receiver does with a request that asks for an ack (SetAckFault).
// The request's entries are stored in every case — as when a real ack is lost — so a
// client that resends produces duplicates.
type AckFault int32

const (
	// AckOK answers {"ack": chunk}, the default.
	AckOK AckFault = iota
	// AckWithhold sends no ack and keeps the connection open: the client times out.
	AckWithhold
	// AckWrongToken answers {"ack": "forwardtest-wrong-token"}.
	AckWrongToken
	// AckMalformed answers with the byte 0xc1, which is not msgpack.
	AckMalformed
	// AckTwice answers {"ack": chunk} twice: a client that matches acks to the frames it
	// has in flight finds the second one matches none.
	AckTwice
)

// wrongToken and malformedAck are what AckWrongToken and AckMalformed send.
const wrongToken = "forwardtest-wrong-token"

var malformedAck = []byte{0xc1}

// String returns the fault's name, or "AckFault(n)".
func (f AckFault) String() string {
	switch f {
	case AckOK:
		return "AckOK"
	case AckWithhold:
		return "AckWithhold"
	case AckWrongToken:
		return "AckWrongToken"
	case AckMalformed:
		return "AckMalformed"
	case AckTwice:
		return "AckTwice"
	}
	return fmt.Sprintf("AckFault(%d)", int32(f))
}

// PongFault is how the receiver answers a PING with the right credentials (SetPongFault);
// it matters only with WithSharedKey or WithUsers.
type PongFault int32

const (
	// PongOK answers a proper PONG, the default.
	PongOK PongFault = iota
	// PongWrongDigest answers PONG true with a digest made with another shared key, as an
	// impostor that does not know the key would.
	PongWrongDigest
	// PongAuthFailed answers PONG [false, "forwardtest: PongAuthFailed", "", ""] and
	// closes the connection.
	PongAuthFailed
	// PongNone closes the connection without a PONG, as fluent-bit does on a wrong key.
	PongNone
)

// String returns the fault's name, or "PongFault(n)".
func (f PongFault) String() string {
	switch f {
	case PongOK:
		return "PongOK"
	case PongWrongDigest:
		return "PongWrongDigest"
	case PongAuthFailed:
		return "PongAuthFailed"
	case PongNone:
		return "PongNone"
	}
	return fmt.Sprintf("PongFault(%d)", int32(f))
}

// faults are the receiver's switches, read by every connection without a lock.
type faults struct {
	ack        atomic.Int32
	pong       atomic.Int32
	closeAfter atomic.Int64
}

// SetAckFault sets what happens to acks from now on, on every connection. AckOK heals.
// Safe for concurrent use.
func (r *Receiver) SetAckFault(f AckFault) { r.faults.ack.Store(int32(f)) }

// SetPongFault sets how PINGs with the right credentials are answered from now on.
// PongOK heals. Safe for concurrent use.
func (r *Receiver) SetPongFault(f PongFault) { r.faults.pong.Store(int32(f)) }

// SetCloseAfter makes every connection, open or future, close once it has read n bytes
// since it was accepted (with TLS, n counts the plaintext): the request those bytes end in
// is stored and acked if complete, and counted in Stats.Truncated if not. n <= 0 heals.
// Safe for concurrent use.
func (r *Receiver) SetCloseAfter(n int64) { r.faults.closeAfter.Store(max(n, 0)) }

// SetRefuse closes the listener when refuse is true, so new connections are refused (connection
// refused, or no such file for a unix socket) while open ones carry on (a connection the
// kernel queued but the receiver had not taken in yet is reset); SetRefuse(false)
// listens again on the same address and port. It returns an error only if listening again
// fails (another process took the port). Idempotent and safe for concurrent use; Close
// ends it.
func (r *Receiver) SetRefuse(refuse bool) error { return r.acc.refuse(refuse) }

// CloseConnections closes every open connection now, as a restarting receiver would;
// requests being read are counted in Stats.Truncated. New connections are accepted as
// usual. Safe for concurrent use.
func (r *Receiver) CloseConnections() { r.acc.closeConns() }

// errInjectedClose is the read error of a connection closed by SetCloseAfter.
var errInjectedClose = errors.New("closed by SetCloseAfter")

// faultConn counts what a connection has read and closes it when SetCloseAfter says so.
// Only the connection's own goroutine reads it.
type faultConn struct {
	net.Conn
	f    *faults
	read int64
}

func (c *faultConn) Read(p []byte) (int, error) {
	if limit := c.f.closeAfter.Load(); limit > 0 {
		left := limit - c.read
		if left <= 0 {
			_ = c.Close()
			return 0, errInjectedClose
		}
		if int64(len(p)) > left {
			p = p[:left]
		}
	}
	n, err := c.Conn.Read(p)
	c.read += int64(n)
	return n, err
}
