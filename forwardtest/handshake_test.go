package forwardtest

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tinylib/msgp/msgp"
)

// readHELO reads the receiver's HELO and returns its nonce, auth, their msgpack type and
// the keepalive option (nil when absent).
func readHELO(t *testing.T, rd *msgp.Reader) (nonce, auth []byte, typ msgp.Type, keepalive *bool) {
	t.Helper()
	if n, err := rd.ReadArrayHeader(); err != nil || n != 2 {
		t.Fatalf("HELO array: %d, %v", n, err)
	}
	if s, err := rd.ReadString(); err != nil || s != "HELO" {
		t.Fatalf("HELO type %q, %v", s, err)
	}
	n, err := rd.ReadMapHeader()
	if err != nil {
		t.Fatal(err)
	}
	for range n {
		k, err := rd.ReadString()
		if err != nil {
			t.Fatal(err)
		}
		switch k {
		case "nonce", "auth":
			tp, err := rd.NextType()
			if err != nil {
				t.Fatal(err)
			}
			var b []byte
			if tp == msgp.BinType {
				b, err = rd.ReadBytes(nil)
			} else {
				b, err = rd.ReadStringAsBytes(nil)
			}
			if err != nil {
				t.Fatal(err)
			}
			typ = tp
			if k == "nonce" {
				nonce = b
			} else {
				auth = b
			}
		case "keepalive":
			v, err := rd.ReadBool()
			if err != nil {
				t.Fatal(err)
			}
			keepalive = &v
		default:
			t.Fatalf("unexpected HELO key %q", k)
		}
	}
	return nonce, auth, typ, keepalive
}

// pingFor encodes the PING a correct client sends.
func pingFor(nonce, auth []byte, host, key, user, password string) []byte {
	const salt = "0123456789abcdef0123456789abcdef"
	return arr(str("PING"), str(host), str(salt), str(hexSHA512(salt, host, string(nonce), key)),
		str(user), str(hexSHA512(string(auth), user, password)))
}

