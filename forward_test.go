package fluentcore_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore"
	"github.com/fluentcore/fluentcore/forwardtest"
	"github.com/fluentcore/fluentcore/internal/testkit"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// Tests of the forwarder's features against forwardtest: modes, acks and their faults,
// the shared-key handshake, TLS, unix sockets, several servers, deadlines. Those of the ack
// window and of one connection are in forward_acks_test.go and forward_conn_test.go.

const waitFor = 10 * time.Second

// logErrs logs n err entries numbered from first.
func logErrs(core *fluentcore.Core, first, n int) {
	logger := zap.New(core)
	for i := first; i < first+n; i++ {
		logger.Error("e", zap.Int("i", i))
	}
}

// indexes counts the entries of the receiver by their "i" field.
func indexes(r *forwardtest.Receiver) map[int64]int {
	seen := map[int64]int{}
	for _, e := range r.Entries() {
		if i, ok := e.Record["i"].(int64); ok {
			seen[i]++
		}
	}
	return seen
}

// checkAll waits until the receivers hold n entries, and fails unless every i in [0, n) is
// among them; it returns how many entries arrived more than once. (Without acks, a
// delivered entry is one written to the connection: the receiver may not have read it yet.)
func checkAll(t *testing.T, n int, rs ...*forwardtest.Receiver) (duplicates int) {
	t.Helper()
	testkit.WaitUntil(t, "entries to arrive", func() bool {
		total := 0
		for _, r := range rs {
			total += r.Len()
		}
		return total >= n
	})
	seen := map[int64]int{}
	for _, r := range rs {
		for i, c := range indexes(r) {
			seen[i] += c
		}
	}
	for i := range int64(n) {
		switch c := seen[i]; {
		case c == 0:
			t.Errorf("entry %d never arrived", i)
		case c > 1:
			duplicates += c - 1
		}
	}
	return duplicates
}

func TestModesOnTheWire(t *testing.T) {
	for _, tc := range []struct {
		compression string
		mode        forwardtest.Mode
	}{{"", forwardtest.PackedForward}, {"gzip", forwardtest.CompressedPackedForward}} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			r := forwardtest.NewReceiver(t)
			core := newTestCore(t, r.Addr(), nil, func(c *fluentcore.Config) { c.Transport.Compression = tc.compression })
			logger := zap.New(core)
			for i := range 200 {
				logger.Info("line", zap.Int("i", i), zap.String("pad", strings.Repeat("ab", i)))
			}
			logErrs(core, 200, 10)
			if err := core.Sync(); err != nil {
				t.Fatal(err)
			}
			got, err := r.WaitForEntries(210, waitFor)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range got {
				if e.Mode != tc.mode {
					t.Fatalf("entry in %v, want %v", e.Mode, tc.mode)
				}
				if i := e.Record["i"].(int64); i < 200 && e.Record["pad"] != strings.Repeat("ab", int(i)) {
					t.Fatalf("entry %d: pad %v", i, e.Record["pad"])
				}
			}
			if dup := checkAll(t, 210, r); dup != 0 {
				t.Errorf("%d duplicates without faults", dup)
			}
		})
	}
}

func TestConnectionClosedMidFrameIsResent(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	core := newTestCore(t, r.Addr(), nil, quiet, func(c *fluentcore.Config) { c.Info.Acks = fluentcore.AcksOn })
	r.SetCloseAfter(40) // inside the first frame
	const n = 50
	logErrs(core, 0, n)
	if err := r.WaitFor(func(s forwardtest.Stats) bool { return s.Truncated >= 2 }, waitFor); err != nil {
		t.Fatal(err)
	}
	r.SetCloseAfter(0)
	testkit.WaitUntil(t, "delivery after healing", func() bool { return core.Stats().Err.Delivered == n })
	if dup := checkAll(t, n, r); dup != 0 {
		t.Errorf("%d duplicates: truncated frames are never stored", dup)
	}
}

