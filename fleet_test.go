package fluentcore

import (
	"context"
	"errors"
	"io"
	"net"
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

// fleetResolver is a Resolver answering from a table the test changes.
type fleetResolver struct {
	mu    sync.Mutex
	addrs map[string][]string
}

func (r *fleetResolver) set(host string, ips ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.addrs == nil {
		r.addrs = map[string][]string{}
	}
	r.addrs[host] = ips
}

func (r *fleetResolver) LookupIPAddr(_ context.Context, host string) ([]net.IPAddr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ips, ok := r.addrs[host]
	if !ok {
		return nil, errors.New("no such host " + host)
	}
	out := make([]net.IPAddr, len(ips))
	for i, ip := range ips {
		out[i] = net.IPAddr{IP: net.ParseIP(ip)}
	}
	return out, nil
}

// fleetIPs returns the loopback addresses of the first n receivers of forwardtest.NewFleet.
func fleetIPs(n int) []string {
	ips := make([]string, n)
	for i := range ips {
		ips[i] = "127.0.0." + strconv.Itoa(i+1)
	}
	return ips
}

// logUntil logs info entries and an err one per round, and syncs, until cond holds.
func logUntil(t *testing.T, core *Core, what string, cond func() bool) {
	t.Helper()
	logger := zap.New(core)
	i := 0
	testkit.WaitUntil(t, what, func() bool {
		for range 200 {
			logger.Info("spread", zap.Int("i", i))
			i++
		}
		logger.Error("err", zap.Int("i", i))
		_ = core.Sync()
		return cond()
	})
}

// connsTo counts the stream connections of core (both streams) open to target, one of
// its names' addresses.
func connsTo(core *Core, target string) int {
	n := 0
	for _, st := range core.sink.streams {
		for _, snd := range st.Senders {
			if snd.Forwarder().Target() == target {
				n++
			}
		}
	}
	return n
}

// sendingOn returns how many connections the info stream of core sends on: 1 while a
// name's first lookup is under way, then one per server it found (Info.Connections 0).
func sendingOn(core *Core) int { return len(core.sink.streams[infoStream].Senders.Sending()) }

// received is the entries of every receiver.
func received(rs ...*forwardtest.Receiver) int {
	n := 0
	for _, r := range rs {
		n += r.Len()
	}
	return n
}

// With several servers and no other setting, the info stream has one connection on each
// server that is not a standby, and every one of them takes entries; the standby none; the
// err stream one connection.
func TestDefaultConfigSpreadsOverEveryServer(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) }) // last: after the receivers' cleanups
	var rs []*forwardtest.Receiver
	var servers []Server
	for i := range 5 {
		r := forwardtest.NewReceiver(t, forwardtest.WithLogf(nil))
		rs = append(rs, r)
		servers = append(servers, Server{Addr: r.Addr(), Standby: i == 4})
	}
	core := New(Config{Servers: servers, Metrics: MetricsConfig{Registerer: prometheus.NewRegistry()}})
	t.Cleanup(func() { _ = core.Close() })
	if n := len(core.sink.streams[infoStream].Senders); n != 4 {
		t.Fatalf("info connections %d, want 4 (one per regular server)", n)
	}
	logUntil(t, core, "every regular server takes info entries on a connection of its own", func() bool {
		st := core.Stats().Info
		for i := range 4 {
			if st.Servers[i].Connections != 1 || rs[i].Len() == 0 {
				return false
			}
		}
		return true
	})
	st := core.Stats()
	if st.Info.Servers[4].Connections != 0 || rs[4].Len() != 0 {
		t.Errorf("the standby took %d connections and %d entries while every server was up", st.Info.Servers[4].Connections, rs[4].Len())
	}
	conns := 0
	for _, s := range st.Err.Servers {
		conns += s.Connections
	}
	if conns != 1 {
		t.Errorf("err connections %d, want 1", conns)
	}
	// One server: one connection, as before.
	one := New(Config{Addr: rs[0].Addr(), Metrics: MetricsConfig{Registerer: prometheus.NewRegistry()}})
	t.Cleanup(func() { _ = one.Close() })
	if n := len(one.sink.streams[infoStream].Senders); n != 1 {
		t.Fatalf("one server: %d info connections, want 1", n)
	}
}