// readPONG reads a PONG.
func readPONG(t *testing.T, rd *msgp.Reader) (ok bool, reason, host, digest string) {
	t.Helper()
	if n, err := rd.ReadArrayHeader(); err != nil || n != 5 {
		t.Fatalf("PONG array: %d, %v", n, err)
	}
	var err error
	var typ string
	if typ, err = rd.ReadString(); err != nil || typ != "PONG" {
		t.Fatalf("PONG type %q, %v", typ, err)
	}
	if ok, err = rd.ReadBool(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*string{&reason, &host, &digest} {
		if *p, err = rd.ReadString(); err != nil {
			t.Fatal(err)
		}
	}
	return ok, reason, host, digest
}

// handshakeConn dials r and reads its HELO, with a read deadline.
func handshakeConn(t *testing.T, r *Receiver) (net.Conn, *msgp.Reader) {
	t.Helper()
	c := dial(t, r.Addr())
	if err := c.SetReadDeadline(time.Now().Add(waitTimeout)); err != nil {
		t.Fatal(err)
	}
	return c, msgp.NewReader(c)
}

const salt = "0123456789abcdef0123456789abcdef"

func TestHandshakeBothHELOForms(t *testing.T) {
	for _, heloStr := range []bool{false, true} {
		opts := []Option{WithSharedKey("k"), WithHostname("recv")}
		if heloStr {
			opts = append(opts, WithHELOStr())
		}
		r := NewReceiver(t, opts...)
		c, rd := handshakeConn(t, r)
		nonce, auth, typ, keepalive := readHELO(t, rd)
		if len(nonce) != 16 || len(auth) != 16 {
			t.Fatalf("nonce %d bytes, auth %d bytes; want 16 each", len(nonce), len(auth))
		}
		switch {
		case heloStr && (typ != msgp.StrType || keepalive != nil):
			t.Fatalf("fluent-bit form: %v nonce, keepalive %v; want str and none", typ, keepalive)
		case !heloStr && (typ != msgp.BinType || keepalive == nil || !*keepalive):
			t.Fatalf("fluentd form: %v nonce, keepalive %v; want bin and true", typ, keepalive)
		}
		send(t, c, pingFor(nonce, auth, "client", "k", "", ""))
		ok, reason, host, digest := readPONG(t, rd)
		if !ok || reason != "" || host != "recv" || digest != hexSHA512(salt, "recv", string(nonce), "k") {
			t.Fatalf("PONG %v %q %q %q", ok, reason, host, digest)
		}
		send(t, c, req("t", bin(entry(et(1, 0), m("k", "v")))))
		if _, err := r.WaitForEntries(1, waitTimeout); err != nil {
			t.Fatal(err)
		}
		if s := r.Stats(); s.Handshakes != 1 || s.HandshakeFailures != 0 {
			t.Fatalf("stats %+v", s)
		}
	}
}

func TestHandshakeRejections(t *testing.T) {
	users := map[string]string{"alice": "pw"}
	cases := []struct {
		name  string
		users map[string]string
		first func(nonce, auth []byte) []byte
		want  string // "" means accepted
	}{
		{"wrong key", nil, func(n, a []byte) []byte { return pingFor(n, a, "c", "other", "", "") }, "shared_key mismatch"},
		{"data before PING", nil, func(n, a []byte) []byte { return req("t", bin(entry(et(1, 0), m("k", "v")))) }, "invalid ping message"},
		{"unknown user", users, func(n, a []byte) []byte { return pingFor(n, a, "c", "k", "bob", "pw") }, "username/password mismatch"},
		{"wrong password", users, func(n, a []byte) []byte { return pingFor(n, a, "c", "k", "alice", "nope") }, "username/password mismatch"},
		{"right user", users, func(n, a []byte) []byte { return pingFor(n, a, "c", "k", "alice", "pw") }, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := NewReceiver(t, WithSharedKey("k"), WithUsers(tc.users))
			c, rd := handshakeConn(t, r)
			nonce, auth, _, _ := readHELO(t, rd)
			send(t, c, tc.first(nonce, auth))
			ok, reason, _, _ := readPONG(t, rd)
			if tc.want == "" {
				if !ok {
					t.Fatalf("rejected: %q", reason)
				}
				return
			}
			if ok || reason != tc.want {
				t.Fatalf("PONG %v %q, want false %q", ok, reason, tc.want)
			}
			expectClosed(t, c)
			if s := r.Stats(); s.HandshakeFailures != 1 || s.Handshakes != 0 || s.Violations != 0 {
				t.Fatalf("stats %+v", s)
			}
		})
	}
}

// A PING fluent-bit would reject is a violation: the connection is closed without PONG.
func TestPingViolations(t *testing.T) {
	cases := map[string]func(nonce []byte) []byte{
		"bin salt": func(n []byte) []byte {
			return arr(str("PING"), str("c"), bin([]byte(salt)), str(hexSHA512(salt, "c", string(n), "k")), str(""), str(""))
		},
		"five elements": func(n []byte) []byte { return arr(str("PING"), str("c"), str(salt), str("d"), str("")) },
		"over 1024 bytes": func(n []byte) []byte {
			return arr(str("PING"), str(strings.Repeat("h", 1100)), str(salt), str("d"), str(""), str(""))
		},
	}
	for name, ping := range cases {
		t.Run(name, func(t *testing.T) {
			r := NewReceiver(t, WithSharedKey("k"), AllowViolations())
			c, rd := handshakeConn(t, r)
			nonce, _, _, _ := readHELO(t, rd)
			send(t, c, ping(nonce))
			expectClosed(t, c)
			if v := r.Violations(); len(v) != 1 || !strings.Contains(v[0].Error(), "PING") {
				t.Fatalf("violations %v", v)
			}
		})
	}
}

