package fluentcore

import (
	"context"
	"crypto/tls"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore/forwardtest"
	"github.com/fluentcore/fluentcore/internal/forward"
	"github.com/fluentcore/fluentcore/internal/testkit"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	"go.uber.org/zap"
)

// dialLog records the addresses every connection of a core hands its transport.
type dialLog struct {
	mu    sync.Mutex
	addrs []string
}

// dial records address and dials it: the transport of a core made by newWith.
func (l *dialLog) dial(ctx context.Context, network, address string) (net.Conn, error) {
	l.mu.Lock()
	l.addrs = append(l.addrs, address)
	l.mu.Unlock()
	var d net.Dialer
	return d.DialContext(ctx, network, address)
}

// names returns the addresses dialed whose host is not an IP address.
func (l *dialLog) names() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, a := range l.addrs {
		host, _, err := net.SplitHostPort(a)
		if _, perr := netip.ParseAddr(host); err != nil || perr != nil {
			out = append(out, a)
		}
	}
	return out
}

func (l *dialLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.addrs)
}

func portOf(t *testing.T, r *forwardtest.Receiver) string {
	t.Helper()
	_, port, err := net.SplitHostPort(strings.TrimPrefix(strings.TrimPrefix(r.Addr(), "tcp://"), "tls://"))
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// A name that only Config.Transport.Resolver knows, with one address, is delivered to: both streams
// dial the address the Resolver gave, never the name, and TLS still verifies the name.
func TestAOneAddressNameIsDialledAtTheResolversAddress(t *testing.T) {
	cert, err := forwardtest.NewTLSCert("single.test")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		scheme string
		opts   []forwardtest.Option
		tls    *tls.Config
	}{
		{name: "tcp", scheme: "tcp"},
		{name: "tls, the certificate for the name only", scheme: "tls", opts: []forwardtest.Option{forwardtest.WithTLS(cert.ServerConfig())}, tls: cert.ClientConfig()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ignore := goleak.IgnoreCurrent()
			t.Cleanup(func() { goleak.VerifyNone(t, ignore) }) // last: after the receiver's cleanup
			r := forwardtest.NewReceiver(t, append(tc.opts, forwardtest.WithLogf(nil))...)
			res := testkit.NewResolver()
			res.Set("single.test", "127.0.0.1")
			var dials dialLog
			core := newWith(Config{Addr: tc.scheme + "://single.test:" + portOf(t, r), Security: SecurityConfig{TLS: tc.tls}, Transport: TransportConfig{Resolver: res}, Metrics: MetricsConfig{Registerer: prometheus.NewRegistry()}}, nil, dials.dial)
			t.Cleanup(func() { _ = core.Close() })
			logger := zap.New(core)
			for i := range 10 {
				logger.Info("one address", zap.Int("i", i))
			}
			logger.Error("one address, err")
			testkit.WaitUntil(t, "both streams' entries delivered", func() bool {
				_ = core.Sync()
				return r.Len() == 11
			})
			if err := core.Close(); err != nil {
				t.Fatal(err)
			}
			if n := res.Looked("single.test"); n == 0 {
				t.Error("the Resolver was never asked for single.test")
			}
			if dials.count() == 0 {
				t.Fatal("no dial recorded")
			}
			if names := dials.names(); len(names) > 0 {
				t.Errorf("dialed by name, past the Resolver: %v", names)
			}
		})
	}
}

