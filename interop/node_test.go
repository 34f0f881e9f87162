package interop

import (
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore"
)

// nodeConfig is server.js's configuration.
type nodeConfig struct {
	Security *nodeSecurity `json:"security,omitempty"`
	TLS      *nodeTLS      `json:"tls,omitempty"`
}

type nodeSecurity struct {
	ServerHostname string            `json:"serverHostname"`
	SharedKey      string            `json:"sharedKey"`
	Authorize      bool              `json:"authorize"`
	UserDict       map[string]string `json:"userDict,omitempty"`
}

type nodeTLS struct {
	CertFile   string `json:"certFile"`
	KeyFile    string `json:"keyFile"`
	MinVersion string `json:"minVersion,omitempty"`
	MaxVersion string `json:"maxVersion,omitempty"`
}

// startNode runs @fluent-org/logger's FluentServer (node/server.js) on 127.0.0.1 at a
// port the kernel picks. It needs `npm ci --prefix node` to have run (make interop does).
func startNode(t *testing.T, cfg nodeConfig) *peer {
	t.Helper()
	if _, err := os.Stat(filepath.Join("node", "node_modules", "@fluent-org", "logger")); err != nil {
		t.Fatalf("@fluent-org/logger is not installed: run `npm ci --prefix node` in interop/ (make interop does): %v", err)
	}
	nodeBin, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node (v20) is needed for the FluentServer tests: %v", err)
	}
	js, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return startPeer(t, "FluentServer", exec.Command(nodeBin, filepath.Join("node", "server.js"), string(js)))
}

// nodeEntry is one entry as FluentServer emitted it.
type nodeEntry struct {
	Tag  string          `json:"tag"`
	Time json.RawMessage `json:"time"`
	// Record is the JSON of what @msgpack/msgpack decoded: numbers float64, bin
	// {"$bin": base64}.
	Record map[string]any `json:"record"`
}

// nodeView maps a logged record to what FluentServer reports: JavaScript numbers (int
// and float alike, rounded to float64 above 2^53), bin as a Uint8Array (printed {"$bin": base64}), the rest as is.
func nodeView(v any) any {
	switch v := v.(type) {
	case int64:
		return float64(v)
	case uint64:
		return float64(v)
	case []byte:
		return map[string]any{"$bin": base64.StdEncoding.EncodeToString(v)}
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = nodeView(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = nodeView(e)
		}
		return out
	}
	return v
}

// checkNode waits for every logged entry at FluentServer and compares each with what was
// logged: tag, EventTime to the nanosecond, record.
func checkNode(t *testing.T, p *peer, want []sent) {
	t.Helper()
	lines, err := p.waitLines(len(want), deliverTimeout)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]nodeEntry, len(lines))
	for i, l := range lines {
		if err := json.Unmarshal(l, &got[i]); err != nil {
			t.Fatalf("line %d: %v: %s", i, err, l)
		}
	}
	problems := matchBySeq(want, got, func(e nodeEntry) (int64, bool) {
		seq, ok := e.Record["seq"].(float64)
		return int64(seq), ok
	}, func(s sent, e nodeEntry) string {
		var tm struct {
			Sec  *int64 `json:"sec"`
			Nsec *int64 `json:"nsec"`
		}
		if err := json.Unmarshal(e.Time, &tm); err != nil || tm.Sec == nil || tm.Nsec == nil {
			return fmt.Sprintf("time %s is not an EventTime", e.Time)
		}
		switch {
		case e.Tag != s.tag:
			return fmt.Sprintf("tag %q, want %q", e.Tag, s.tag)
		case *tm.Sec != s.time.Unix() || *tm.Nsec != int64(s.time.Nanosecond()):
			return fmt.Sprintf("time %d.%09d, want %d.%09d", *tm.Sec, *tm.Nsec, s.time.Unix(), s.time.Nanosecond())
		case !reflect.DeepEqual(any(e.Record), nodeView(s.record)):
			return fmt.Sprintf("record\n got %#v\nwant %#v", e.Record, nodeView(s.record))
		}
		return ""
	})
	for _, pr := range problems {
		t.Error(pr)
	}
}

// tlsVersions records the TLS versions the core's connections negotiated.
type tlsVersions struct {
	mu   sync.Mutex
	seen map[uint16]int
}

func (v *tlsVersions) config(p testPKI) *tls.Config {
	return &tls.Config{
		RootCAs:    p.roots,
		MinVersion: tls.VersionTLS12,
		VerifyConnection: func(cs tls.ConnectionState) error {
			v.mu.Lock()
			defer v.mu.Unlock()
			if v.seen == nil {
				v.seen = make(map[uint16]int)
			}
			v.seen[cs.Version]++
			return nil
		},
	}
}