func TestRefusedConnectionsAreRetriedWithBackoff(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	if err := r.SetRefuse(true); err != nil {
		t.Fatal(err)
	}
	core := newTestCore(t, r.Addr(), nil, quiet)
	logErrs(core, 0, 10)
	testkit.WaitUntil(t, "failed attempts", func() bool { return core.Stats().Err.SendErrors >= 3 })
	if err := core.Sync(); err == nil || !strings.Contains(err.Error(), "connect to") {
		t.Fatalf("Sync while refused: %v, want the connect error", err)
	}
	if err := r.SetRefuse(false); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, "delivery after healing", func() bool { return core.Stats().Err.Delivered == 10 })
	checkAll(t, 10, r)
	if err := core.Sync(); err != nil {
		t.Fatalf("Sync after recovery: %v", err)
	}
}

func TestReconnectAfterTheReceiverDropsConnections(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	core := newTestCore(t, r.Addr(), nil, func(c *fluentcore.Config) { c.Info.Acks = fluentcore.AcksOn })
	logErrs(core, 0, 5)
	if err := core.Sync(); err != nil {
		t.Fatal(err)
	}
	r.CloseConnections()
	logErrs(core, 5, 5)
	if err := core.Sync(); err != nil {
		t.Fatal(err)
	}
	checkAll(t, 10, r)
	if s := r.Stats(); s.Connections < 2 {
		t.Fatalf("%d connections, want a new one after the drop", s.Connections)
	}
}

func TestSharedKeyHandshake(t *testing.T) {
	users := map[string]string{"alice": "pw-alice", "bob": "pw-bob"}
	cases := []struct {
		name string
		opts []forwardtest.Option
		mod  func(*fluentcore.Config)
	}{
		{"fluentd HELO", []forwardtest.Option{forwardtest.WithSharedKey("k3y")}, nil},
		{"fluent-bit HELO", []forwardtest.Option{forwardtest.WithSharedKey("k3y"), forwardtest.WithHELOStr()}, nil},
		{"users", []forwardtest.Option{forwardtest.WithSharedKey("k3y"), forwardtest.WithUsers(users)},
			func(c *fluentcore.Config) {
				c.Security.Username, c.Security.Password = "bob", fluentcore.NewSecret("pw-bob")
			}},
		{"acks and gzip", []forwardtest.Option{forwardtest.WithSharedKey("k3y")},
			func(c *fluentcore.Config) { c.Info.Acks, c.Transport.Compression = fluentcore.AcksOn, "gzip" }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := forwardtest.NewReceiver(t, tc.opts...)
			core := newTestCore(t, r.Addr(), nil, func(c *fluentcore.Config) {
				c.Security.SharedKey = fluentcore.NewSecret("k3y")
				c.Security.SelfHostname = "client"
				if tc.mod != nil {
					tc.mod(c)
				}
			})
			zap.New(core).Info("hello", zap.Int("i", 0))
			logErrs(core, 1, 1)
			if err := core.Sync(); err != nil {
				t.Fatal(err)
			}
			checkAll(t, 2, r)
			if s := r.Stats(); s.Handshakes != 2 || s.HandshakeFailures != 0 {
				t.Fatalf("receiver stats %+v, want a handshake per stream", s)
			}
			if st := core.Stats(); st.Info.HandshakeFailures+st.Err.HandshakeFailures != 0 {
				t.Fatal("handshake failures counted")
			}
		})
	}
}

