package wire

import (
	"bytes"
	"crypto/rand"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/tinylib/msgp/msgp"
)

// ErrHandshake is wrapped by every error of the shared-key handshake: the receiver did not
// send a valid HELO, rejected the PING (wrong shared key, user or password), answered with
// a PONG that does not prove it knows the key, or closed or timed out before PONG. The root
// package exports it as fluentcore.ErrHandshake.
var ErrHandshake = errors.New("fluentcore: shared-key handshake failed")

// MaxHandshakeBytes bounds HELO and PONG. fluentd's HELO is about 60 bytes, a PONG about
// 150 plus the receiver's hostname; fluent-bit reads the PING through a 1024-byte buffer.
const MaxHandshakeBytes = 1024

// Credentials are what the client proves in the handshake.
type Credentials struct {
	SharedKey, SelfHostname, Username, Password string
}

// helo is what the client uses of the receiver's HELO.
type helo struct {
	nonce, auth []byte
	keepalive   bool
}

// Handshake runs HELO/PING/PONG on a new connection; the caller sets its deadline. It
// reports whether the receiver keeps the connection open after a request (HELO's
// keepalive). Nothing else is written before PONG has been verified. Every error wraps
// ErrHandshake and names addr, never the shared key or the password.
func Handshake(c net.Conn, cr *Credentials, addr string) (keepalive bool, err error) {
	fail := func(format string, args ...any) (bool, error) {
		// The arguments carry what the receiver sent; the format is ours, and a short key
		// that happens to be one of its words must not blot it out.
		for i, a := range args {
			args[i] = redact(fmt.Sprint(a), cr)
		}
		return false, fmt.Errorf("%w with %s: %s", ErrHandshake, addr, fmt.Sprintf(format, args...))
	}

	var buf [MaxHandshakeBytes]byte
	msg, err := ReadMessage(c, buf[:])
	if err != nil {
		return fail("reading HELO: %v (does the receiver expect a shared key?)", err)
	}
	h, err := decodeHELO(msg)
	if err != nil {
		return fail("%v", err)
	}

	salt := newSalt()
	ping := Ping{
		Type:     "PING",
		Hostname: cr.SelfHostname,
		Salt:     salt,
		Digest:   hexSHA512(salt, cr.SelfHostname, string(h.nonce), cr.SharedKey),
	}
	if len(h.auth) > 0 {
		ping.Username = cr.Username
		ping.PasswordDigest = hexSHA512(string(h.auth), cr.Username, cr.Password)
	}
	out, _ := ping.MarshalMsg(buf[:0]) // cannot fail
	if _, err := c.Write(out); err != nil {
		return fail("writing PING: %v", err)
	}

	msg, err = ReadMessage(c, buf[:])
	if err != nil {
		return fail("reading PONG: %v (a closed connection usually means the receiver rejected the shared key)", err)
	}
	var pong Pong
	if rest, err := pong.UnmarshalMsg(msg); err != nil || len(rest) != 0 || pong.Type != "PONG" {
		return fail("malformed PONG (want [\"PONG\", bool, str, str, str])")
	}
	if !pong.AuthResult {
		return fail("receiver rejected the credentials: %q", pong.Reason)
	}
	if pong.Hostname == cr.SelfHostname {
		// The PONG digest would then equal our own PING digest: a peer that merely echoes it
		// would pass. fluentd refuses this configuration too.
		return fail("receiver's hostname %q equals SelfHostname; give the client (Config.Security.SelfHostname) or the receiver (self_hostname) another name", pong.Hostname)
	}
	want := hexSHA512(salt, pong.Hostname, string(h.nonce), cr.SharedKey)
	if subtle.ConstantTimeCompare([]byte(pong.Digest), []byte(want)) != 1 {
		return fail("PONG digest does not match: the receiver does not know the shared key")
	}
	return h.keepalive, nil
}

// ReadMessage reads exactly one msgpack value from c into buf and returns it. More than
// len(buf) bytes, bytes after the value, or bytes that are not msgpack are errors. Reads
// are bounded by the connection's deadline.
func ReadMessage(c net.Conn, buf []byte) ([]byte, error) {
	n := 0
	for {
		if n > 0 {
			rest, err := msgp.Skip(buf[:n])
			switch {
			case err == nil && len(rest) == 0:
				return buf[:n], nil
			case err == nil:
				return nil, errors.New("unexpected data after the message")
			case !errors.Is(err, msgp.ErrShortBytes):
				return nil, fmt.Errorf("malformed msgpack: %w", err)
			}
		}
		if n == len(buf) {
			return nil, fmt.Errorf("message longer than %d bytes", len(buf))
		}
		m, err := c.Read(buf[n:])
		n += m
		if err != nil && m == 0 {
			return nil, err
		}
	}
}