func (v *tlsVersions) only(want uint16) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.seen) != 1 || v.seen[want] == 0 {
		names := make([]string, 0, len(v.seen))
		for ver, n := range v.seen {
			names = append(names, fmt.Sprintf("%s×%d", tls.VersionName(ver), n))
		}
		return fmt.Errorf("connections negotiated %v, want only %s", names, tls.VersionName(want))
	}
	return nil
}

const (
	nodeHostname   = "fluent-node-peer"  // FluentServer's serverHostname
	clientHostname = "fluentcore-client" // Config.Security.SelfHostname: must differ from the peer's
	sharedKey      = "interop-shared-key-3b9f"
	userName       = "alice"
	userPassword   = "alice-password-81d2"
)

// TestNodeFluentServer sends the scenario to FluentServer with each security feature it
// supports, alone and combined, and checks every entry arrives as logged.
func TestNodeFluentServer(t *testing.T) {
	withKey := &nodeSecurity{ServerHostname: nodeHostname, SharedKey: sharedKey}
	withUser := &nodeSecurity{ServerHostname: nodeHostname, SharedKey: sharedKey, Authorize: true,
		UserDict: map[string]string{userName: userPassword, "bob": "bob-password"}}
	for _, tc := range []struct {
		name        string
		security    *nodeSecurity
		tls         bool
		tlsMax      string // FluentServer's maxVersion; "" = Node's default (TLS 1.3)
		ack         bool
		compression string
		user        bool
	}{
		{name: "PackedForward"},
		{name: "PackedForward/ack", ack: true},
		{name: "CompressedPackedForward/ack", ack: true, compression: "gzip"},
		{name: "SharedKey", security: withKey},
		{name: "SharedKey/ack", security: withKey, ack: true},
		{name: "SharedKey/UserAuth/ack", security: withUser, user: true, ack: true},
		{name: "TLS", tls: true},
		{name: "TLS/ack", tls: true, ack: true},
		{name: "TLS1.2only/ack", tls: true, tlsMax: "TLSv1.2", ack: true},
		{name: "TLS/SharedKey/ack", tls: true, security: withKey, ack: true},
		{name: "TLS1.2only/SharedKey/UserAuth/gzip/ack", tls: true, tlsMax: "TLSv1.2", security: withUser,
			user: true, ack: true, compression: "gzip"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ncfg := nodeConfig{Security: tc.security}
			var (
				pki      testPKI
				versions tlsVersions
			)
			if tc.tls {
				pki = newTestPKI(t)
				ncfg.TLS = &nodeTLS{CertFile: pki.certFile, KeyFile: pki.keyFile, MaxVersion: tc.tlsMax}
			}
			p := startNode(t, ncfg)

			// Without TLS, a tap checks the mode on the wire: FluentServer does not say.
			var tp *tap
			addr := "tls://" + p.addr
			if !tc.tls {
				tp = newTap(t, p.addr)
				addr = "tcp://" + tp.addr()
			}
			fallback := &syncBuffer{}
			cfg := baseConfig(addr, fallback)
			if tc.ack {
				cfg.Info.Acks = fluentcore.AcksOn
			}
			cfg.Transport.Compression = tc.compression
			if tc.security != nil {
				cfg.Security.SharedKey = fluentcore.NewSecret(sharedKey)
				cfg.Security.SelfHostname = clientHostname
			}
			if tc.user {
				cfg.Security.Username, cfg.Security.Password = userName, fluentcore.NewSecret(userPassword)
			}
			if tc.tls {
				cfg.Security.TLS = versions.config(pki)
			}
			core := fluentcore.New(cfg)
			want := logScenario(core, "")
			syncAndClose(t, core)
			checkAllDelivered(t, core, want, fallback)
			checkNode(t, p, want)
			if tp != nil {
				mode := "PackedForward"
				if tc.compression == "gzip" {
					mode = "CompressedPackedForward"
				}
				checkFrames(t, tp, mode, tc.ack, len(want))
			}
			if tc.tls {
				wantVersion := uint16(tls.VersionTLS13)
				if tc.tlsMax == "TLSv1.2" {
					wantVersion = tls.VersionTLS12
				}
				if err := versions.only(wantVersion); err != nil {
					t.Error(err)
				}
			}
		})
	}
}