// A name with four addresses is four servers: one connection on each. An address that
// leaves the name loses its connection at the next lookup (Transport.ResolveInterval on the core's
// clock), in good order, with nothing counted delivered that its receiver did not get; an
// address that comes back gets a connection again.
func TestEveryAddressOfANameIsFollowed(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) }) // last: after the receivers' cleanups
	port, rs := forwardtest.NewFleet(t, 4)
	res := &fleetResolver{}
	res.set("fleet.test", fleetIPs(4)...)
	clock := testkit.NewManualClock(time.Unix(1_700_000_000, 0))
	core := NewWithClock(Config{Addr: "tcp://fleet.test:" + port, Transport: TransportConfig{Resolver: res}, Metrics: MetricsConfig{Registerer: prometheus.NewRegistry()}}, clock)
	t.Cleanup(func() { _ = core.Close() })
	testkit.WaitUntil(t, "the first lookup counts 4 info connections, one per address", func() bool { return sendingOn(core) == 4 })
	logUntil(t, core, "each address takes entries", func() bool {
		for _, r := range rs {
			if r.Len() == 0 {
				return false
			}
		}
		return core.Stats().Info.Servers[0].Connections == 4
	})

	// 127.0.0.4 leaves the name (its receiver still up, as a pod being drained).
	res.set("fleet.test", fleetIPs(3)...)
	clock.Add(DefaultResolveInterval)
	gone := "127.0.0.4:" + port
	logUntil(t, core, "no connection left on the address that left", func() bool {
		return connsTo(core, gone) == 0 && core.Stats().Info.Servers[0].Connections == 4
	})
	last := rs[3].Len()
	before := [3]int{rs[0].Len(), rs[1].Len(), rs[2].Len()}
	logUntil(t, core, "the other three take the stream", func() bool {
		return rs[0].Len() > before[0] && rs[1].Len() > before[1] && rs[2].Len() > before[2] && rs[3].Len() == last
	})

	// It comes back.
	res.set("fleet.test", fleetIPs(4)...)
	clock.Add(DefaultResolveInterval)
	logUntil(t, core, "the address that came back takes entries again", func() bool { return connsTo(core, gone) == 1 && rs[3].Len() > last })

	if err := core.Close(); err != nil {
		t.Fatal(err)
	}
	st := core.Stats()
	identityHolds(t, st)
	// Written is not yet read: the receivers get what the core counted delivered, soon.
	testkit.WaitUntil(t, "the receivers to have every entry counted delivered", func() bool {
		return uint64(received(rs...)) == st.Info.Delivered+st.Err.Delivered
	})
}

// srvFleet is a Resolver whose SRV name answers with the records the test set.
type srvFleet struct {
	fleetResolver
	recs []*net.SRV
}

func (r *srvFleet) LookupSRV(_ context.Context, service, proto, name string) (string, []*net.SRV, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if name != "_fluentd._tcp.fleet.test" || len(r.recs) == 0 {
		return "", nil, errors.New("no such host " + name)
	}
	return name, r.recs, nil
}

// An srv:// server is its SRV targets, with the records' weights: 20:10:10 gives the info
// stream four connections, two, one and one. The entries follow the connections only as
// closely as the connections' paces agree (the senders take batches as they come), so their
// shares are logged, not checked.
func TestSRVWeightsAreFollowed(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
	var rs []*forwardtest.Receiver
	res := &srvFleet{}
	for _, w := range []uint16{20, 10, 10} {
		r := forwardtest.NewReceiver(t, forwardtest.WithLogf(nil))
		rs = append(rs, r)
		_, port, _ := net.SplitHostPort(strings.TrimPrefix(r.Addr(), "tcp://"))
		p, _ := strconv.Atoi(port)
		res.recs = append(res.recs, &net.SRV{Target: "127.0.0.1.", Port: uint16(p), Priority: 1, Weight: w})
	}
	core := New(Config{Addr: "srv://_fluentd._tcp.fleet.test", Transport: TransportConfig{Resolver: res}, Metrics: MetricsConfig{Registerer: prometheus.NewRegistry()}})
	t.Cleanup(func() { _ = core.Close() })
	testkit.WaitUntil(t, "the first lookup counts 4 info connections (weights 2:1:1)", func() bool { return sendingOn(core) == 4 })
	target := func(r *forwardtest.Receiver) string { return strings.TrimPrefix(r.Addr(), "tcp://") }
	logUntil(t, core, "connections 2, 1 and 1 by weight", func() bool {
		return connsTo(core, target(rs[0])) >= 2 && connsTo(core, target(rs[1])) >= 1 && connsTo(core, target(rs[2])) >= 1
	})
	logger := zap.New(core)
	for i := range 50_000 {
		logger.Info("weighted", zap.Int("i", i))
	}
	if err := core.Close(); err != nil {
		t.Fatal(err)
	}
	st := core.Stats()
	testkit.WaitUntil(t, "every entry delivered arrives", func() bool { return uint64(received(rs...)) == st.Info.Delivered+st.Err.Delivered })
	total := float64(received(rs...))
	for i, want := range []float64{0.5, 0.25, 0.25} {
		t.Logf("target %d: %.3f of the entries (weight share %.2f)", i, float64(rs[i].Len())/total, want)
	}
}

