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

// Fuzz targets for what the client reads from a receiver: HELO, PONG and acks. Each must
// never panic, never allocate more than a small bound whatever sizes the bytes claim,
// always fail with an error that says what went wrong (and holds no secret), and accept
// every message fluentd and fluent-bit send, however the bytes are split across reads.
// Seed corpora are in testdata/fuzz/; `make fuzz-smoke` runs each target briefly.

// scriptConn is a net.Conn whose peer is a script: Read hands out in at most chunk bytes
// at a time, then io.EOF; Write keeps what the client sent, and reply, if set, appends the
// peer's answer to in. Deadlines are accepted and ignored: the script never blocks.
type scriptConn struct {
	in    []byte
	chunk int
	out   []byte
	reply func(written []byte) []byte
}

func (c *scriptConn) Read(p []byte) (int, error) {
	if len(c.in) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), c.chunk, len(c.in))
	copy(p, c.in[:n])
	c.in = c.in[n:]
	return n, nil
}

func (c *scriptConn) Write(p []byte) (int, error) {
	c.out = append(c.out, p...)
	if c.reply != nil {
		c.in = append(c.in, c.reply(p)...)
	}
	return len(p), nil
}

func (c *scriptConn) Close() error                     { return nil }
func (c *scriptConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *scriptConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *scriptConn) SetDeadline(time.Time) error      { return nil }
func (c *scriptConn) SetReadDeadline(time.Time) error  { return nil }
func (c *scriptConn) SetWriteDeadline(time.Time) error { return nil }

// checkAllocBound fails if more than 1 MiB (plus twice the input) was allocated since
// start: a peer that claims a GiB must not get it.
func checkAllocBound(t *testing.T, start uint64, input int) {
	t.Helper()
	if grown := testkit.HeapAllocated() - start; grown > 1<<20+2*uint64(input) {
		t.Fatalf("allocated %d bytes for %d input bytes", grown, input)
	}
}

// checkHandshakeError fails unless err is a handshake error without secrets.
func checkHandshakeError(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, ErrHandshake) {
		t.Fatalf("handshake: %v; want an error wrapping ErrHandshake", err)
	}
	if strings.Contains(err.Error(), testKey) || strings.Contains(err.Error(), testPassword) {
		t.Fatalf("error reveals a secret: %v", err)
	}
}

func fuzzChunk(chunk uint8) int { return int(chunk%64) + 1 }

// fuzzNonce and fuzzAuth are the HELO FuzzParsePONG's receiver sends.
var fuzzNonce, fuzzAuth = []byte("0123456789abcdef"), notUTF8

func FuzzParseHELO(f *testing.F) {
	nonce := []byte("0123456789abcdef")
	f.Add(testkit.HELO(nonce, nonce, false, "keepalive", true), uint8(63)) // fluentd
	f.Add(testkit.HELO(notUTF8, notUTF8, true), uint8(0))                  // fluent-bit
	f.Add(testkit.HELO(nonce, nil, false, "keepalive", false), uint8(3))
	f.Add(testkit.HELO(nonce, nonce, false, "future", []any{1, "x"}, 7, "int key"), uint8(5))
	f.Add(append(msgp.AppendString(msgp.AppendArrayHeader(nil, 2), "HELO"), 0x81, 0xa5, 'n', 'o', 'n', 'c', 'e', 0xc6, 0x40, 0, 0, 0), uint8(1))
	f.Add([]byte{0xdd, 0xff, 0xff, 0xff, 0xff}, uint8(2))
	f.Add([]byte{0xc1}, uint8(0))
	f.Add([]byte{}, uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, chunk uint8) {
		start := testkit.HeapAllocated()
		if h, err := decodeHELO(data); err == nil {
			if len(h.nonce) == 0 || len(h.nonce)+len(h.auth) > len(data) {
				t.Fatalf("accepted a HELO with nonce %q and auth %q from %d bytes", h.nonce, h.auth, len(data))
			}
		} else if !strings.HasPrefix(err.Error(), "malformed HELO") {
			t.Fatalf("decodeHELO: %v", err)
		}
		// The whole handshake with data as the receiver's HELO: it fails (no PONG ever
		// comes), with a handshake error, whatever the bytes.
		_, err := Handshake(&scriptConn{in: data, chunk: fuzzChunk(chunk)}, testCreds(), "fuzz:24224")
		checkHandshakeError(t, err)
		checkAllocBound(t, start, len(data))

		// Every HELO fluentd or fluent-bit would send with these bytes as nonce and auth is
		// read whole and decoded to the same bytes, however it is split across reads.
		if len(data) == 0 || len(data) > 400 {
			return
		}
		k := 1 + int(chunk)%len(data)
		nonce, auth := data[:k], data[k:]
		for _, form := range []struct {
			asStr     bool
			extra     []any
			keepalive bool
		}{
			{false, []any{"keepalive", true}, true},   // fluentd
			{false, []any{"keepalive", false}, false}, // fluentd, deny_keepalive
			{true, nil, true},                         // fluent-bit
		} {
			msg := testkit.HELO(nonce, auth, form.asStr, form.extra...)
			var buf [MaxHandshakeBytes]byte
			got, err := ReadMessage(&scriptConn{in: msg, chunk: fuzzChunk(chunk)}, buf[:])
			if err != nil {
				t.Fatalf("reading a valid HELO: %v", err)
			}
			h, err := decodeHELO(got)
			if err != nil || !bytes.Equal(h.nonce, nonce) || !bytes.Equal(h.auth, auth) || h.keepalive != form.keepalive {
				t.Fatalf("valid HELO (str %v) decoded as %+v, %v", form.asStr, h, err)
			}
		}
	})
}