// decodeHELO decodes ["HELO", {"nonce": str|bin, "auth": str|bin, "keepalive": bool}].
// nonce and auth are raw bytes: fluentd sends bin, fluent-bit str holding 16 random bytes
// (not UTF-8), so neither type nor encoding is checked. Unknown keys are ignored; a missing
// keepalive means true.
func decodeHELO(b []byte) (helo, error) {
	h := helo{keepalive: true}
	bad := func(what string) (helo, error) {
		return helo{}, fmt.Errorf("malformed HELO: %s", what)
	}
	n, b, err := msgp.ReadArrayHeaderBytes(b)
	if err != nil || n != 2 {
		return bad("want [\"HELO\", {options}]")
	}
	typ, b, err := msgp.ReadStringZC(b)
	if err != nil || string(typ) != "HELO" {
		return bad("first element is not \"HELO\"")
	}
	nkeys, b, err := msgp.ReadMapHeaderBytes(b)
	if err != nil {
		return bad("options are not a map")
	}
	for range nkeys {
		var key []byte
		if msgp.NextType(b) == msgp.StrType {
			key, b, err = msgp.ReadStringZC(b)
		} else {
			b, err = msgp.Skip(b)
		}
		if err != nil {
			return bad("truncated options")
		}
		switch string(key) {
		case "nonce", "auth":
			v, rest, err := readRawString(b)
			if err != nil {
				return bad(fmt.Sprintf("%s is neither str nor bin", key))
			}
			if string(key) == "nonce" {
				h.nonce = bytes.Clone(v)
			} else {
				h.auth = bytes.Clone(v)
			}
			b = rest
		case "keepalive":
			if msgp.NextType(b) == msgp.BoolType {
				h.keepalive, b, err = msgp.ReadBoolBytes(b)
			} else {
				b, err = msgp.Skip(b)
			}
		default:
			b, err = msgp.Skip(b)
		}
		if err != nil {
			return bad("truncated options")
		}
	}
	if len(h.nonce) == 0 {
		return bad("no nonce")
	}
	return h, nil
}

// readRawString reads a str or a bin as raw bytes, without UTF-8 validation.
func readRawString(b []byte) (v, rest []byte, err error) {
	if msgp.NextType(b) == msgp.BinType {
		return msgp.ReadBytesZC(b)
	}
	return msgp.ReadStringZC(b)
}

// hexSHA512 returns the lowercase hex SHA-512 of its parts, concatenated.
func hexSHA512(parts ...string) string {
	h := sha512.New()
	for _, p := range parts {
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// newSalt returns 16 random bytes as 32 lowercase hex characters, a str every receiver
// accepts (fluentd's own client does the same).
func newSalt() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b[:])
}

// redact replaces the shared key and the password in text the receiver sent (a hostile
// receiver could echo them back in its PONG reason) with "[redacted]", where they stand
// as a value of their own: not inside a longer word, so that a key such as "shared" leaves
// fluentd's "shared_key mismatch" readable.
func redact(msg string, cr *Credentials) string {
	for _, secret := range []string{cr.SharedKey, cr.Password} {
		if secret == "" {
			continue
		}
		var b strings.Builder
		rest := msg
		for {
			i := strings.Index(rest, secret)
			if i < 0 {
				break
			}
			end := i + len(secret)
			b.WriteString(rest[:i])
			if wordByte(rest, i-1) || wordByte(rest, end) {
				b.WriteString(secret) // part of a longer word: not the value
			} else {
				b.WriteString("[redacted]")
			}
			rest = rest[end:]
		}
		b.WriteString(rest)
		msg = b.String()
	}
	return msg
}

// wordByte reports whether s[i] exists and continues a word: a letter, digit, '_' or '-',
// or any byte of a multi-byte character.
func wordByte(s string, i int) bool {
	if i < 0 || i >= len(s) {
		return false
	}
	c := s[i]
	return c >= 0x80 || c == '_' || c == '-' || ('0' <= c && c <= '9') || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
}