// TestNodeFluentServerRejects checks that a handshake the server rejects delivers
// nothing, makes Sync and Close fail, and that the error says why without revealing the
// secret that was wrong.
func TestNodeFluentServerRejects(t *testing.T) {
	const (
		wrongKey      = "wrong-shared-key-c4e7"
		wrongPassword = "wrong-password-5a0b"
	)
	for _, tc := range []struct {
		name      string
		security  nodeSecurity
		configure func(*fluentcore.Config)
		secrets   []string // must not appear in any error text or in the fallback
		wantWords []string // one of them must appear in the error text (case-insensitive)
	}{{
		name:     "WrongSharedKey",
		security: nodeSecurity{ServerHostname: nodeHostname, SharedKey: sharedKey},
		configure: func(c *fluentcore.Config) {
			c.Security.SharedKey, c.Security.SelfHostname = fluentcore.NewSecret(wrongKey), clientHostname
		},
		secrets:   []string{wrongKey, sharedKey},
		wantWords: []string{"shared key", "shared_key", "sharedkey"},
	}, {
		name: "WrongPassword",
		security: nodeSecurity{ServerHostname: nodeHostname, SharedKey: sharedKey, Authorize: true,
			UserDict: map[string]string{userName: userPassword}},
		configure: func(c *fluentcore.Config) {
			c.Security.SharedKey, c.Security.SelfHostname = fluentcore.NewSecret(sharedKey), clientHostname
			c.Security.Username, c.Security.Password = userName, fluentcore.NewSecret(wrongPassword)
		},
		secrets:   []string{wrongPassword, userPassword, sharedKey},
		wantWords: []string{"password", "authentication", "username"},
	}, {
		name:     "NoSharedKeyConfigured",
		security: nodeSecurity{ServerHostname: nodeHostname, SharedKey: sharedKey},
		configure: func(c *fluentcore.Config) {
			// With acks: without them, frames written before the server's HELO is read
			// count as delivered (at-most-once), and the server drops them.
			c.Security.SelfHostname, c.Info.Acks = clientHostname, fluentcore.AcksOn
		},
		secrets:   []string{sharedKey},
		wantWords: []string{"shared key", "shared_key", "sharedkey", "handshake"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			sec := tc.security
			p := startNode(t, nodeConfig{Security: &sec})
			fallback := &syncBuffer{}
			cfg := baseConfig("tcp://"+p.addr, fallback)
			cfg.Timeouts.Sync = failSyncAfter
			cfg.Timeouts.Close = time.Second
			tc.configure(&cfg)
			core := fluentcore.New(cfg)
			want := logScenario(core, "")

			syncErr := core.Sync()
			if syncErr == nil {
				t.Error("Sync returned nil, want an error: the server rejects the handshake")
			}
			if !waitUntil(closeTimeout, func() bool {
				st := core.Stats()
				return st.Info.SendErrors > 0 && st.Err.SendErrors > 0
			}) {
				t.Errorf("no send errors counted on both streams: %+v", core.Stats())
			}
			closeErr := core.Close()
			if closeErr == nil {
				t.Error("Close returned nil, want an error: nothing was delivered")
			}
			st := core.Stats()
			if st.Info.Delivered != 0 || st.Err.Delivered != 0 {
				t.Errorf("delivered info %d, err %d; want 0", st.Info.Delivered, st.Err.Delivered)
			}
			var errs int
			for _, s := range want {
				if strings.HasSuffix(s.tag, ".err") {
					errs++
				}
			}
			if st.Err.Spilled != uint64(errs) {
				t.Errorf("err entries spilled to Spill.Fallback: %d, want %d", st.Err.Spilled, errs)
			}
			if n := p.count(); n != 0 {
				t.Errorf("the server emitted %d entries, want none", n)
			}

			var text strings.Builder
			for _, err := range []error{syncErr, closeErr} {
				if err != nil {
					text.WriteString(err.Error() + "\n")
				}
			}
			t.Logf("error text:\n%s", text.String())
			lower := strings.ToLower(text.String())
			found := false
			for _, w := range tc.wantWords {
				found = found || strings.Contains(lower, w)
			}
			if !found {
				t.Errorf("the errors from Sync and Close do not say why (want one of %q):\n%s", tc.wantWords, text.String())
			}
			for _, s := range tc.secrets {
				if strings.Contains(text.String(), s) {
					t.Errorf("an error reveals the secret %q:\n%s", s, text.String())
				}
				if strings.Contains(fallback.String(), s) {
					t.Errorf("Spill.Fallback reveals the secret %q", s)
				}
			}
		})
	}
}
