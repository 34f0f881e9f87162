package forwardtest

import (
	"crypto/rand"
	"crypto/sha512"
	"crypto/subtle"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"

	"github.com/tinylib/msgp/msgp"
)

// DefaultHostname is the receiver's self_hostname in PONG unless WithHostname says
// otherwise. It is deliberately not the machine's name: a client must use a hostname that
// differs from the receiver's (fluentd's rule), and clients default to the machine's.
const DefaultHostname = "forwardtest"

// maxPingBytes is fluent-bit's buffer for the PING: a longer one makes it fail the
// handshake, so forwardtest records it as a violation.
const maxPingBytes = 1024

// WithSharedKey turns on the shared_key handshake: every connection starts with the
// receiver's HELO, and requests are accepted only after the client's PING proves the key
// (digest sha512(salt ‖ client hostname ‖ nonce ‖ key)) and the receiver's PONG. A wrong
// key gets PONG [false, "shared_key mismatch"] and the connection is closed, as fluentd
// does; so is a first request that is not a PING (a client without the key). A PING that
// fluent-bit would reject (not 6 elements, a field that is not a str, longer than 1024
// bytes) is a violation. Default: no handshake. An empty key with no WithUsers means no
// handshake.
func WithSharedKey(key string) Option {
	return func(o *options) { o.sharedKey = key }
}

// WithUsers turns on user authentication (fluentd's user_auth, fluent-bit's
// security.users): the PING must name one of the users (username -> password) with the
// digest sha512(auth ‖ username ‖ password), or the client gets PONG [false,
// "username/password mismatch"] and the connection is closed. It turns the handshake on
// even without WithSharedKey (the key is then ""). The map is copied. Default: none.
func WithUsers(users map[string]string) Option {
	cp := maps.Clone(users)
	return func(o *options) { o.users = cp }
}

// WithHostname sets the receiver's self_hostname, sent in PONG and part of its digest.
// Default DefaultHostname.
func WithHostname(name string) Option {
	return func(o *options) { o.hostname = name }
}

// WithHELOStr makes the HELO carry its nonce and auth as msgpack str holding 16 raw
// (not UTF-8) bytes, and leave out "keepalive", as fluent-bit does. The default is
// fluentd's form: bin nonce and auth, and "keepalive": true.
func WithHELOStr() Option {
	return func(o *options) { o.heloStr = true }
}

// DenyKeepalive makes the receiver close each connection after its first request (and
// its ack), as fluentd's deny_keepalive does; with a handshake, HELO then says
// "keepalive": false. Default: connections carry any number of requests.
func DenyKeepalive() Option {
	return func(o *options) { o.denyKeepalive = true }
}

// WithTLS makes the receiver speak TLS with cfg (see NewTLSCert for a throwaway
// certificate); Addr then starts with "tls://". cfg is cloned. A unix address with TLS
// makes Start fail. Default: plain TCP.
func WithTLS(cfg *tls.Config) Option {
	return func(o *options) { o.tlsConfig = cfg }
}

// WithTLS12Only pins the receiver's TLS version to 1.2 (min and max), like fluentd's
// default tls_version TLSv1_2. It has no effect without WithTLS.
func WithTLS12Only() Option {
	return func(o *options) { o.tls12Only = true }
}

// hello is the receiver's side of one handshake: the nonce and auth salt its HELO sent,
// which the client's PING digests must be made with. They are random, fresh for each
// connection, and never change after newHello.
type hello struct {
	nonce, auth [16]byte
}

func newHello() hello {
	var h hello
	_, _ = rand.Read(h.nonce[:]) // crypto/rand.Read never fails on supported platforms
	_, _ = rand.Read(h.auth[:])
	return h
}

// appendHELO appends the HELO: its nonce and auth as bin with "keepalive" (fluentd's form)
// or, with heloStr, as str leaving "keepalive" out unless denyKeepalive (fluent-bit's).
func (h *hello) appendHELO(b []byte, heloStr, denyKeepalive bool) []byte {
	b = msgp.AppendArrayHeader(b, 2)
	b = msgp.AppendString(b, "HELO")
	if heloStr {
		n := uint32(2)
		if denyKeepalive {
			n++
		}
		b = msgp.AppendMapHeader(b, n)
		b = msgp.AppendString(b, "nonce")
		b = msgp.AppendStringFromBytes(b, h.nonce[:])
		b = msgp.AppendString(b, "auth")
		b = msgp.AppendStringFromBytes(b, h.auth[:])
	} else {
		b = msgp.AppendMapHeader(b, 3)
		b = msgp.AppendString(b, "nonce")
		b = msgp.AppendBytes(b, h.nonce[:])
		b = msgp.AppendString(b, "auth")
		b = msgp.AppendBytes(b, h.auth[:])
	}
	if !heloStr || denyKeepalive {
		b = msgp.AppendString(b, "keepalive")
		b = msgp.AppendBool(b, !denyKeepalive)
	}
	return b
}

// mismatch returns why fluentd would reject p, made with sharedKey and, when users is not
// empty, one of users; "" if it would accept it.
func (h *hello) mismatch(p ping, sharedKey string, users map[string]string) string {
	if want := hexSHA512(p.salt, p.hostname, string(h.nonce[:]), sharedKey); !equal(p.digest, want) {
		return "shared_key mismatch"
	}
	if len(users) > 0 {
		pw, ok := users[p.username]
		if !ok || !equal(p.passwordDigest, hexSHA512(string(h.auth[:]), p.username, pw)) {
			return "username/password mismatch"
		}
	}
	return ""
}