// HELO "keepalive": false means one request per connection: the client closes after each
// frame instead of writing into a connection the receiver is closing.
func TestHELOKeepaliveFalse(t *testing.T) {
	r := forwardtest.NewReceiver(t, forwardtest.WithSharedKey("k"), forwardtest.DenyKeepalive())
	core := newTestCore(t, r.Addr(), nil, func(c *fluentcore.Config) { c.Security.SharedKey = fluentcore.NewSecret("k") })
	for i := range 5 {
		logErrs(core, i, 1)
		if err := core.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	checkAll(t, 5, r)
	st := core.Stats().Err
	if st.SendErrors != 0 || st.SentBatches != 5 || r.Stats().Connections != 5 {
		t.Fatalf("send errors %d, batches %d, connections %d", st.SendErrors, st.SentBatches, r.Stats().Connections)
	}
}

// Every handshake failure is an error wrapping ErrHandshake, without the secrets, counted
// in fluentcore_handshake_failures_total; the sender keeps retrying and recovers once the
// receiver is healed.
func TestHandshakeFailuresAreCountedAndRetried(t *testing.T) {
	const key, password = "the-shared-k3y", "the-passw0rd"
	cases := []struct {
		name   string
		opts   []forwardtest.Option
		mod    func(*fluentcore.Config)
		fault  forwardtest.PongFault
		want   string
		healed bool // healed by PongOK
	}{
		{"wrong key", []forwardtest.Option{forwardtest.WithSharedKey("another-key")}, nil, 0, "shared_key mismatch", false},
		{"wrong password", []forwardtest.Option{forwardtest.WithSharedKey(key), forwardtest.WithUsers(map[string]string{"alice": "other"})},
			func(c *fluentcore.Config) {
				c.Security.Username, c.Security.Password = "alice", fluentcore.NewSecret(password)
			}, 0, "username/password mismatch", false},
		{"wrong PONG digest", nil, nil, forwardtest.PongWrongDigest, "digest does not match", true},
		{"PONG auth_result false", nil, nil, forwardtest.PongAuthFailed, "rejected the credentials", true},
		{"no PONG", nil, nil, forwardtest.PongNone, "reading PONG", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opts := tc.opts
			if opts == nil {
				opts = []forwardtest.Option{forwardtest.WithSharedKey(key)}
			}
			r := forwardtest.NewReceiver(t, opts...)
			r.SetPongFault(tc.fault)
			reg := prometheus.NewRegistry()
			core := newTestCore(t, r.Addr(), reg, quiet, func(c *fluentcore.Config) {
				c.Security.SharedKey = fluentcore.NewSecret(key)
				if tc.mod != nil {
					tc.mod(c)
				}
			})
			logErrs(core, 0, 3)
			testkit.WaitUntil(t, "retried handshakes", func() bool { return core.Stats().Err.HandshakeFailures >= 3 })
			err := core.Sync()
			if !errors.Is(err, fluentcore.ErrHandshake) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Sync: %v; want ErrHandshake mentioning %q", err, tc.want)
			}
			if strings.Contains(err.Error(), key) || strings.Contains(err.Error(), password) {
				t.Fatalf("error reveals a secret: %v", err)
			}
			if v := testkit.Metric(t, reg, "fluentcore_handshake_failures_total", map[string]string{"stream": "err"}); v < 3 {
				t.Fatalf("fluentcore_handshake_failures_total{stream=err} = %v", v)
			}
			if r.Stats().Entries != 0 {
				t.Fatal("data reached the receiver without a handshake")
			}
			if !tc.healed {
				return
			}
			r.SetPongFault(forwardtest.PongOK)
			testkit.WaitUntil(t, "delivery after healing", func() bool { return core.Stats().Err.Delivered == 3 })
			checkAll(t, 3, r)
		})
	}
}