// When a name's two addresses shrink to one, the connections on the address that left
// move to the one that stays, and those already on it go on without a reconnect: nothing
// fails, nothing is dropped or spilled, and Close is prompt.
func TestANameThatShrinksToOneAddressKeepsDelivering(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) }) // last: after the receivers' cleanups
	port, rs := forwardtest.NewFleet(t, 2)
	res := testkit.NewResolver()
	res.Set("pair.test", fleetIPs(2)...)
	clock := testkit.NewManualClock(time.Unix(1_700_000_000, 0))
	var dials dialLog
	core := newWith(Config{Addr: "tcp://pair.test:" + port, Transport: TransportConfig{Resolver: res}, Metrics: MetricsConfig{Registerer: prometheus.NewRegistry()}, Timeouts: TimeoutsConfig{Close: 5 * time.Second}}, clock, dials.dial)
	t.Cleanup(func() { _ = core.Close() })
	testkit.WaitUntil(t, "the first lookup counts 2 info connections, one per address", func() bool { return sendingOn(core) == 2 })
	stays := "127.0.0.1:" + port
	logUntil(t, core, "each address takes entries", func() bool {
		return rs[0].Len() > 0 && rs[1].Len() > 0 && core.Stats().Info.Servers[0].Connections == 2
	})

	// The connections on the address that stays, and how often each has connected.
	type onStays struct {
		f        *forward.Forwarder
		connects uint64
	}
	var kept []onStays
	for _, st := range core.sink.streams {
		for _, snd := range st.Senders {
			if snd.Forwarder().Target() == stays {
				kept = append(kept, onStays{snd.Forwarder(), snd.Forwarder().Status().Connects()})
			}
		}
	}
	if len(kept) == 0 {
		t.Fatal("no connection on 127.0.0.1 before the shrink")
	}
	before := core.Stats()

	res.Set("pair.test", "127.0.0.1")
	clock.Add(DefaultResolveInterval)
	all := sendingOn(core) + len(core.sink.streams[errStream].Senders)
	last := rs[0].Len()
	logUntil(t, core, "every connection on the address that stays, taking entries", func() bool {
		return connsTo(core, stays) == all && rs[0].Len() > last
	})
	for _, k := range kept {
		if n := k.f.Status().Connects(); n != k.connects {
			t.Errorf("a connection on the address that stayed reconnected (%d connects, was %d)", n, k.connects)
		}
	}

	start := time.Now()
	if err := core.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	took := time.Since(start)
	st := core.Stats()
	identityHolds(t, st)
	if st.Info.SendErrors+st.Err.SendErrors != before.Info.SendErrors+before.Err.SendErrors {
		t.Errorf("send errors after the shrink: info %d, err %d (before it: %d, %d)", st.Info.SendErrors, st.Err.SendErrors, before.Info.SendErrors, before.Err.SendErrors)
	}
	if d := st.Info.DroppedTotal(); d != 0 {
		t.Errorf("info dropped %d %v", d, st.Info.Dropped)
	}
	if st.Err.Spilled != 0 {
		t.Errorf("err spilled %d (to the fallback)", st.Err.Spilled)
	}
	if took >= 5*time.Second {
		t.Errorf("Close took %v: the whole Timeouts.Close", took)
	}
	if names := dials.names(); len(names) > 0 {
		t.Errorf("dialed by name, past the Resolver: %v", names)
	}
	testkit.WaitUntil(t, "the receivers to have every entry counted delivered", func() bool {
		return uint64(received(rs...)) == st.Info.Delivered+st.Err.Delivered
	})
}

// Every SRV target, the regular one and the standby, is looked up through Config.Transport.Resolver
// and dialed at the address it gives.
func TestEverySRVTargetIsLookedUpThroughTheResolver(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
	primary := forwardtest.NewReceiver(t, forwardtest.WithLogf(nil))
	standby := forwardtest.NewReceiver(t, forwardtest.WithLogf(nil))
	res := testkit.NewResolver()
	res.Set("primary.test", "127.0.0.1")
	res.Set("standby.test", "127.0.0.1")
	for i, r := range []*forwardtest.Receiver{primary, standby} {
		p, _ := strconv.Atoi(portOf(t, r))
		target := []string{"primary.test.", "standby.test."}[i]
		res.AddSRV("_fluentd._tcp.srv.test", &net.SRV{Target: target, Port: uint16(p), Priority: uint16(10 * (i + 1)), Weight: 1})
	}
	var dials dialLog
	core := newWith(Config{Addr: "srv://_fluentd._tcp.srv.test", Transport: TransportConfig{Resolver: res, RetryMax: 200 * time.Millisecond}, Metrics: MetricsConfig{Registerer: prometheus.NewRegistry()}}, nil, dials.dial)
	t.Cleanup(func() { _ = core.Close() })
	logUntil(t, core, "the regular target takes entries", func() bool { return primary.Len() > 0 })
	if err := primary.Close(); err != nil {
		t.Fatal(err)
	}
	logUntil(t, core, "the standby takes entries once the regular target is down", func() bool { return standby.Len() > 0 })
	if err := core.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, host := range []string{"primary.test", "standby.test"} {
		if res.Looked(host) == 0 {
			t.Errorf("the Resolver was never asked for %s", host)
		}
	}
	if names := dials.names(); len(names) > 0 {
		t.Errorf("dialed by name, past the Resolver: %v", names)
	}
}

// The default resolver, and the tests', are SRVResolvers.
var (
	_ SRVResolver = net.DefaultResolver
	_ SRVResolver = (*testkit.Resolver)(nil)
)