func FuzzParsePONG(f *testing.F) {
	f.Add(testkit.PONG(true, "", "fluentd.example", strings.Repeat("a", 128)), "fluentd.example", uint8(63))
	f.Add(testkit.PONG(false, "shared_key mismatch", "", ""), "fluent-bit", uint8(0))
	f.Add(testkit.PONG(false, "username/password mismatch", "", ""), "localhost", uint8(7))
	f.Add(append(msgp.AppendString(msgp.AppendArrayHeader(nil, 5), "PONG"), 0xc3, 0xdb, 0x40, 0, 0, 0), "h", uint8(1))
	f.Add(msgp.AppendString(nil, "PONG"), "client.example", uint8(2)) // the client's own name
	f.Add([]byte{0xdd, 0xff, 0xff, 0xff, 0xff}, "", uint8(3))
	f.Add([]byte{}, "\xff\xfe", uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, hostname string, chunk uint8) {
		start := testkit.HeapAllocated()
		// A receiver with a valid HELO that answers the PING with data: data cannot prove
		// the key (it cannot know the salt), so the handshake fails, with an error.
		c := &scriptConn{in: testkit.HELO(fuzzNonce, fuzzAuth, false, "keepalive", true), chunk: fuzzChunk(chunk),
			reply: func([]byte) []byte { return data }}
		_, err := Handshake(c, testCreds(), "fuzz:24224")
		checkHandshakeError(t, err)
		checkAllocBound(t, start, len(data))

		// A valid PONG — fluentd's or fluent-bit's, any receiver hostname up to 255 bytes —
		// is accepted, unless the hostname is the client's own (fluentd's rule).
		host := hostname[:min(len(hostname), 255)]
		for _, asStr := range []bool{false, true} {
			c := &scriptConn{in: testkit.HELO(fuzzNonce, fuzzAuth, asStr), chunk: fuzzChunk(chunk),
				reply: func(p []byte) []byte {
					var ping Ping
					if _, err := ping.UnmarshalMsg(p); err != nil {
						t.Fatalf("the client's PING: %v", err)
					}
					return testkit.PONG(true, "", host, hexSHA512(ping.Salt, host, string(fuzzNonce), testKey))
				}}
			_, err := Handshake(c, testCreds(), "fuzz:24224")
			switch {
			case host == testCreds().SelfHostname:
				if err == nil || !strings.Contains(err.Error(), "equals SelfHostname") {
					t.Fatalf("PONG with the client's own hostname: %v", err)
				}
			case err != nil:
				t.Fatalf("valid PONG from %q (HELO str %v): %v", host, asStr, err)
			}
		}
	})
}

func FuzzParseAck(f *testing.F) {
	ack := func(token string) []byte {
		return msgp.AppendString(msgp.AppendString(msgp.AppendMapHeader(nil, 1), "ack"), token)
	}
	f.Add(ack("p8n9gmxTQVC8/nh2wlKKeQ==\n"), "p8n9gmxTQVC8/nh2wlKKeQ==\n", uint8(63)) // fluentd's token
	f.Add(ack("aGVsbG8gd29ybGQgaGVsbG8h"), "aGVsbG8gd29ybGQgaGVsbG8h", uint8(0))      // fluent-bit's
	f.Add(append(ack("a"), ack("b")...), "", uint8(5))
	f.Add(append(msgp.AppendString(msgp.AppendMapHeader(nil, 1), "ack"), 0xdb, 0x40, 0, 0, 0), "x", uint8(1))
	f.Add([]byte{0xdf, 0xff, 0xff, 0xff, 0xff}, "\xff", uint8(2))
	f.Add(msgp.AppendString(msgp.AppendArrayHeader(nil, 2), "HELO"), "", uint8(3))
	f.Add([]byte{0xc1}, "", uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, token string, chunk uint8) {
		// read runs a reader over in until it fails, as the sender's reader goroutine does,
		// and returns the acks it delivered and the error that ended it.
		read := func(in []byte) ([]string, error) {
			sc := &scriptConn{in: in, chunk: fuzzChunk(chunk)}
			r := NewAckReader(true)
			var acks []string
			for {
				tok, err := r.Next(sc) // returns at the script's end, or at the first error
				if err != nil {
					return acks, err
				}
				acks = append(acks, tok)
			}
		}
		start := testkit.HeapAllocated()
		if _, err := read(data); err == nil {
			t.Fatal("the reader ended without saying why")
		}
		checkAllocBound(t, start, len(data))

		// The ack fluentd or fluent-bit sends, {"ack": token} with the token as str, is
		// delivered to the waiting sender, however it is split across reads.
		tok := token[:min(len(token), 400)]
		acks, err := read(ack(tok))
		if !errors.Is(err, io.EOF) {
			t.Fatalf("a valid ack ended the connection: %v", err)
		}
		if len(acks) != 1 || acks[0] != tok {
			t.Fatalf("valid ack %q read as %q", tok, acks)
		}
	})
}
