package fluentcore

import (
	"context"
	"errors"
	"fmt"
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

// loopbackFleet starts n receivers on one port of 127.0.0.1, 127.0.0.2, ...: the pods
// behind one name. It returns the port and the receivers (the i-th on 127.0.0.(i+1)).
func loopbackFleet(t *testing.T, n int, opts ...forwardtest.Option) (string, []*forwardtest.Receiver) {
	t.Helper()
	for try := 0; try < 20; try++ {
		first, err := forwardtest.Start(append(opts, forwardtest.WithAddr("127.0.0.1:0"), forwardtest.WithLogf(nil))...)
		if err != nil {
			t.Fatal(err)
		}
		_, port, err := net.SplitHostPort(strings.TrimPrefix(first.Addr(), "tcp://"))
		if err != nil {
			t.Fatal(err)
		}
		rs := []*forwardtest.Receiver{first}
		for i := 2; i <= n; i++ {
			r, err := forwardtest.Start(append(opts, forwardtest.WithAddr(fmt.Sprintf("127.0.0.%d:%s", i, port)), forwardtest.WithLogf(nil))...)
			if err != nil {
				break // the port is taken there: another try
			}
			rs = append(rs, r)
		}
		if len(rs) == n {
			t.Cleanup(func() {
				for _, r := range rs {
					_ = r.Close()
				}
			})
			return port, rs
		}
		for _, r := range rs {
			_ = r.Close()
		}
	}
	t.Fatal("no port free on every loopback address")
	return "", nil
}

// fleetIPs returns the loopback addresses of the first n receivers of loopbackFleet.
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
		for _, snd := range st.senders {
			if i := snd.fwd.server.Load(); i >= 0 {
				if tg, _ := snd.fwd.bal.Target(int(i)); tg == target {
					n++
				}
			}
		}
	}
	return n
}

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
	core := New(Config{Servers: servers, Registerer: prometheus.NewRegistry()})
	t.Cleanup(func() { _ = core.Close() })
	if n := len(core.sink.streams[infoStream].senders); n != 4 {
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
	one := New(Config{Addr: rs[0].Addr(), Registerer: prometheus.NewRegistry()})
	t.Cleanup(func() { _ = one.Close() })
	if n := len(one.sink.streams[infoStream].senders); n != 1 {
		t.Fatalf("one server: %d info connections, want 1", n)
	}
}

// A name with four addresses is four servers: one connection on each. An address that
// leaves the name loses its connection at the next lookup (ResolveInterval on the core's
// clock), in good order, with nothing counted delivered that its receiver did not get; an
// address that comes back gets a connection again.
func TestEveryAddressOfANameIsFollowed(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) }) // last: after the receivers' cleanups
	port, rs := loopbackFleet(t, 4)
	res := &fleetResolver{}
	res.set("fleet.test", fleetIPs(4)...)
	clock := &manualClock{now: time.Unix(1_700_000_000, 0)}
	core := NewWithClock(Config{Addr: "tcp://fleet.test:" + port, Resolver: res, Registerer: prometheus.NewRegistry()}, clock)
	t.Cleanup(func() { _ = core.Close() })
	if n := len(core.sink.streams[infoStream].senders); n != 4 {
		t.Fatalf("info connections %d, want 4 (one per address)", n)
	}
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
	clock.add(DefaultResolveInterval)
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
	clock.add(DefaultResolveInterval)
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
	core := New(Config{Addr: "srv://_fluentd._tcp.fleet.test", Resolver: res, Registerer: prometheus.NewRegistry()})
	t.Cleanup(func() { _ = core.Close() })
	if n := len(core.sink.streams[infoStream].senders); n != 4 {
		t.Fatalf("info connections %d, want 4 (weights 2:1:1)", n)
	}
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
	if err := (Config{Addr: "srv://_fluentd._tcp.fleet.test", Resolver: &fleetResolver{}}).Validate(); err == nil || !strings.Contains(err.Error(), "LookupSRV") {
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

// lateResolver answers as res does once release is closed, and until then only when its
// context ends.
type lateResolver struct {
	release chan struct{}
	res     *tableResolver
}

func (r lateResolver) LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error) {
	select {
	case <-r.release:
		return r.res.LookupIPAddr(ctx, host)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// New waits for a resolver that does not answer at most lookupTimeout (once, for the info
// stream); the connections then look the name up through the resolver as they dial, and
// deliver once it answers.
func TestNewWaitsForTheFirstLookupAtMostASecond(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
	r := forwardtest.NewReceiver(t, forwardtest.WithLogf(nil))
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(r.Addr(), "tcp://"))
	late := lateResolver{release: make(chan struct{}), res: newTableResolver()}
	late.res.set("late.test", "127.0.0.1")
	start := time.Now()
	core := New(Config{Addr: "tcp://late.test:" + port, Resolver: late, Registerer: prometheus.NewRegistry()})
	took := time.Since(start)
	t.Cleanup(func() { _ = core.Close() })
	if took > lookupTimeout+time.Second { // slack for a loaded machine
		t.Fatalf("New took %v with a resolver that never answers; the bound is %v", took, lookupTimeout)
	}
	close(late.release)
	zap.New(core).Info("once the resolver answers")
	if err := core.Sync(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, "the entry sent to the address the resolver gave", func() bool { return r.Len() == 1 })

	// Several names are looked up at once, under one deadline: New still waits at most
	// lookupTimeout, not one per name.
	var servers []Server
	for _, h := range []string{"localhost", "a.invalid", "b.invalid", "c.invalid"} {
		servers = append(servers, Server{Addr: "tcp://" + h + ":" + port})
	}
	start = time.Now()
	several := New(Config{Servers: servers, Resolver: hangingResolver{}, Registerer: prometheus.NewRegistry(), CloseTimeout: time.Second})
	took = time.Since(start)
	t.Cleanup(func() { _ = several.Close() })
	if took > lookupTimeout+time.Second {
		t.Fatalf("New took %v with four names and a resolver that never answers; the bound is %v, for all of them", took, lookupTimeout)
	}
}
