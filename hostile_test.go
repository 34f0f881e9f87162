package fluentcore

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"io"
	"net"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore/forwardtest"
	"github.com/fluentcore/fluentcore/internal/forward"
	"github.com/fluentcore/fluentcore/internal/testkit"
	"github.com/fluentcore/fluentcore/internal/wire"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/tinylib/msgp/msgp"
	"go.uber.org/zap"
)

// Hostile receivers: whatever a receiver sends, the client reads at most a small, fixed
// amount (HELO and PONG: 1024 bytes, an ack: 512) and never waits past a deadline. These
// fakes speak raw TCP on purpose: the point is bytes no real receiver sends.

// hostileServer accepts loopback connections and runs serve on each until the test ends.
func hostileServer(t *testing.T, serve func(c net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				serve(c)
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return "tcp://" + ln.Addr().String()
}

// flood writes prefix, then filler (or, with every > 0, one filler byte per interval)
// until the client closes the connection; it reads and discards what the client sends.
func flood(c net.Conn, prefix []byte, every time.Duration) {
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		_, _ = io.Copy(io.Discard, c)
	}()
	defer func() {
		_ = c.Close()
		<-drained
	}()
	_ = c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(prefix); err != nil {
		return
	}
	fill := bytes.Repeat([]byte{'x'}, 4096)
	if every > 0 {
		fill = fill[:1]
	}
	for {
		if _, err := c.Write(fill); err != nil {
			return
		}
		if every > 0 {
			time.Sleep(every)
		}
	}
}

// validHELO is fluentd's HELO: bin nonce and auth, keepalive true.
func validHELO() []byte {
	return testkit.HELO([]byte("0123456789abcdef"), []byte("fedcba9876543210"), false, "keepalive", true)
}

// afterPING sends a valid HELO, reads the client's PING, then floods.
func afterPING(prefix []byte, every time.Duration) func(c net.Conn) {
	return func(c net.Conn) {
		if _, err := c.Write(validHELO()); err != nil {
			return
		}
		var buf [wire.MaxHandshakeBytes]byte
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := wire.ReadMessage(c, buf[:]); err != nil {
			return
		}
		flood(c, prefix, every)
	}
}

const gib = 1 << 30

func TestHostileReceiverCannotMakeTheClientAllocateOrHang(t *testing.T) {
	str32 := func(n uint32) []byte { return []byte{0xdb, byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)} }
	heloGiB := append(msgp.AppendString(msgp.AppendArrayHeader(nil, 2), "HELO"), 0x81)
	heloGiB = msgp.AppendString(heloGiB, "nonce")
	heloGiB = msgp.AppendBytesHeader(heloGiB, gib) // a 1 GiB bin nonce
	pongGiB := msgp.AppendString(msgp.AppendArrayHeader(nil, 5), "PONG")
	pongGiB = msgp.AppendBool(pongGiB, true)
	pongGiB = append(pongGiB, str32(gib)...) // a 1 GiB reason
	ackGiB := msgp.AppendString(msgp.AppendMapHeader(nil, 1), "ack")
	ackGiB = append(ackGiB, str32(gib)...) // a 1 GiB token
	var otherAcks []byte
	for range 200 {
		otherAcks = msgp.AppendString(msgp.AppendString(msgp.AppendMapHeader(otherAcks, 1), "ack"), "not-your-chunk-not-your-chu")
	}

	const timeout = 300 * time.Millisecond
	cases := []struct {
		name      string
		handshake bool
		ack       bool
		serve     func(c net.Conn)
		want      string
	}{
		{"HELO with a 1 GiB nonce, then bytes forever", true, false,
			func(c net.Conn) { flood(c, heloGiB, 0) }, "longer than 1024 bytes"},
		{"HELO one byte at a time, never complete", true, false,
			func(c net.Conn) { flood(c, heloGiB, 10*time.Millisecond) }, "i/o timeout"},
		{"HELO as an array of 4 billion elements", true, false,
			func(c net.Conn) { flood(c, []byte{0xdd, 0xff, 0xff, 0xff, 0xff}, 0) }, "longer than 1024 bytes"},
		{"PONG with a 1 GiB reason, then bytes forever", true, false,
			afterPING(pongGiB, 0), "reading PONG: message longer than 1024 bytes"},
		{"PONG one byte at a time, never complete", true, false,
			afterPING(pongGiB, 10*time.Millisecond), "i/o timeout"},
		{"ack with a 1 GiB token, then bytes forever", false, true,
			func(c net.Conn) { flood(c, ackGiB, 0) }, "ack longer than 512 bytes"},
		{"ack one byte at a time, never complete", false, true,
			func(c net.Conn) { flood(c, ackGiB, 10*time.Millisecond) }, "no ack from"},
		// The flood starts before the client writes: it sees a foreign ack, or, if the
		// reader got past the acks first, the garbage after them. Either is a clear error.
		{"acks for other chunks, forever", false, true,
			func(c net.Conn) { flood(c, otherAcks, 0) }, "does not match|malformed ack|more acks than"},
		{"ack with a map of 4 billion keys", false, true,
			func(c net.Conn) { flood(c, []byte{0xdf, 0xff, 0xff, 0xff, 0xff}, 0) }, "ack"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Addr: hostileServer(t, tc.serve), Info: InfoConfig{Acks: acksIf(tc.ack)},
				Timeouts: TimeoutsConfig{Dial: timeout, Handshake: timeout, Write: timeout, Ack: timeout}}
			if tc.handshake {
				cfg.Security.SharedKey, cfg.Security.SelfHostname = NewSecret("k"), "client.test"
			}
			f := newForwarder(settingsFor(cfg).connFor(infoStream))
			defer f.Close()
			entries := testkit.Entries(1, "x")
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			start := time.Now()
			_, _, err := f.Send(context.Background(), "t", entries, 1)
			d := time.Since(start)
			runtime.ReadMemStats(&after)
			if err == nil || !slices.ContainsFunc(strings.Split(tc.want, "|"), func(w string) bool { return strings.Contains(err.Error(), w) }) {
				t.Fatalf("send: %v; want an error mentioning %q", err, tc.want)
			}
			// Functional bounds with slack, not performance figures: the peer claimed a
			// GiB, or would never stop.
			if d > timeout+2*time.Second {
				t.Errorf("send took %v; every step is bounded by %v", d, timeout)
			}
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 256<<10 {
				t.Errorf("send allocated %d bytes", alloc)
			}
		})
	}
}

// No secret — the shared key, the password, the client's TLS private key — ever appears in
// what the client says about failures: Sync's and Close's errors, OnEvent's errors, the
// metrics, Spill.Fallback's lines.
func TestNoSecretInErrorsMetricsOrFallback(t *testing.T) {
	const key, password = "sk-9f2c61d0e4b7a3", "pw-5e8a1c3f7d92b6"
	cert, err := forwardtest.NewTLSCert()
	if err != nil {
		t.Fatal(err)
	}
	other, err := forwardtest.NewTLSCert()
	if err != nil {
		t.Fatal(err)
	}
	priv := cert.Client.PrivateKey.(*ecdsa.PrivateKey)
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	scalar, err := priv.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	secrets := map[string]string{
		"shared key": key, "password": password,
		"key PEM": string(cert.ClientKeyPEM), "key DER, base64": base64.StdEncoding.EncodeToString(der),
		"private scalar, hex": hex.EncodeToString(scalar), "private scalar, base64": base64.StdEncoding.EncodeToString(scalar),
	}
	for _, line := range strings.Split(string(cert.ClientKeyPEM), "\n") {
		if len(line) >= 16 && !strings.HasPrefix(line, "-----") {
			secrets["key PEM line"] = line
		}
	}

	mutual := cert.ServerConfig()
	mutual.ClientAuth, mutual.ClientCAs = tls.RequireAndVerifyClientCert, other.CAPool // rejects our client certificate
	withClientCert := cert.ClientConfig()
	withClientCert.Certificates = []tls.Certificate{cert.Client}
	strangerCA := other.ClientConfig() // does not trust the receiver's certificate
	strangerCA.Certificates = []tls.Certificate{cert.Client}
	echo := func(c net.Conn) { // a receiver that puts the secrets in its PONG reason
		if _, err := c.Write(validHELO()); err != nil {
			return
		}
		var buf [wire.MaxHandshakeBytes]byte
		if _, err := wire.ReadMessage(c, buf[:]); err != nil {
			return
		}
		_, _ = c.Write(testkit.PONG(false, "no: "+key+" / "+password, "", ""))
	}

	cases := []struct {
		name  string
		opts  []forwardtest.Option
		raw   func(c net.Conn)
		tls   *tls.Config
		spill bool
		want  string // evidence that the failure was reported at all
	}{
		{"wrong shared key", []forwardtest.Option{forwardtest.WithSharedKey("another-key")}, nil, nil, false, "shared_key mismatch"},
		{"wrong password", []forwardtest.Option{forwardtest.WithSharedKey(key), forwardtest.WithUsers(map[string]string{"alice": "x"})}, nil, nil, true, "username/password mismatch"},
		{"PONG reason echoes the secrets", nil, echo, nil, false, "rejected the credentials"},
		{"impostor PONG", []forwardtest.Option{forwardtest.WithSharedKey("k2")}, nil, nil, true, "handshake failed"},
		{"client certificate rejected", []forwardtest.Option{forwardtest.WithTLS(mutual), forwardtest.WithSharedKey(key)}, nil, withClientCert, false, "certificate"},
		{"receiver certificate unknown", []forwardtest.Option{forwardtest.WithTLS(cert.ServerConfig()), forwardtest.WithSharedKey(key)}, nil, strangerCA, true, "certificate"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var addr string
			if tc.raw != nil {
				addr = hostileServer(t, tc.raw)
			} else {
				r := forwardtest.NewReceiver(t, append([]forwardtest.Option{forwardtest.WithLogf(nil)}, tc.opts...)...)
				if tc.name == "impostor PONG" {
					r.SetPongFault(forwardtest.PongWrongDigest)
				}
				addr = r.Addr()
			}
			fb := new(fallbackLog)
			var ev eventLog
			reg := prometheus.NewRegistry()
			cfg := fastRetry(Config{
				Addr:      addr,
				Security:  SecurityConfig{SharedKey: NewSecret(key), SelfHostname: "client.test", Username: "alice", Password: NewSecret(password), TLS: tc.tls},
				Info:      InfoConfig{Acks: AcksOn},
				Timeouts:  TimeoutsConfig{Ack: 200 * time.Millisecond, Sync: 200 * time.Millisecond, Close: 200 * time.Millisecond, Dial: time.Second},
				Metrics:   MetricsConfig{Registerer: reg},
				Spill:     SpillConfig{Fallback: fb},
				OnEvent:   ev.add,
				Transport: TransportConfig{RetryMax: 20 * time.Millisecond},
			})
			if tc.name == "impostor PONG" {
				cfg.Security.SharedKey = NewSecret("k2")
			}
			if tc.spill {
				cfg.Spill.Dir, cfg.Spill.After = t.TempDir(), 10*time.Millisecond
			}
			core := New(cfg)
			logger := zap.New(core)
			for i := range 20 {
				logger.Info("hello", zap.Int("i", i))
				logger.Error("failed", zap.Int("i", i))
			}
			waitUntil(t, "failed sends", func() bool { return core.Stats().Err.SendErrors >= 3 })
			var said strings.Builder
			if err := core.Sync(); err != nil {
				said.WriteString(err.Error() + "\n")
			}
			for _, f := range []*forward.Forwarder{sinkOf(core).streams[infoStream].Senders[0].Forwarder(), sinkOf(core).streams[errStream].Senders[0].Forwarder()} {
				if err := f.Status().LastError(); err != nil {
					said.WriteString(err.Error() + "\n")
				}
			}
			mfs, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			for _, mf := range mfs {
				said.WriteString(mf.String() + "\n")
			}
			if err := core.Close(); err != nil {
				said.WriteString(err.Error() + "\n")
			}
			ev.mu.Lock()
			for _, e := range ev.events {
				if e.Err != nil {
					said.WriteString(e.Err.Error() + "\n")
				}
			}
			ev.mu.Unlock()
			said.WriteString(fb.String())
			out := said.String()
			if !strings.Contains(out, tc.want) {
				t.Fatalf("the failure was not reported (want %q in):\n%s", tc.want, out)
			}
			if !tc.spill && !strings.Contains(out, `"failed"`) {
				t.Fatalf("Spill.Fallback got no err entries:\n%s", out)
			}
			for what, s := range secrets {
				if strings.Contains(out, s) {
					t.Errorf("the %s appears in what the client reported:\n%s", what, out)
				}
			}
		})
	}
}