func TestPongFaults(t *testing.T) {
	r := NewReceiver(t, WithSharedKey("k"), WithHostname("recv"))
	try := func() (c net.Conn, rd *msgp.Reader, nonce []byte) {
		c, rd = handshakeConn(t, r)
		nonce, auth, _, _ := readHELO(t, rd)
		send(t, c, pingFor(nonce, auth, "client", "k", "", ""))
		return c, rd, nonce
	}

	r.SetPongFault(PongWrongDigest)
	_, rd, nonce := try()
	if ok, _, host, digest := readPONG(t, rd); !ok || host != "recv" || digest == hexSHA512(salt, "recv", string(nonce), "k") {
		t.Fatalf("PongWrongDigest: %v %q, digest right: %v", ok, host, digest == hexSHA512(salt, "recv", string(nonce), "k"))
	}

	r.SetPongFault(PongAuthFailed)
	c, rd, _ := try()
	if ok, reason, _, _ := readPONG(t, rd); ok || reason == "" {
		t.Fatalf("PongAuthFailed: %v %q", ok, reason)
	}
	expectClosed(t, c)

	r.SetPongFault(PongNone)
	c, _, _ = try()
	expectClosed(t, c)

	r.SetPongFault(PongOK)
	_, rd, nonce = try()
	if ok, _, _, digest := readPONG(t, rd); !ok || digest != hexSHA512(salt, "recv", string(nonce), "k") {
		t.Fatal("healed receiver sent a bad PONG")
	}
	if s := r.Stats(); s.Handshakes != 4 || s.HandshakeFailures != 0 {
		t.Fatalf("stats %+v", s)
	}
	if PongNone.String() != "PongNone" || PongFault(9).String() != "PongFault(9)" {
		t.Fatal("PongFault.String")
	}
}

func TestDenyKeepalive(t *testing.T) {
	request := req("t", bin(entry(et(1, 0), m("k", "v"))), m("chunk", "c1"))
	t.Run("with handshake", func(t *testing.T) {
		r := NewReceiver(t, WithSharedKey("k"), DenyKeepalive())
		c, rd := handshakeConn(t, r)
		nonce, auth, _, keepalive := readHELO(t, rd)
		if keepalive == nil || *keepalive {
			t.Fatalf("HELO keepalive %v, want false", keepalive)
		}
		send(t, c, pingFor(nonce, auth, "client", "k", "", ""))
		readPONG(t, rd)
		send(t, c, request)
		if got := readAck(t, rd); got != "c1" {
			t.Fatalf("ack %q", got)
		}
		expectClosed(t, c)
	})
	t.Run("plain", func(t *testing.T) {
		r := NewReceiver(t, DenyKeepalive())
		c := dial(t, r.Addr())
		rd := msgp.NewReader(c)
		send(t, c, request)
		if err := c.SetReadDeadline(time.Now().Add(waitTimeout)); err != nil {
			t.Fatal(err)
		}
		if got := readAck(t, rd); got != "c1" {
			t.Fatalf("ack %q", got)
		}
		expectClosed(t, c)
	})
}

func tlsDial(t *testing.T, r *Receiver, cfg *tls.Config) (*tls.Conn, error) {
	t.Helper()
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: waitTimeout}, Config: cfg}
	c, err := d.Dial("tcp", strings.TrimPrefix(r.Addr(), "tls://"))
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = c.Close() })
	return c.(*tls.Conn), nil
}

func TestTLSReceiver(t *testing.T) {
	cert, err := NewTLSCert()
	if err != nil {
		t.Fatal(err)
	}
	r := NewReceiver(t, WithTLS(cert.ServerConfig()))
	if !strings.HasPrefix(r.Addr(), "tls://127.0.0.1:") {
		t.Fatalf("Addr %q", r.Addr())
	}
	c, err := tlsDial(t, r, cert.ClientConfig())
	if err != nil {
		t.Fatal(err)
	}
	if v := c.ConnectionState().Version; v != tls.VersionTLS13 {
		t.Errorf("negotiated %x, want TLS 1.3 by default", v)
	}
	send(t, c, req("t", bin(entry(et(1, 0), m("k", "v")))))
	if _, err := r.WaitForEntries(1, waitTimeout); err != nil {
		t.Fatal(err)
	}
	if _, err := tlsDial(t, r, &tls.Config{MinVersion: tls.VersionTLS12}); err == nil {
		t.Fatal("a client without the CA verified the receiver")
	}

	r12 := NewReceiver(t, WithTLS(cert.ServerConfig()), WithTLS12Only(), WithLogf(nil))
	c, err = tlsDial(t, r12, cert.ClientConfig())
	if err != nil {
		t.Fatal(err)
	}
	if v := c.ConnectionState().Version; v != tls.VersionTLS12 {
		t.Errorf("WithTLS12Only negotiated %x", v)
	}
	only13 := cert.ClientConfig()
	only13.MinVersion = tls.VersionTLS13
	if _, err := tlsDial(t, r12, only13); err == nil {
		t.Fatal("a TLS 1.3-only client connected to WithTLS12Only")
	}

	if _, err := Start(WithAddr("unix://"+t.TempDir()+"/s"), WithTLS(cert.ServerConfig())); err == nil {
		t.Fatal("TLS on a unix socket accepted")
	}
}

func TestTLSCertFiles(t *testing.T) {
	cert, err := NewTLSCert("fluentd.test", "10.1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	files, err := cert.WriteFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tls.LoadX509KeyPair(files.ServerCert, files.ServerKey); err != nil {
		t.Fatal(err)
	}
	if _, err := tls.LoadX509KeyPair(files.ClientCert, files.ClientKey); err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(files.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatal("CA file does not parse")
	}
	leaf, err := x509.ParseCertificate(cert.Server.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"fluentd.test", "10.1.2.3"} {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: host, Roots: pool}); err != nil {
			t.Errorf("server certificate for %s: %v", host, err)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: "localhost", Roots: pool}); err == nil {
		t.Error("server certificate valid for a host it was not made for")
	}
	if fi, err := os.Stat(files.ServerKey); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v, %v", fi.Mode(), err)
	}
}

func TestAckFaults(t *testing.T) {
	r := NewReceiver(t)
	c := dial(t, r.Addr())
	rd := msgp.NewReader(c)
	request := func(chunk string) []byte { return req("t", bin(entry(et(1, 0), m("k", "v"))), m("chunk", chunk)) }

	r.SetAckFault(AckWithhold)
	send(t, c, request("a"))
	if err := r.WaitFor(func(s Stats) bool { return s.FaultedAcks == 1 && s.Entries == 1 }, waitTimeout); err != nil {
		t.Fatal(err)
	}
	if err := c.SetReadDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := rd.NextType(); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("withheld ack: read returned %v", err)
	}

	c = dial(t, r.Addr()) // the timed-out reader is unusable
	rd = msgp.NewReader(c)
	if err := c.SetReadDeadline(time.Now().Add(waitTimeout)); err != nil {
		t.Fatal(err)
	}
	r.SetAckFault(AckWrongToken)
	send(t, c, request("b"))
	if got := readAck(t, rd); got != wrongToken {
		t.Fatalf("AckWrongToken sent %q", got)
	}
	r.SetAckFault(AckMalformed)
	send(t, c, request("c"))
	if b, err := rd.R.ReadByte(); err != nil || b != 0xc1 {
		t.Fatalf("AckMalformed sent 0x%02x, %v", b, err)
	}
	r.SetAckFault(AckTwice)
	send(t, c, request("e"))
	for i := range 2 {
		if got := readAck(t, rd); got != "e" {
			t.Fatalf("AckTwice's ack %d: %q", i, got)
		}
	}
	r.SetAckFault(AckOK)
	send(t, c, request("d"))
	if got := readAck(t, rd); got != "d" {
		t.Fatalf("healed ack %q", got)
	}
	// Acks is counted once the ack is written, so possibly after the client read it.
	if err := r.WaitFor(func(s Stats) bool { return s.Acks == 1 }, waitTimeout); err != nil {
		t.Fatal(err)
	}
	if s := r.Stats(); s.Entries != 5 || s.FaultedAcks != 4 {
		t.Fatalf("stats %+v", s)
	}
	if AckMalformed.String() != "AckMalformed" || AckTwice.String() != "AckTwice" || AckFault(7).String() != "AckFault(7)" {
		t.Fatal("AckFault.String")
	}
}