// A client without the key, facing a receiver that wants one: fluentd discards whatever
// arrives before a PING, answers with a failing PONG and closes. The client must notice —
// with acks or without — so that nothing is counted delivered that the receiver threw away,
// and err entries end up spilled, never silently lost.
func TestMissingSharedKeyIsReported(t *testing.T) {
	for _, ack := range []bool{false, true} {
		t.Run(fmt.Sprintf("ack=%v", ack), func(t *testing.T) {
			r := forwardtest.NewReceiver(t, forwardtest.WithSharedKey("k"))
			var fallback testkit.Lines
			core := newTestCore(t, r.Addr(), nil, quiet, func(c *fluentcore.Config) {
				if ack {
					c.Info.Acks = fluentcore.AcksOn
				}
				c.Spill.Fallback = &fallback
			})
			logErrs(core, 0, 5)
			testkit.WaitUntil(t, "two handshake failures", func() bool { return core.Stats().Err.HandshakeFailures >= 2 })
			err := core.Sync()
			if err == nil || !strings.Contains(err.Error(), "shared_key") || !errors.Is(err, fluentcore.ErrHandshake) {
				t.Fatalf("Sync: %v, want an ErrHandshake hinting at the shared_key", err)
			}
			_ = core.Close()
			st := core.Stats().Err
			if st.Delivered != 0 || st.Spilled != 5 || st.HandshakeFailures == 0 {
				t.Fatalf("delivered %d spilled %d handshake failures %d: want 0, 5, >0", st.Delivered, st.Spilled, st.HandshakeFailures)
			}
			if r.Len() != 0 {
				t.Fatalf("the receiver accepted %d entries without a handshake", r.Len())
			}
		})
	}
}

// The handshake is bounded by Timeouts.Handshake: a receiver that sends HELO and then reads
// nothing (stalled) costs a timeout, not a hang.
func TestHandshakeTimeout(t *testing.T) {
	r := forwardtest.NewReceiver(t, forwardtest.WithSharedKey("k"))
	r.Stall()
	core := newTestCore(t, r.Addr(), nil, quiet, func(c *fluentcore.Config) {
		c.Security.SharedKey = fluentcore.NewSecret("k")
		c.Timeouts.Handshake = 100 * time.Millisecond
	})
	logErrs(core, 0, 1)
	testkit.WaitUntil(t, "handshake timeouts", func() bool { return core.Stats().Err.HandshakeFailures >= 2 })
	err := core.Sync()
	if !errors.Is(err, fluentcore.ErrHandshake) || !strings.Contains(err.Error(), "timeout") {
		t.Fatalf("Sync: %v, want a handshake timeout", err)
	}
	r.Resume()
	testkit.WaitUntil(t, "delivery after resume", func() bool { return core.Stats().Err.Delivered == 1 })
}

func TestTLS(t *testing.T) {
	cert, err := forwardtest.NewTLSCert()
	if err != nil {
		t.Fatal(err)
	}
	named, err := forwardtest.NewTLSCert("fluentd.internal")
	if err != nil {
		t.Fatal(err)
	}
	mutual := cert.ServerConfig()
	mutual.ClientAuth, mutual.ClientCAs = tls.RequireAndVerifyClientCert, cert.CAPool
	withClientCert := cert.ClientConfig()
	withClientCert.Certificates = []tls.Certificate{cert.Client}
	withName := named.ClientConfig()
	withName.ServerName = "fluentd.internal"

	cases := []struct {
		name   string
		server *tls.Config
		opts   []forwardtest.Option
		client *tls.Config
		key    string
		want   string // "" means delivered; else part of the error
	}{
		{"TLS 1.2-only receiver", cert.ServerConfig(), []forwardtest.Option{forwardtest.WithTLS12Only()}, cert.ClientConfig(), "", ""},
		{"TLS and shared key", cert.ServerConfig(), []forwardtest.Option{forwardtest.WithSharedKey("k")}, cert.ClientConfig(), "k", ""},
		{"unknown authority", cert.ServerConfig(), nil, nil, "", "certificate"},
		{"verification disabled", cert.ServerConfig(), nil, &tls.Config{InsecureSkipVerify: true}, "", ""},
		{"ServerName", named.ServerConfig(), nil, withName, "", ""},
		{"name mismatch", named.ServerConfig(), nil, named.ClientConfig(), "", "certificate"},
		{"client certificate", mutual, nil, withClientCert, "", ""},
		{"client certificate missing", mutual, nil, cert.ClientConfig(), "", "certificate"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opts := append([]forwardtest.Option{forwardtest.WithTLS(tc.server), forwardtest.WithLogf(nil)}, tc.opts...)
			r := forwardtest.NewReceiver(t, opts...)
			if !strings.HasPrefix(r.Addr(), "tls://") {
				t.Fatalf("Addr %q", r.Addr())
			}
			core := newTestCore(t, r.Addr(), nil, quiet, func(c *fluentcore.Config) {
				c.Security.TLS = tc.client
				c.Security.SharedKey = fluentcore.NewSecret(tc.key)
				// A TLS 1.3 server rejects a missing client certificate after the
				// client's handshake is done: only an ack wait notices.
				c.Info.Acks = fluentcore.AcksOn
			})
			logErrs(core, 0, 3)
			if tc.want == "" {
				testkit.WaitUntil(t, "delivery", func() bool { return core.Stats().Err.Delivered == 3 })
				checkAll(t, 3, r)
				return
			}
			testkit.WaitUntil(t, "a failed attempt", func() bool { return core.Stats().Err.SendErrors >= 1 })
			err := core.Sync()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Sync: %v, want an error mentioning %q", err, tc.want)
			}
			if r.Stats().Entries != 0 {
				t.Fatal("entries delivered over an unverified connection")
			}
		})
	}
}