// handshake runs the server side of HELO/PING/PONG and reports whether the connection
// goes on to requests.
func (c *conn) handshake() bool {
	h := newHello()
	if _, err := c.w.Write(h.appendHELO(nil, c.o.heloStr, c.o.denyKeepalive)); err != nil {
		if !isClosed(c.done) {
			c.logf("forwardtest: conn %d (%s): writing HELO: %v", c.id, c.peer, err)
		}
		return false
	}
	if !c.readPing() {
		return false
	}
	p, err := parsePing(c.in.frame)
	if err != nil {
		var v violationError
		if errors.As(err, &v) {
			c.violation(fmt.Errorf("conn %d (%s) PING: %w", c.id, c.peer, v.err))
			return false
		}
		return c.reject(err.Error())
	}
	if reason := h.mismatch(p, c.o.sharedKey, c.o.users); reason != "" {
		return c.reject(reason)
	}
	c.got.count(handshakes)
	return c.pong(&h, p)
}

// readPing reads the client's first message into c.in.frame, passing the stall gate as
// a request does; false if the connection ended, the message violates the protocol, or
// the receiver closed.
func (c *conn) readPing() bool {
	if !c.stall.gate(false) {
		return false
	}
	if err := c.in.arrived(); err != nil {
		if !isClosed(c.done) {
			c.logf("forwardtest: conn %d (%s): closed before PING: %v", c.id, c.peer, err)
		}
		return false
	}
	if !c.stall.gate(true) {
		return false
	}
	if err := c.in.read(); err != nil {
		if isClosed(c.done) {
			return false
		}
		var v violationError
		if errors.As(err, &v) {
			c.violation(fmt.Errorf("conn %d (%s) PING: %w", c.id, c.peer, v.err))
		} else {
			c.logf("forwardtest: conn %d (%s): closed in the middle of PING: %v", c.id, c.peer, err)
		}
		return false
	}
	return true
}

// pong answers the accepted PING p as the PongFault set now says; false unless it sent
// a proper PONG.
func (c *conn) pong(h *hello, p ping) bool {
	key := c.o.sharedKey
	switch PongFault(c.faults.pong.Load()) {
	case PongNone:
		c.logf("forwardtest: conn %d (%s): closing without PONG (PongNone)", c.id, c.peer)
		return false
	case PongAuthFailed:
		c.writePong(false, "forwardtest: PongAuthFailed", "", "")
		return false
	case PongWrongDigest:
		key += " but wrong"
	}
	digest := hexSHA512(p.salt, c.o.hostname, string(h.nonce[:]), key)
	return c.writePong(true, "", c.o.hostname, digest)
}

// reject answers PONG false with reason and ends the connection, as fluentd does.
func (c *conn) reject(reason string) bool {
	c.got.count(handshakeFailures)
	c.logf("forwardtest: conn %d (%s): handshake rejected: %s", c.id, c.peer, reason)
	c.writePong(false, reason, "", "")
	return false
}

func (c *conn) writePong(ok bool, reason, hostname, digest string) bool {
	b := msgp.AppendArrayHeader(nil, 5)
	b = msgp.AppendString(b, "PONG")
	b = msgp.AppendBool(b, ok)
	b = msgp.AppendString(b, reason)
	b = msgp.AppendString(b, hostname)
	b = msgp.AppendString(b, digest)
	if _, err := c.w.Write(b); err != nil {
		if !isClosed(c.done) {
			c.logf("forwardtest: conn %d (%s): writing PONG: %v", c.id, c.peer, err)
		}
		return false
	}
	return ok
}

// ping is a decoded PING.
type ping struct {
	hostname, salt, digest, username, passwordDigest string
}

// parsePing decodes ["PING", hostname, salt, digest, username, password digest]. A first
// message that is not a PING at all is an error (fluentd answers "invalid ping message");
// a PING fluent-bit would reject is a violationError.
func parsePing(b []byte) (ping, error) {
	var p ping
	if msgp.NextType(b) != msgp.ArrayType {
		return p, errors.New("invalid ping message")
	}
	n, rest, err := msgp.ReadArrayHeaderBytes(b)
	if err != nil {
		return p, violationError{malformed(err)}
	}
	typ, _, err := msgp.ReadStringZC(rest)
	if err != nil || string(typ) != "PING" {
		return p, errors.New("invalid ping message")
	}
	if len(b) > maxPingBytes {
		return p, violationError{fmt.Errorf("PING is %d bytes; fluent-bit reads at most %d", len(b), maxPingBytes)}
	}
	if n != 6 {
		return p, violationError{fmt.Errorf("PING has %d elements, want 6", n)}
	}
	var fields [6]string
	for i := range fields {
		s, r, err := msgp.ReadStringZC(rest)
		if err != nil {
			return p, violationError{fmt.Errorf("PING element %d is %s, not str (fluent-bit rejects the PING)", i, typeName(rest))}
		}
		fields[i], rest = string(s), r
	}
	return ping{hostname: fields[1], salt: fields[2], digest: fields[3], username: fields[4], passwordDigest: fields[5]}, nil
}

func hexSHA512(parts ...string) string {
	h := sha512.New()
	for _, p := range parts {
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil))
}

func equal(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }
