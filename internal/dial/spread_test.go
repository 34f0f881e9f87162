package dial

import (
	"context"
	"errors"
	"net"
	"slices"
	"sync"
	"testing"
	"time"
)

// take has n connections take servers, and returns how many each server got.
func take(b *Balancer, now time.Time, n int) []int {
	c := make([]int, len(b.nodes))
	for range n {
		c[b.Take(now, nil)]++
	}
	return c
}

// A stream's connections spread over the servers by weight, one per server when there
// are as many as servers; standbys take none while a regular server is up.
func TestTakeSpreadsConnectionsByWeight(t *testing.T) {
	b := newBalancer(eps(Server{Addr: "a:1"}, Server{Addr: "b:1"}, Server{Addr: "c:1"}, Server{Addr: "d:1"}, Server{Addr: "s:1", Standby: true}), constantBackOff(time.Second))
	if got := take(b, t0, 4); !slices.Equal(got, []int{1, 1, 1, 1, 0}) {
		t.Fatalf("4 connections over 4 servers and a standby: %v, want one on each regular server", got)
	}
	w := newBalancer(eps(Server{Addr: "a:1", Weight: 60}, Server{Addr: "b:1", Weight: 30}), constantBackOff(time.Second))
	if got := take(w, t0, 3); !slices.Equal(got, []int{2, 1}) {
		t.Fatalf("3 connections over weights 60:30: %v, want [2 1]", got)
	}
}

// One connection that reconnects again and again (released each time) goes round the
// servers by weight, as Pick does: the err stream's, or a receiver that closes after each
// request.
func TestTakeOfOneConnectionGoesRoundByWeight(t *testing.T) {
	b := newBalancer(eps(Server{Addr: "a:1", Weight: 40}, Server{Addr: "b:1", Weight: 20}), constantBackOff(time.Second))
	c := []int{0, 0}
	for range 30 {
		i := b.Take(t0, nil)
		c[i]++
		b.Release(i)
	}
	if c[0] != 20 || c[1] != 10 {
		t.Fatalf("30 reconnections over weights 40:20: %v, want [20 10]", c)
	}
}

// A server that fails loses its connection to the others; once it is due again, one
// connection of the server that took two moves back, and a lone connection never moves
// for the load.
func TestShouldMoveBringsAReturningServerItsShare(t *testing.T) {
	b := newBalancer(eps(Server{Addr: "a:1"}, Server{Addr: "b:1"}), constantBackOff(time.Second))
	if got := take(b, t0, 2); !slices.Equal(got, []int{1, 1}) {
		t.Fatalf("%v", got)
	}
	b.Release(1)
	b.MarkDown(1, t0)
	if i := b.Take(t0, nil); i != 0 {
		t.Fatalf("with b down the connection went to %d, want a (0)", i)
	}
	if b.ShouldMove(0, 0, t0.Add(500*time.Millisecond)) {
		t.Fatal("a connection moved towards b before b is due")
	}
	if !b.ShouldMove(0, 0, t0.Add(time.Second)) {
		t.Fatal("a has two connections and b is due: none moves")
	}
	if i := b.Take(t0.Add(time.Second), nil); i != 1 {
		t.Fatalf("the moving connection took %d, want b (1)", i)
	}
	b.Release(0)
	if b.ShouldMove(0, 0, t0.Add(time.Second)) || b.ShouldMove(1, 0, t0.Add(time.Second)) {
		t.Fatal("one connection on each server, and one still moves")
	}
	lone := newBalancer(eps(Server{Addr: "a:1", Weight: 30}, Server{Addr: "b:1", Weight: 60}), constantBackOff(time.Second))
	lone.Take(t0, []bool{false, true}) // on a, the lighter one
	if lone.ShouldMove(0, 0, t0) {
		t.Fatal("a lone connection moved for the load")
	}
}

// fakeResolver answers from a table that the test changes; it counts lookups.
type fakeResolver struct {
	mu      sync.Mutex
	addrs   map[string][]string
	lookups int
}

func (r *fakeResolver) set(host string, ips ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.addrs[host] = ips
}

func (r *fakeResolver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lookups
}

func (r *fakeResolver) LookupIPAddr(_ context.Context, host string) ([]net.IPAddr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lookups++
	ips, ok := r.addrs[host]
	if !ok {
		return nil, errors.New("no such host")
	}
	out := make([]net.IPAddr, len(ips))
	for i, ip := range ips {
		out[i] = net.IPAddr{IP: net.ParseIP(ip)}
	}
	return out, nil
}

// targetsOf returns the addresses the active slots of h dial, sorted.
func targetsOf(b *Balancer) []string {
	var ts []string
	for i := range b.nodes {
		if t, gen := b.Target(i); !b.Gone(i, gen) {
			ts = append(ts, t)
		}
	}
	slices.Sort(ts)
	return ts
}

// A name with several addresses is that many servers; a lookup that drops one leaves its
// slot (its connection moves), one that adds one fills a free slot; a failed lookup
// changes nothing; a single address is a server as each of several is, in the slot it
// had; IPv4 is preferred.
func TestNameAddressesAreFollowed(t *testing.T) {
	servers := Expand(eps(Server{Addr: "fleet.test:24224"}, Server{Addr: "10.9.9.9:24224"}), 4)
	if len(servers) != 5 || servers[0].Slots != 4 || servers[4].Slots != 1 || servers[4].First != 4 {
		t.Fatalf("Expand: %+v", servers)
	}
	r := &fakeResolver{addrs: map[string][]string{}}
	r.set("fleet.test", "10.0.0.3", "10.0.0.1", "10.0.0.2", "fd00::1")
	h := NewHealth(len(servers), constantBackOff(time.Second))
	h.Track(servers, r, 30*time.Second, time.Second)
	b := NewBalancer(servers, h)
	if got := targetsOf(b); !slices.Equal(got, []string{"", ""}) {
		t.Fatalf("before the first lookup: %q, want the name and the IP server, dialed as configured", got)
	}
	h.Refresh(t0)
	<-h.Looked()
	want := []string{"", "10.0.0.1:24224", "10.0.0.2:24224", "10.0.0.3:24224"}
	if got := targetsOf(b); !slices.Equal(got, want) {
		t.Fatalf("after the lookup: %q, want %q (IPv4 only)", got, want)
	}
	if n := h.Spread(servers, 8); n != 4 {
		t.Fatalf("Spread = %d, want 4 (3 addresses and the IP server)", n)
	}
	gone := -1
	for i := range 4 {
		if tg, _ := b.Target(i); tg == "10.0.0.2:24224" {
			gone = i
		}
	}
	_, gen := b.Target(gone)

	// Not due yet: nothing looked up.
	r.set("fleet.test", "10.0.0.1", "10.0.0.3", "10.0.0.4")
	n := r.count()
	h.Refresh(t0.Add(29 * time.Second))
	h.names.wg.Wait() // for a lookup, if one was started: there must be none
	if r.count() != n {
		t.Fatal("looked up before the period passed")
	}

	h.Refresh(t0.Add(30 * time.Second))
	h.names.wg.Wait()
	want = []string{"", "10.0.0.1:24224", "10.0.0.3:24224", "10.0.0.4:24224"}
	if got := targetsOf(b); !slices.Equal(got, want) {
		t.Fatalf("after the address changed: %q, want %q", got, want)
	}
	if !b.Gone(gone, gen) || !b.ShouldMove(gone, gen, t0.Add(30*time.Second)) {
		t.Fatal("a connection to the address that left is not told to move")
	}

	// A failed lookup keeps the addresses; a failure asks for a lookup sooner, at most
	// every MinLookupGap.
	r.mu.Lock()
	delete(r.addrs, "fleet.test")
	r.mu.Unlock()
	b.MarkDown(0, t0.Add(31*time.Second))
	h.Refresh(t0.Add(30*time.Second + MinLookupGap/2))
	h.names.wg.Wait()
	n = r.count()
	h.Refresh(t0.Add(30*time.Second + MinLookupGap))
	h.names.wg.Wait()
	if r.count() != n+1 {
		t.Fatal("a failure did not bring the next lookup forward")
	}
	if got := targetsOf(b); !slices.Equal(got, want) {
		t.Fatalf("after a failed lookup: %q, want %q kept", got, want)
	}

	// Down to one address: it keeps its slot (its connections stay), the others leave.
	stays := -1
	for i := range 4 {
		if tg, _ := b.Target(i); tg == "10.0.0.3:24224" {
			stays = i
		}
	}
	_, gen = b.Target(stays)
	r.set("fleet.test", "10.0.0.3")
	h.Refresh(t0.Add(61 * time.Second))
	h.names.wg.Wait()
	if got := targetsOf(b); !slices.Equal(got, []string{"", "10.0.0.3:24224"}) {
		t.Fatalf("one address: %q, want it and the IP server", got)
	}
	if b.Gone(stays, gen) || b.ShouldMove(stays, gen, t0.Add(61*time.Second)) {
		t.Fatal("a connection to the address that stayed is told to move")
	}
	h.Close()
	h.Refresh(t0.Add(time.Hour))
	if r.count() != n+2 {
		t.Fatal("a lookup after Close")
	}
}

func TestTargetsPreferIPv4(t *testing.T) {
	ip := func(s ...string) []net.IPAddr {
		var out []net.IPAddr
		for _, a := range s {
			out = append(out, net.IPAddr{IP: net.ParseIP(a)})
		}
		return out
	}
	if got := targets(ip("::1", "127.0.0.1"), "1"); !slices.Equal(got, []string{"127.0.0.1:1"}) {
		t.Fatalf("localhost: %q, want its IPv4 address", got)
	}
	if got := targets(ip("fd00::2", "fd00::1"), "1"); !slices.Equal(got, []string{"[fd00::1]:1", "[fd00::2]:1"}) {
		t.Fatalf("IPv6 only: %q", got)
	}
	if got := targets(ip("10.0.0.1", "10.0.0.1", "10.0.0.2"), "1"); !slices.Equal(got, []string{"10.0.0.1:1", "10.0.0.2:1"}) {
		t.Fatalf("repeats: %q", got)
	}
}

// The default count of connections follows the weights when it can: 60:30 takes 3 (2 and
// 1), equal weights one each, and past the bound one per server, at most the bound.
func TestSpreadCountsConnectionsByWeight(t *testing.T) {
	for _, c := range []struct {
		servers []Server
		most    int
		want    int
	}{
		{[]Server{{Addr: "a:1"}}, 8, 1},
		{[]Server{{Addr: "a:1"}, {Addr: "b:1"}, {Addr: "c:1"}, {Addr: "d:1"}, {Addr: "s:1", Standby: true}}, 8, 4},
		{[]Server{{Addr: "a:1", Weight: 60}, {Addr: "b:1", Weight: 30}}, 8, 3},
		{[]Server{{Addr: "a:1", Weight: 60}, {Addr: "b:1", Weight: 60}, {Addr: "c:1", Weight: 60}, {Addr: "d:1", Weight: 30}}, 8, 7},
		{[]Server{{Addr: "a:1", Weight: 50}, {Addr: "b:1", Weight: 7}}, 8, 2},
		{[]Server{{Addr: "a:1"}, {Addr: "b:1"}, {Addr: "c:1"}}, 2, 2},
	} {
		e := eps(c.servers...)
		h := NewHealth(len(e), constantBackOff(time.Second))
		if got := h.Spread(e, c.most); got != c.want {
			t.Errorf("%+v, at most %d: %d connections, want %d", c.servers, c.most, got, c.want)
		}
		if c.want == 7 {
			b := NewBalancer(e, h)
			if got := take(b, t0, 7); !slices.Equal(got, []int{2, 2, 2, 1}) {
				t.Errorf("7 connections over 60:60:60:30: %v, want [2 2 2 1]", got)
			}
		}
	}
}

// srvResolver answers SRV lookups from a table the test changes.
type srvResolver struct {
	fakeResolver
	srv map[string][]*net.SRV
}

func (r *srvResolver) setSRV(name string, recs ...*net.SRV) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.srv[name] = recs
}

func (r *srvResolver) LookupSRV(_ context.Context, service, proto, name string) (string, []*net.SRV, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lookups++
	recs, ok := r.srv[name]
	if service != "" || proto != "" || !ok {
		return "", nil, errors.New("no such host")
	}
	return name, recs, nil
}

// An srv:// server is its SRV targets (RFC 2782): the lowest priority's are regular
// servers with the records' weights, the others standbys; none before the first lookup
// that answers, which is tried again every MinLookupGap until one does.
func TestSRVTargetsAreServers(t *testing.T) {
	ep, err := NewEndpoint("srv://_fluentd._tcp.logging.svc", 60, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"srv://", "srv://name:24224"} {
		if _, err := NewEndpoint(bad, 60, false, nil); err == nil {
			t.Errorf("NewEndpoint(%q) accepted", bad)
		}
	}
	servers := Expand([]Endpoint{ep}, 4)
	r := &srvResolver{fakeResolver: fakeResolver{addrs: map[string][]string{}}, srv: map[string][]*net.SRV{}}
	h := NewHealth(len(servers), constantBackOff(time.Second))
	h.Track(servers, r, 30*time.Second, time.Second)
	b := NewBalancer(servers, h)
	h.Refresh(t0)
	<-h.Looked() // nothing yet
	if got := targetsOf(b); len(got) != 0 {
		t.Fatalf("before an answer: %q, want no server", got)
	}
	if i := b.Take(t0, nil); i != -1 {
		t.Fatalf("Take with no server: %d, want -1", i)
	}
	r.setSRV("_fluentd._tcp.logging.svc",
		&net.SRV{Target: "a.logging.svc.", Port: 24224, Priority: 10, Weight: 20},
		&net.SRV{Target: "b.logging.svc.", Port: 24224, Priority: 10, Weight: 10},
		&net.SRV{Target: "c.logging.svc.", Port: 24225, Priority: 10, Weight: 10},
		&net.SRV{Target: "d.logging.svc.", Port: 24224, Priority: 20, Weight: 50})
	h.Refresh(t0.Add(MinLookupGap / 2)) // too soon after the last
	h.names.wg.Wait()
	if got := targetsOf(b); len(got) != 0 {
		t.Fatalf("looked up again within MinLookupGap: %q", got)
	}
	h.Refresh(t0.Add(MinLookupGap))
	h.names.wg.Wait()
	want := []string{"a.logging.svc:24224", "b.logging.svc:24224", "c.logging.svc:24225", "d.logging.svc:24224"}
	if got := targetsOf(b); !slices.Equal(got, want) {
		t.Fatalf("targets %q, want %q", got, want)
	}
	// Weights 20:10:10 among the regular three: 4 connections, 2, 1 and 1; d a standby.
	if n := h.Spread(servers, 8); n != 4 {
		t.Fatalf("Spread = %d, want 4 (weights 2:1:1)", n)
	}
	got := map[string]int{}
	for range 4 {
		tg, _ := b.Target(b.Take(t0, nil))
		got[tg]++
	}
	if got["a.logging.svc:24224"] != 2 || got["b.logging.svc:24224"] != 1 || got["c.logging.svc:24225"] != 1 {
		t.Fatalf("connections by target %v, want a 2, b 1, c 1 and the standby d none", got)
	}
}

// gatedResolver answers as its fakeResolver once open is closed, and until then only when
// its context ends.
type gatedResolver struct {
	*fakeResolver
	open chan struct{}
}

func (r gatedResolver) LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error) {
	select {
	case <-r.open:
		return r.fakeResolver.LookupIPAddr(ctx, host)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Looked is closed at once without a name; with one, once the first lookup has ended,
// whether it found addresses or failed, and a name counts as one server until then.
func TestLookedClosesOnceTheFirstLookupEnds(t *testing.T) {
	ips := Expand(eps(Server{Addr: "10.9.9.9:24224"}), 4)
	h := NewHealth(len(ips), constantBackOff(time.Second))
	h.Track(ips, &fakeResolver{addrs: map[string][]string{}}, 30*time.Second, time.Second)
	select {
	case <-h.Looked():
	default:
		t.Fatal("Looked not closed without a name to look up")
	}

	servers := Expand(eps(Server{Addr: "fleet.test:24224"}), 4)
	r := gatedResolver{&fakeResolver{addrs: map[string][]string{}}, make(chan struct{})}
	r.set("fleet.test", "10.0.0.1", "10.0.0.2")
	h = NewHealth(len(servers), constantBackOff(time.Second))
	h.Track(servers, r, 30*time.Second, time.Minute)
	h.Refresh(t0)
	select {
	case <-h.Looked():
		t.Fatal("Looked closed while the first lookup waits for its answer")
	case <-time.After(10 * time.Millisecond):
	}
	if n := h.Spread(servers, 8); n != 1 {
		t.Fatalf("Spread before the first lookup = %d, want 1 (the name as one server)", n)
	}
	close(r.open)
	<-h.Looked()
	if n := h.Spread(servers, 8); n != 2 {
		t.Fatalf("Spread after the first lookup = %d, want 2", n)
	}
	h.Refresh(t0.Add(time.Hour)) // a later lookup leaves Looked as it is
	h.Close()

	failed := &fakeResolver{addrs: map[string][]string{}} // no such host
	h = NewHealth(len(servers), constantBackOff(time.Second))
	h.Track(servers, failed, 30*time.Second, time.Second)
	h.Refresh(t0)
	<-h.Looked() // a failed lookup ends too
	h.Close()
}