// Timeouts.Dial bounds the TLS handshake too: a stalled receiver never answers it.
func TestTLSHandshakeDeadline(t *testing.T) {
	cert, err := forwardtest.NewTLSCert()
	if err != nil {
		t.Fatal(err)
	}
	r := forwardtest.NewReceiver(t, forwardtest.WithTLS(cert.ServerConfig()))
	r.Stall()
	core := newTestCore(t, r.Addr(), nil, quiet, func(c *fluentcore.Config) {
		c.Security.TLS = cert.ClientConfig()
		c.Timeouts.Dial = 200 * time.Millisecond
	})
	logErrs(core, 0, 1)
	testkit.WaitUntil(t, "a TLS handshake timeout", func() bool {
		err := core.Sync()
		return err != nil && strings.Contains(err.Error(), "TLS handshake") && errors.Is(err, context.DeadlineExceeded)
	})
	r.Resume()
	checkAll(t, 1, r)
}

func TestUnixSocket(t *testing.T) {
	r := forwardtest.NewReceiver(t, forwardtest.WithAddr("unix://"+filepath.Join(t.TempDir(), "fwd.sock")))
	core := newTestCore(t, r.Addr(), nil, func(c *fluentcore.Config) { c.Info.Acks = fluentcore.AcksOn })
	logErrs(core, 0, 3)
	if err := core.Sync(); err != nil {
		t.Fatal(err)
	}
	checkAll(t, 3, r)
}