// An srv:// server with a Resolver that cannot look SRV records up is a Validate error.
func TestSRVNeedsLookupSRV(t *testing.T) {
	if err := (Config{Addr: "srv://_fluentd._tcp.fleet.test", Transport: TransportConfig{Resolver: &fleetResolver{}}}).Validate(); err == nil || !strings.Contains(err.Error(), "LookupSRV") {
		t.Fatalf("Validate: %v, want the missing LookupSRV", err)
	}
	if err := (Config{Addr: "srv://_fluentd._tcp.fleet.test"}).Validate(); err != nil {
		t.Fatalf("Validate with net.DefaultResolver: %v", err)
	}
}

// hangingResolver answers only when its context ends.
type hangingResolver struct{}

func (hangingResolver) LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// New never waits on a lookup, whatever the resolver does: with one that does not answer
// (not even when its context ends), New returns at once, for a name and for several; the
// connections wait for the first lookup, not the caller, and deliver once it answers. With
// a resolver that never answers, what was logged is counted at Close as not delivered.
func TestNewNeverWaitsOnALookup(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
	r := forwardtest.NewReceiver(t, forwardtest.WithLogf(nil))
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(r.Addr(), "tcp://"))
	blocked := testkit.NewResolver()
	blocked.Set("late.test", "127.0.0.1")
	release := blocked.Hold()
	var several []Server
	for _, h := range []string{"localhost", "a.invalid", "b.invalid", "c.invalid"} {
		several = append(several, Server{Addr: "tcp://" + h + ":" + port})
	}
	var cores []*Core
	for _, cfg := range []Config{{Addr: "tcp://late.test:" + port}, {Servers: several, Timeouts: TimeoutsConfig{Close: time.Second}}} {
		cfg.Transport.Resolver, cfg.Metrics.Registerer = blocked, prometheus.NewRegistry()
		start := time.Now()
		core := New(cfg)
		took := time.Since(start)
		t.Cleanup(func() { _ = core.Close() })
		t.Cleanup(release) // first: Close waits for the lookup under way
		if took > 100*time.Millisecond {
			t.Fatalf("New took %v with a resolver that does not answer (servers %v)", took, cfg.Servers)
		}
		cores = append(cores, core)
	}
	zap.New(cores[0]).Info("once the resolver answers")
	release()
	if err := cores[0].Sync(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, "the entry sent to the address the resolver gave", func() bool { return r.Len() == 1 })

	// A call's own cost: the fastest of several New calls with a resolver that never
	// answers is no slower than with an address to dial as it is (a wait on the lookup would
	// be its whole bound). Most of it is allocating the buffers, which the race detector
	// slows several times, and the name's lookup goroutine with it: without it, the bound is
	// 2ms more than with the address; with it, twice the address's and 2ms more (a wait on
	// the lookup would still have no bound). The two kinds of call take turns, so that the
	// machine's drift falls on both; how long the address's takes is the machine's, not
	// this test's.
	newTook := func(addr string) time.Duration {
		start := time.Now()
		c := New(Config{Addr: addr, Transport: TransportConfig{Resolver: hangingResolver{}}, Metrics: MetricsConfig{Disabled: true}, Timeouts: TimeoutsConfig{Close: time.Millisecond}, Spill: SpillConfig{Fallback: io.Discard}})
		took := time.Since(start)
		_ = c.Close()
		return took
	}
	named, literal := time.Hour, time.Hour
	for range 9 {
		named = min(named, newTook("tcp://never.test:"+port))
		literal = min(literal, newTook("tcp://127.0.0.1:"+port))
	}
	if testkit.Race && named > 2*literal+2*time.Millisecond {
		t.Errorf("New took at least %v in 9 calls with a resolver that never answers (%v with an IP address); want at most twice that and 2ms more under the race detector", named, literal)
	}
	if !testkit.Race && named > literal+2*time.Millisecond {
		t.Errorf("New took at least %v in 9 calls with a resolver that never answers (%v with an IP address); want at most 2ms more", named, literal)
	}

	never := New(Config{Addr: "tcp://never.test:" + port, Transport: TransportConfig{Resolver: hangingResolver{}}, Metrics: MetricsConfig{Registerer: prometheus.NewRegistry()}, Timeouts: TimeoutsConfig{Close: 200 * time.Millisecond}, Spill: SpillConfig{Fallback: io.Discard}})
	logger := zap.New(never)
	for i := range 10 {
		logger.Info("never delivered", zap.Int("i", i))
	}
	_ = never.Close()
	st := never.Stats()
	identityHolds(t, st)
	if st.Info.Entries != 10 || st.Info.Delivered != 0 || st.Info.DroppedTotal() != 10 {
		t.Fatalf("info: %d entries, %d delivered, dropped %v; want the 10 counted as not delivered", st.Info.Entries, st.Info.Delivered, st.Info.Dropped)
	}
}
