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
	"github.com/fluentcore/fluentcore/internal/testkit"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	"go.uber.org/zap"
)

// tableResolver knows names that the system's DNS does not: A records and SRV records from
// tables the test sets. It counts the lookups of each name.
type tableResolver struct {
	mu      sync.Mutex
	ips     map[string][]string
	srv     map[string][]*net.SRV
	lookups map[string]int
}

func newTableResolver() *tableResolver {
	return &tableResolver{ips: map[string][]string{}, srv: map[string][]*net.SRV{}, lookups: map[string]int{}}
}

func (r *tableResolver) set(host string, ips ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ips[host] = ips
}

func (r *tableResolver) looked(host string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lookups[host]
}

func (r *tableResolver) LookupIPAddr(_ context.Context, host string) ([]net.IPAddr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lookups[host]++
	ips, ok := r.ips[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	out := make([]net.IPAddr, len(ips))
	for i, ip := range ips {
		out[i] = net.IPAddr{IP: net.ParseIP(ip)}
	}
	return out, nil
}

func (r *tableResolver) LookupSRV(_ context.Context, service, proto, name string) (string, []*net.SRV, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lookups[name]++
	recs, ok := r.srv[name]
	if !ok {
		return "", nil, &net.DNSError{Err: "no such host", Name: name, IsNotFound: true}
	}
	return name, recs, nil
}

// dialLog records the addresses every connection of a core hands its transport.
type dialLog struct {
	mu    sync.Mutex
	addrs []string
}

// attach has every forwarder of core dial through l. Race-free: a sender reads dialRaw
// only once it has a batch, and the caller logs nothing before this.
func (l *dialLog) attach(core *Core) {
	for _, st := range core.sink.streams {
		for _, snd := range st.senders {
			snd.fwd.dialRaw = func(ctx context.Context, network, address string) (net.Conn, error) {
				l.mu.Lock()
				l.addrs = append(l.addrs, address)
				l.mu.Unlock()
				var d net.Dialer
				return d.DialContext(ctx, network, address)
			}
		}
	}
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

// A name that only Config.Resolver knows, with one address, is delivered to: both streams
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
			res := newTableResolver()
			res.set("single.test", "127.0.0.1")
			core := New(Config{Addr: tc.scheme + "://single.test:" + portOf(t, r), TLS: tc.tls, Resolver: res, Registerer: prometheus.NewRegistry()})
			t.Cleanup(func() { _ = core.Close() })
			var dials dialLog
			dials.attach(core)
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
			if n := res.looked("single.test"); n == 0 {
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
	port, rs := loopbackFleet(t, 2)
	res := newTableResolver()
	res.set("pair.test", fleetIPs(2)...)
	clock := &manualClock{now: time.Unix(1_700_000_000, 0)}
	core := NewWithClock(Config{Addr: "tcp://pair.test:" + port, Resolver: res, Registerer: prometheus.NewRegistry(), CloseTimeout: 5 * time.Second}, clock)
	t.Cleanup(func() { _ = core.Close() })
	var dials dialLog
	dials.attach(core)
	if n := len(core.sink.streams[infoStream].senders); n != 2 {
		t.Fatalf("info connections %d, want 2 (one per address)", n)
	}
	stays := "127.0.0.1:" + port
	logUntil(t, core, "each address takes entries", func() bool {
		return rs[0].Len() > 0 && rs[1].Len() > 0 && core.Stats().Info.Servers[0].Connections == 2
	})

	// The connections on the address that stays, and how often each has connected.
	type onStays struct {
		f        *forwarder
		connects uint64
	}
	var kept []onStays
	for _, st := range core.sink.streams {
		for _, snd := range st.senders {
			if i := snd.fwd.server.Load(); i >= 0 {
				if tg, _ := snd.fwd.bal.Target(int(i)); tg == stays {
					kept = append(kept, onStays{snd.fwd, snd.fwd.connects.Load()})
				}
			}
		}
	}
	if len(kept) == 0 {
		t.Fatal("no connection on 127.0.0.1 before the shrink")
	}
	before := core.Stats()

	res.set("pair.test", "127.0.0.1")
	clock.add(DefaultResolveInterval)
	all := len(core.sink.streams[infoStream].senders) + len(core.sink.streams[errStream].senders)
	last := rs[0].Len()
	logUntil(t, core, "every connection on the address that stays, taking entries", func() bool {
		return connsTo(core, stays) == all && rs[0].Len() > last
	})
	for _, k := range kept {
		if n := k.f.connects.Load(); n != k.connects {
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
		t.Errorf("Close took %v: the whole CloseTimeout", took)
	}
	if names := dials.names(); len(names) > 0 {
		t.Errorf("dialed by name, past the Resolver: %v", names)
	}
	testkit.WaitUntil(t, "the receivers to have every entry counted delivered", func() bool {
		return uint64(received(rs...)) == st.Info.Delivered+st.Err.Delivered
	})
}

// Every SRV target, the regular one and the standby, is looked up through Config.Resolver
// and dialed at the address it gives.
func TestEverySRVTargetIsLookedUpThroughTheResolver(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
	primary := forwardtest.NewReceiver(t, forwardtest.WithLogf(nil))
	standby := forwardtest.NewReceiver(t, forwardtest.WithLogf(nil))
	res := newTableResolver()
	res.set("primary.test", "127.0.0.1")
	res.set("standby.test", "127.0.0.1")
	for i, r := range []*forwardtest.Receiver{primary, standby} {
		p, _ := strconv.Atoi(portOf(t, r))
		target := []string{"primary.test.", "standby.test."}[i]
		res.srv["_fluentd._tcp.srv.test"] = append(res.srv["_fluentd._tcp.srv.test"], &net.SRV{Target: target, Port: uint16(p), Priority: uint16(10 * (i + 1)), Weight: 1})
	}
	core := New(Config{Addr: "srv://_fluentd._tcp.srv.test", Resolver: res, Registerer: prometheus.NewRegistry(), RetryMax: 200 * time.Millisecond})
	t.Cleanup(func() { _ = core.Close() })
	var dials dialLog
	dials.attach(core)
	logUntil(t, core, "the regular target takes entries", func() bool { return primary.Len() > 0 })
	if err := primary.Close(); err != nil {
		t.Fatal(err)
	}
	logUntil(t, core, "the standby takes entries once the regular target is down", func() bool { return standby.Len() > 0 })
	if err := core.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, host := range []string{"primary.test", "standby.test"} {
		if res.looked(host) == 0 {
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
	_ SRVResolver = (*tableResolver)(nil)
)