// Everything a mutual-TLS, shared-key receiver needs can come from the environment and
// from files (as Kubernetes mounts secrets): no Go code sets the certificates or the key.
func TestTLSAndSecretsFromFilesAndTheEnvironment(t *testing.T) {
	cert, err := forwardtest.NewTLSCert()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files, err := cert.WriteFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	srv := cert.ServerConfig()
	srv.ClientAuth, srv.ClientCAs = tls.RequireAndVerifyClientCert, cert.CAPool
	r := forwardtest.NewReceiver(t, forwardtest.WithTLS(srv), forwardtest.WithSharedKey("from-a-file"),
		forwardtest.WithUsers(map[string]string{"app": "pw-from-a-file"}))
	keyFile, pwFile := filepath.Join(dir, "shared_key"), filepath.Join(dir, "password")
	if err := os.WriteFile(keyFile, []byte("from-a-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pwFile, []byte("pw-from-a-file"), 0o600); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		"FLUENT_ADDR": r.Addr(), "FLUENT_TAG": "shop",
		"FLUENT_SECURITY_TLS_CA_FILE": files.CA, "FLUENT_SECURITY_TLS_CERT_FILE": files.ClientCert, "FLUENT_SECURITY_TLS_KEY_FILE": files.ClientKey,
		"FLUENT_SECURITY_SHARED_KEY_FILE": keyFile, "FLUENT_SECURITY_USERNAME": "app", "FLUENT_SECURITY_PASSWORD_FILE": pwFile,
	} {
		t.Setenv(k, v)
	}
	cfg, err := fluentcore.ConfigFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	core := fluentcore.New(cfg)
	defer core.Close()
	logErrs(core, 0, 3)
	if err := core.Sync(); err != nil {
		t.Fatal(err)
	}
	checkAll(t, 3, r)

	// A file that is missing, empty or holds no certificate, or TLS files with no tls://
	// address, is named by Validate, and every send fails with it: the core never connects
	// without the credentials it was given.
	emptyFile := filepath.Join(dir, "empty")
	if err := os.WriteFile(emptyFile, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []fluentcore.Config{
		{Addr: "tls://127.0.0.1:24224", Security: fluentcore.SecurityConfig{TLSFiles: fluentcore.TLSFiles{CAFile: filepath.Join(dir, "missing.pem")}}},
		{Addr: "tls://127.0.0.1:24224", Security: fluentcore.SecurityConfig{TLSFiles: fluentcore.TLSFiles{CAFile: keyFile}}},
		{Addr: "tls://127.0.0.1:24224", Security: fluentcore.SecurityConfig{TLSFiles: fluentcore.TLSFiles{CertFile: files.ClientCert}}},
		{Security: fluentcore.SecurityConfig{SharedKeyFile: filepath.Join(dir, "missing")}},
		{Security: fluentcore.SecurityConfig{SharedKeyFile: emptyFile}},
		{Security: fluentcore.SecurityConfig{SharedKey: fluentcore.NewSecret("k"), SharedKeyFile: keyFile}},
		{Addr: "tcp://127.0.0.1:24224", Security: fluentcore.SecurityConfig{TLSFiles: fluentcore.TLSFiles{CAFile: files.CA}}}, // no tls:// to use it
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("Validate accepted %+v", bad)
		}
	}
}

// servers returns receivers that close after each request and use a handshake (whose HELO
// tells the client so), so that every frame opens a connection through the balancer.
func oneShotReceivers(t *testing.T, n int) []*forwardtest.Receiver {
	rs := make([]*forwardtest.Receiver, n)
	for i := range rs {
		rs[i] = forwardtest.NewReceiver(t, forwardtest.WithSharedKey("k"), forwardtest.DenyKeepalive(), forwardtest.WithLogf(nil))
	}
	return rs
}

func TestServersWeightedRoundRobin(t *testing.T) {
	rs := oneShotReceivers(t, 2)
	core := newTestCore(t, "", nil, func(c *fluentcore.Config) {
		c.Security.SharedKey = fluentcore.NewSecret("k")
		c.Servers = []fluentcore.Server{{Addr: rs[0].Addr(), Weight: 40}, {Addr: rs[1].Addr(), Weight: 20}}
	})
	for i := range 30 {
		logErrs(core, i, 1)
		if err := core.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	checkAll(t, 30, rs...)
	if a, b := rs[0].Len(), rs[1].Len(); a != 20 || b != 10 {
		t.Fatalf("entries per server %d and %d, want 20 and 10 (weights 40:20)", a, b)
	}
}

func TestServersSkipADownServerAndTryItAgain(t *testing.T) {
	rs := oneShotReceivers(t, 2)
	if err := rs[0].SetRefuse(true); err != nil {
		t.Fatal(err)
	}
	core := newTestCore(t, "", nil, func(c *fluentcore.Config) {
		c.Security.SharedKey = fluentcore.NewSecret("k")
		c.Servers = []fluentcore.Server{{Addr: rs[0].Addr()}, {Addr: rs[1].Addr()}}
	})
	for i := range 10 {
		logErrs(core, i, 1)
		if err := core.Sync(); err != nil {
			t.Fatal(err) // the failed attempt on the down server is retried on the other at once
		}
	}
	checkAll(t, 10, rs...)
	if rs[1].Len() != 10 {
		t.Fatalf("%d entries on the server that is up, want 10", rs[1].Len())
	}
	if err := rs[0].SetRefuse(false); err != nil {
		t.Fatal(err)
	}
	i := 10
	testkit.WaitUntil(t, "the healed server to take connections again", func() bool {
		logErrs(core, i, 1)
		i++
		return core.Sync() == nil && rs[0].Len() > 0
	})
	checkAll(t, i, rs...)
}

func TestServersStandbyFailoverAndRecovery(t *testing.T) {
	primary := forwardtest.NewReceiver(t, forwardtest.WithLogf(nil))
	standby := forwardtest.NewReceiver(t, forwardtest.WithLogf(nil))
	core := newTestCore(t, "", nil, func(c *fluentcore.Config) {
		c.Info.Acks = fluentcore.AcksOn
		c.Servers = []fluentcore.Server{{Addr: standby.Addr(), Standby: true}, {Addr: primary.Addr()}}
	})
	logErrs(core, 0, 10)
	if err := core.Sync(); err != nil {
		t.Fatal(err)
	}
	checkAll(t, 10, primary, standby)
	if primary.Len() != 10 || standby.Len() != 0 {
		t.Fatalf("primary %d, standby %d entries; want all on the primary", primary.Len(), standby.Len())
	}

	// The primary goes away: the standby takes over.
	if err := primary.SetRefuse(true); err != nil {
		t.Fatal(err)
	}
	primary.CloseConnections()
	logErrs(core, 10, 10)
	if err := core.Sync(); err != nil {
		t.Fatal(err)
	}
	if standby.Len() != 10 {
		t.Fatalf("standby has %d entries, want 10", standby.Len())
	}

	// The primary comes back: once it is due, the client leaves the standby.
	if err := primary.SetRefuse(false); err != nil {
		t.Fatal(err)
	}
	i := 20
	testkit.WaitUntil(t, "the primary to take over again", func() bool {
		logErrs(core, i, 1)
		i++
		return core.Sync() == nil && primary.Len() > 10
	})
	before := standby.Len()
	logErrs(core, i, 10)
	if err := core.Sync(); err != nil {
		t.Fatal(err)
	}
	if standby.Len() != before {
		t.Fatal("standby still used after the primary recovered")
	}
	if dup := checkAll(t, i+10, primary, standby); dup != 0 {
		t.Errorf("%d duplicates", dup)
	}
}

func TestValidateForwardOptions(t *testing.T) {
	cases := []struct {
		name string
		cfg  fluentcore.Config
		want string // "" means valid
	}{
		{"gzip", fluentcore.Config{Transport: fluentcore.TransportConfig{Compression: "gzip"}}, ""},
		{"zstd", fluentcore.Config{Transport: fluentcore.TransportConfig{Compression: "zstd"}}, "Compression"},
		{"servers", fluentcore.Config{Servers: []fluentcore.Server{{Addr: "a:1"}, {Addr: "tls://b:2", Weight: 10, Standby: true}}}, ""},
		{"servers and addr", fluentcore.Config{Addr: "a:1", Servers: []fluentcore.Server{{Addr: "b:1"}}}, "not both"},
		{"bad server", fluentcore.Config{Servers: []fluentcore.Server{{Addr: "a:1"}, {Addr: "ftp://b:1"}}}, "scheme"},
		{"negative weight", fluentcore.Config{Servers: []fluentcore.Server{{Addr: "a:1", Weight: -1}}}, "weight"},
		{"user without key", fluentcore.Config{Security: fluentcore.SecurityConfig{Username: "u", Password: fluentcore.NewSecret("p")}}, "SharedKey"},
		{"shared key and user", fluentcore.Config{Security: fluentcore.SecurityConfig{SharedKey: fluentcore.NewSecret("k"), Username: "u", Password: fluentcore.NewSecret("p")}}, ""},
		{"negative handshake timeout", fluentcore.Config{Timeouts: fluentcore.TimeoutsConfig{Handshake: -1}}, "Timeouts.Handshake"},
	}
	for _, c := range cases {
		err := c.cfg.Validate()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: unexpected error %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: error %v, want one mentioning %q", c.name, err, c.want)
		}
	}
}