func TestCloseAfter(t *testing.T) {
	r := NewReceiver(t)
	request := req("t", bin(entry(et(1, 0), m("k", "v"))))
	r.SetCloseAfter(int64(len(request) + 5))
	c := dial(t, r.Addr())
	send(t, c, request, request)
	expectClosed(t, c)
	if err := r.WaitFor(func(s Stats) bool { return s.Truncated == 1 }, waitTimeout); err != nil {
		t.Fatal(err)
	}
	if s := r.Stats(); s.Entries != 1 || s.Frames != 1 {
		t.Fatalf("stats %+v: want the first request stored, the second cut", s)
	}
	r.SetCloseAfter(0)
	c = dial(t, r.Addr())
	send(t, c, request, request)
	if _, err := r.WaitForEntries(3, waitTimeout); err != nil {
		t.Fatal(err)
	}
}

func TestRefuse(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:0", "unix://" + t.TempDir() + "/r.sock"} {
		r := NewReceiver(t, WithAddr(addr))
		open := dial(t, r.Addr())
		// Accepted first: a connection still in the backlog dies with the listener.
		if err := r.WaitFor(func(s Stats) bool { return s.Connections == 1 }, waitTimeout); err != nil {
			t.Fatal(err)
		}
		if err := r.SetRefuse(true); err != nil {
			t.Fatal(err)
		}
		if err := r.SetRefuse(true); err != nil {
			t.Fatalf("second SetRefuse(true): %v", err)
		}
		network, address := "tcp", strings.TrimPrefix(r.Addr(), "tcp://")
		if strings.HasPrefix(r.Addr(), "unix://") {
			network, address = "unix", strings.TrimPrefix(r.Addr(), "unix://")
		}
		if c, err := net.DialTimeout(network, address, waitTimeout); err == nil {
			_ = c.Close()
			t.Fatalf("%s: connected while refusing", addr)
		}
		// Open connections carry on.
		send(t, open, req("t", bin(entry(et(1, 0), m("k", "v")))))
		if _, err := r.WaitForEntries(1, waitTimeout); err != nil {
			t.Fatal(err)
		}
		if err := r.SetRefuse(false); err != nil {
			t.Fatal(err)
		}
		send(t, dial(t, r.Addr()), req("t", bin(entry(et(1, 0), m("k", "v")))))
		if _, err := r.WaitForEntries(2, waitTimeout); err != nil {
			t.Fatal(err)
		}
		if err := r.SetRefuse(true); err != nil {
			t.Fatal(err)
		}
		if err := r.Close(); err != nil {
			t.Fatalf("Close while refusing: %v", err)
		}
	}
}

func TestCloseConnections(t *testing.T) {
	r := NewReceiver(t)
	c := dial(t, r.Addr())
	if err := r.WaitFor(func(s Stats) bool { return s.Connections == 1 }, waitTimeout); err != nil {
		t.Fatal(err)
	}
	r.CloseConnections()
	expectClosed(t, c)
	send(t, dial(t, r.Addr()), req("t", bin(entry(et(1, 0), m("k", "v")))))
	if _, err := r.WaitForEntries(1, waitTimeout); err != nil {
		t.Fatal(err)
	}
}
