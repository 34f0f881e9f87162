package wire

import (
	"bytes"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore/internal/testkit"
	"github.com/tinylib/msgp/msgp"
)

// notUTF8 is 16 bytes that are not valid UTF-8, as fluent-bit's str nonce may be.
var notUTF8 = []byte{0xff, 0xfe, 0xc0, 0x80, 0xed, 0xa0, 0x80, 1, 2, 3, 4, 5, 6, 7, 8, 9}

func TestDecodeHELO(t *testing.T) {
	nonce, auth := []byte("0123456789abcdef"), []byte("fedcba9876543210")
	ok := []struct {
		name      string
		msg       []byte
		nonce     []byte
		auth      []byte
		keepalive bool
	}{
		{"fluentd: bin, keepalive true", testkit.HELO(nonce, auth, false, "keepalive", true), nonce, auth, true},
		{"fluent-bit: str not UTF-8, no keepalive", testkit.HELO(notUTF8, notUTF8, true), notUTF8, notUTF8, true},
		{"keepalive false", testkit.HELO(nonce, nil, false, "keepalive", false), nonce, nil, false},
		{"unknown keys ignored", testkit.HELO(nonce, auth, false, "future", map[string]any{"x": 1}, 7, "int key"), nonce, auth, true},
	}
	for _, c := range ok {
		h, err := decodeHELO(c.msg)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if !bytes.Equal(h.nonce, c.nonce) || !bytes.Equal(h.auth, c.auth) || h.keepalive != c.keepalive {
			t.Errorf("%s: got %+v", c.name, h)
		}
	}
	bad := map[string][]byte{
		"not an array":  msgp.AppendString(nil, "HELO"),
		"wrong type":    append(msgp.AppendString(msgp.AppendArrayHeader(nil, 2), "PONG"), 0x80),
		"three items":   append(msgp.AppendString(msgp.AppendArrayHeader(nil, 3), "HELO"), 0x80, 0xc0),
		"no nonce":      append(msgp.AppendString(msgp.AppendArrayHeader(nil, 2), "HELO"), 0x80),
		"int nonce":     testkit.HELO(nil, nil, false, "nonce", 5)[:0],
		"options array": append(msgp.AppendString(msgp.AppendArrayHeader(nil, 2), "HELO"), 0x90),
		"truncated":     testkit.HELO(nonce, auth, false)[:20],
	}
	b := msgp.AppendString(msgp.AppendArrayHeader(nil, 2), "HELO")
	b = msgp.AppendMapHeader(b, 1)
	b = msgp.AppendString(b, "nonce")
	bad["int nonce"] = msgp.AppendInt(b, 5)
	for name, msg := range bad {
		if _, err := decodeHELO(msg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// fakeReceiver plays the receiver's side of a handshake on a pipe: it sends helo, reads
// the PING and answers with what answer returns (nothing: it keeps the connection open
// and reports any byte the client sends before it closes). After an answer it closes.
type fakeReceiver struct {
	ping  chan Ping
	extra chan int // bytes the client sent after its PING, counted until it closes
}

func startFakeReceiver(t *testing.T, helo []byte, answer func(p Ping) []byte) (net.Conn, *fakeReceiver) {
	t.Helper()
	client, server := net.Pipe()
	f := &fakeReceiver{ping: make(chan Ping, 1), extra: make(chan int, 1)}
	done := make(chan struct{})
	t.Cleanup(func() {
		_ = client.Close()
		_ = server.Close()
		<-done
	})
	go func() {
		defer close(done)
		defer close(f.ping)
		if _, err := server.Write(helo); err != nil {
			return
		}
		var buf [4096]byte
		msg, err := ReadMessage(server, buf[:])
		if err != nil {
			return
		}
		var p Ping
		if _, err := p.UnmarshalMsg(msg); err != nil {
			return
		}
		f.ping <- p
		if reply := answer(p); reply != nil {
			_, _ = server.Write(reply)
			_ = server.Close()
			return
		}
		n, _ := io.Copy(io.Discard, server)
		f.extra <- int(n)
	}()
	return client, f
}

const (
	testKey      = "s3cr3t-shared-key"
	testPassword = "p4ssw0rd-of-alice"
)

func testCreds() *Credentials {
	return &Credentials{SharedKey: testKey, SelfHostname: "client.example", Username: "alice", Password: testPassword}
}

func runHandshake(t *testing.T, conn net.Conn, cr *Credentials) (bool, error) {
	t.Helper()
	_ = conn.SetDeadline(time.Now().Add(200 * time.Millisecond))
	keepalive, err := Handshake(conn, cr, "fake:24224")
	if err != nil {
		if !errors.Is(err, ErrHandshake) {
			t.Errorf("error %v does not wrap ErrHandshake", err)
		}
		if strings.Contains(err.Error(), testKey) || strings.Contains(err.Error(), testPassword) {
			t.Errorf("error reveals a secret: %v", err)
		}
	}
	return keepalive, err
}

func TestHandshakeProvesTheKeyAndChecksThePONG(t *testing.T) {
	nonce, auth := []byte("0123456789abcdef"), notUTF8
	goodPong := func(p Ping) []byte {
		return testkit.PONG(true, "", "receiver.example", hexSHA512(p.Salt, "receiver.example", string(nonce), testKey))
	}
	for _, asStr := range []bool{false, true} {
		conn, fr := startFakeReceiver(t, testkit.HELO(nonce, auth, asStr, "keepalive", false), goodPong)
		keepalive, err := runHandshake(t, conn, testCreds())
		if err != nil {
			t.Fatalf("str=%v: %v", asStr, err)
		}
		if keepalive {
			t.Error("HELO keepalive false not reported")
		}
		p := <-fr.ping
		if p.Type != "PING" || p.Hostname != "client.example" || len(p.Salt) != 32 || strings.Trim(p.Salt, "0123456789abcdef") != "" {
			t.Errorf("PING %+v", p)
		}
		if p.Digest != hexSHA512(p.Salt, "client.example", string(nonce), testKey) {
			t.Error("PING digest is not sha512(salt, hostname, nonce, key)")
		}
		if p.Username != "alice" || p.PasswordDigest != hexSHA512(string(auth), "alice", testPassword) {
			t.Errorf("user %q, password digest %q", p.Username, p.PasswordDigest)
		}
	}

	// Empty auth: the receiver does not authenticate users, so none is sent.
	conn, fr := startFakeReceiver(t, testkit.HELO(nonce, nil, false), goodPong)
	if _, err := runHandshake(t, conn, testCreds()); err != nil {
		t.Fatal(err)
	}
	if p := <-fr.ping; p.Username != "" || p.PasswordDigest != "" {
		t.Errorf("empty auth, yet user %q and digest %q sent", p.Username, p.PasswordDigest)
	}
}

func TestHandshakeFailures(t *testing.T) {
	nonce := []byte("0123456789abcdef")
	helo := testkit.HELO(nonce, nonce, false)
	digest := func(p Ping, host, key string) string { return hexSHA512(p.Salt, host, string(nonce), key) }
	cases := []struct {
		name   string
		helo   []byte
		answer func(p Ping) []byte
		want   string
	}{
		{"wrong PONG digest", helo, func(p Ping) []byte {
			return testkit.PONG(true, "", "r", digest(p, "r", "another key"))
		}, "digest does not match"},
		{"echoed PING digest", helo, func(p Ping) []byte {
			return testkit.PONG(true, "", p.Hostname, p.Digest)
		}, "equals SelfHostname"},
		{"rejected, reason echoes the secrets", helo, func(p Ping) []byte {
			return testkit.PONG(false, "bad key "+testKey+" or password "+testPassword, "", "")
		}, "rejected the credentials"},
		{"closed without PONG", helo, func(p Ping) []byte { return []byte{} }, "reading PONG"},
		{"PONG not an array", helo, func(p Ping) []byte { return msgp.AppendString(nil, "PONG") }, "malformed PONG"},
		{"PONG too long", helo, func(p Ping) []byte {
			return testkit.PONG(true, strings.Repeat("x", MaxHandshakeBytes), "r", digest(p, "r", testKey))
		}, "longer than"},
		{"bytes after PONG", helo, func(p Ping) []byte {
			return append(testkit.PONG(true, "", "r", digest(p, "r", testKey)), 0xc0)
		}, "unexpected data"},
		{"malformed HELO", msgp.AppendString(nil, "hello"), nil, "malformed HELO"},
		{"not msgpack", []byte{0xc1}, nil, "malformed msgpack"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			answer := c.answer
			if answer == nil {
				answer = func(Ping) []byte { return []byte{} }
			}
			conn, _ := startFakeReceiver(t, c.helo, func(p Ping) []byte {
				r := answer(p)
				if len(r) == 0 {
					return []byte{} // close without answering
				}
				return r
			})
			_, err := runHandshake(t, conn, testCreds())
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one mentioning %q", err, c.want)
			}
		})
	}
}

// The client sends nothing after its PING until PONG has come: a receiver that never
// answers gets no data, and the handshake ends at its deadline.
func TestHandshakeSendsNoDataBeforePONG(t *testing.T) {
	nonce := []byte("0123456789abcdef")
	conn, fr := startFakeReceiver(t, testkit.HELO(nonce, nil, false), func(Ping) []byte { return nil })
	start := time.Now()
	_, err := runHandshake(t, conn, testCreds())
	if err == nil || !errors.Is(err, ErrHandshake) || !strings.Contains(err.Error(), "reading PONG") {
		t.Fatalf("error %v, want a PONG timeout", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("handshake took %v, the deadline was 200ms", d)
	}
	_ = conn.Close() // what connect does after a failed handshake
	if n := <-fr.extra; n != 0 {
		t.Fatalf("client sent %d bytes before PONG", n)
	}
}

// The secrets are redacted where they stand as values in what the receiver sent, not where
// they are part of a longer word: a key "shared" leaves fluentd's "shared_key mismatch"
// as it is.
func TestRedactReplacesValuesNotSubstrings(t *testing.T) {
	cr := &Credentials{SharedKey: "shared", Password: "pw"}
	for in, want := range map[string]string{
		"shared_key mismatch":            "shared_key mismatch",
		"shared":                         "[redacted]",
		"bad key shared or password pw.": "bad key [redacted] or password [redacted].",
		"key=shared,password=pw":         "key=[redacted],password=[redacted]",
		`"shared"`:                       `"[redacted]"`,
		"unshared, pwned, shared-secret": "unshared, pwned, shared-secret",
		"the shared key is shared":       "the [redacted] key is [redacted]",
	} {
		if got := redact(in, cr); got != want {
			t.Errorf("redact(%q) = %q, want %q", in, got, want)
		}
	}
}

// A rejection's message keeps its own words whatever the key: with the key "shared", the
// reason fluentd gives and this package's own text read as written.
func TestHandshakeErrorKeepsItsWords(t *testing.T) {
	nonce := []byte("0123456789abcdef")
	conn, _ := startFakeReceiver(t, testkit.HELO(nonce, nil, false), func(Ping) []byte {
		return testkit.PONG(false, "shared_key mismatch", "", "")
	})
	cr := testCreds()
	cr.SharedKey = "shared"
	_, err := runHandshake(t, conn, cr)
	if err == nil || !strings.Contains(err.Error(), `"shared_key mismatch"`) {
		t.Fatalf("error %v, want fluentd's reason as it was sent", err)
	}
}
