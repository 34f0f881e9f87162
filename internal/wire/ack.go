package wire

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"

	"github.com/tinylib/msgp/msgp"
)

// MaxResponseBytes bounds what a receiver may send in one message on a data connection (an
// ack): a hostile or broken peer cannot make the client buffer more than this.
const MaxResponseBytes = 512

// ErrUnexpectedHELO is the error of a receiver that sent HELO (or PONG) on a connection
// that did not run the handshake: it requires the shared key, and the client has none.
var ErrUnexpectedHELO = fmt.Errorf("%w: receiver sent HELO: it requires the shared_key handshake (set Config.Security.SharedKey)", ErrHandshake)

// NewChunkID returns an ack token: base64 of 16 random bytes, 24 ASCII characters.
func NewChunkID() string {
	var id [16]byte
	_, _ = rand.Read(id[:]) // crypto/rand.Read never fails on supported platforms
	return base64.StdEncoding.EncodeToString(id[:])
}

// AckReader reads what a receiver sends on a data connection: one ack map per frame that
// asked for one, and nothing otherwise. Its buffer is fixed (MaxResponseBytes), so reading
// allocates nothing whatever the peer claims. Not safe for concurrent use.
type AckReader struct {
	acks bool // acks were asked for; without them any data is an error
	buf  [MaxResponseBytes]byte
	n    int
}

// NewAckReader returns a reader for a connection whose frames ask for acks (acks true) or
// do not (then any byte the receiver sends is an error).
func NewAckReader(acks bool) *AckReader { return &AckReader{acks: acks} }

// Next returns the token of the next ack, reading from r as needed; acks split across
// reads, or several in one read, are returned one by one. Anything that is not an ack, more
// than MaxResponseBytes in one message, or a read error ends the connection: the error
// says why (ErrUnexpectedHELO for a handshake message).
func (a *AckReader) Next(r io.Reader) (string, error) {
	for {
		if a.n > 0 && a.acks {
			var ack Ack
			rest, err := ack.UnmarshalMsg(a.buf[:a.n])
			switch {
			case err == nil:
				a.n = copy(a.buf[:], a.buf[a.n-len(rest):a.n])
				return ack.Ack, nil
			case !errors.Is(err, msgp.ErrShortBytes):
				if handshakeMessage(a.buf[:a.n]) {
					return "", ErrUnexpectedHELO
				}
				return "", fmt.Errorf("malformed ack: %w", err)
			case a.n == len(a.buf):
				return "", fmt.Errorf("ack longer than %d bytes", MaxResponseBytes)
			}
		}
		m, err := r.Read(a.buf[a.n:])
		if err != nil {
			return "", err
		}
		a.n += m
		if !a.acks {
			if handshakeMessage(a.buf[:a.n]) {
				return "", ErrUnexpectedHELO
			}
			return "", errors.New("receiver sent data the client did not ask for")
		}
	}
}

// handshakeMessage reports whether b starts with an array whose first element is "HELO"
// or "PONG": a receiver that expects a handshake the client did not start.
func handshakeMessage(b []byte) bool {
	_, b, err := msgp.ReadArrayHeaderBytes(b)
	if err != nil {
		return false
	}
	typ, _, err := msgp.ReadStringZC(b)
	return err == nil && (string(typ) == "HELO" || string(typ) == "PONG")
}
