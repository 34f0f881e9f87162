package dial

import (
	"cmp"
	"crypto/tls"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// Server is a test's shorthand for NewEndpoint's arguments.
type Server struct {
	Addr    string
	Weight  int
	Standby bool
}

func constantBackOff(d time.Duration) func() backoff.BackOff {
	return func() backoff.BackOff { return backoff.NewConstantBackOff(d) }
}

func eps(servers ...Server) []Endpoint {
	out := make([]Endpoint, len(servers))
	for i, s := range servers {
		ep, err := NewEndpoint(s.Addr, cmp.Or(s.Weight, 60), s.Standby, nil) // 60: the root's default
		if err != nil {
			panic(err)
		}
		out[i] = ep
	}
	return out
}

func counts(b *Balancer, now time.Time, picks int) []int {
	c := make([]int, len(b.nodes))
	for range picks {
		c[b.Pick(now, nil)]++
	}
	return c
}

// newBalancer is a balancer with a health of its own.
func newBalancer(eps []Endpoint, newBackOff func() backoff.BackOff) *Balancer {
	return NewBalancer(eps, NewHealth(len(eps), newBackOff))
}

var t0 = time.Unix(1_700_000_000, 0)

func TestBalancerWeightedRoundRobin(t *testing.T) {
	b := newBalancer(eps(Server{Addr: "a:1", Weight: 30}, Server{Addr: "b:1", Weight: 10}, Server{Addr: "c:1"}), constantBackOff(time.Second))
	// Weight 0 means 60: shares 30:10:60 of every 100 picks, exactly.
	if got := counts(b, t0, 100); got[0] != 30 || got[1] != 10 || got[2] != 60 {
		t.Fatalf("picks per server = %v, want [30 10 60]", got)
	}
	// Smooth: the heaviest server never takes more than two picks in a row here.
	run, last := 0, -1
	for range 100 {
		i := b.Pick(t0, nil)
		if i == last {
			run++
		} else {
			run, last = 1, i
		}
		if run > 2 {
			t.Fatalf("server %d picked %d times in a row", i, run)
		}
	}
}

func TestBalancerSkipsDownServersUntilTheirBackoffPasses(t *testing.T) {
	b := newBalancer(eps(Server{Addr: "a:1"}, Server{Addr: "b:1"}), constantBackOff(time.Second))
	b.MarkDown(0, t0)
	if got := counts(b, t0.Add(999*time.Millisecond), 10); got[0] != 0 || got[1] != 10 {
		t.Fatalf("while a is down: %v, want all on b", got)
	}
	// Due again: a takes its share while still marked down, until it delivers.
	if got := counts(b, t0.Add(time.Second), 10); got[0] != 5 || got[1] != 5 {
		t.Fatalf("once a is due: %v, want [5 5]", got)
	}
	if !b.IsDown(0) {
		t.Fatal("a marked up without a delivery")
	}
	b.MarkUp(0, t0.Add(time.Second)) // a connection opened once a was due
	if b.IsDown(0) {
		t.Fatal("markUp did not mark a up")
	}
}

func TestBalancerBackoffGrowsAndResets(t *testing.T) {
	b := newBalancer(eps(Server{Addr: "a:1"}, Server{Addr: "b:1"}), func() backoff.BackOff { return NewBackOff(100*time.Millisecond, time.Second) })
	now := t0
	var waits []time.Duration
	for range 10 { // each retry, when due, fails again
		b.MarkDown(0, now)
		waits = append(waits, b.servers[0].retryAt.Sub(now))
		now = b.servers[0].retryAt
	}
	// Exponential (×1.5) with ±50% jitter: the first wait is within [50ms, 150ms]; the
	// tenth (100ms × 1.5⁹ > 1s) is at the 1s ceiling, within jitter.
	if waits[0] < 50*time.Millisecond || waits[0] > 150*time.Millisecond {
		t.Errorf("first wait %v outside [50ms, 150ms]", waits[0])
	}
	if waits[9] < 500*time.Millisecond || waits[9] > 1500*time.Millisecond {
		t.Errorf("tenth wait %v outside [0.5s, 1.5s]", waits[9])
	}
	b.MarkUp(0, now)
	b.MarkDown(0, now)
	if w := b.servers[0].retryAt.Sub(now); w > 150*time.Millisecond {
		t.Errorf("wait after a delivery reset = %v, want at most 150ms", w)
	}
}

func TestBalancerStandby(t *testing.T) {
	b := newBalancer(eps(Server{Addr: "a:1"}, Server{Addr: "b:1", Weight: 10}, Server{Addr: "s:1", Standby: true}), constantBackOff(time.Second))
	if got := counts(b, t0, 70); got[2] != 0 {
		t.Fatalf("standby used while primaries are up: %v", got)
	}
	if b.ShouldMove(0, 0, t0) {
		t.Fatal("a primary connection should never make way")
	}
	b.MarkDown(0, t0)
	if got := counts(b, t0, 10); got[1] != 10 {
		t.Fatalf("one primary down: %v, want all on b", got)
	}
	b.MarkDown(1, t0)
	if got := counts(b, t0, 10); got[2] != 10 {
		t.Fatalf("both primaries down: %v, want all on the standby", got)
	}
	if b.ShouldMove(2, 0, t0.Add(500*time.Millisecond)) {
		t.Fatal("standby connection left before a primary is due")
	}
	if !b.ShouldMove(2, 0, t0.Add(time.Second)) {
		t.Fatal("standby connection kept although a primary is due")
	}
}

func TestBalancerAllDownAndExclusions(t *testing.T) {
	b := newBalancer(eps(Server{Addr: "a:1"}, Server{Addr: "b:1"}), constantBackOff(time.Second))
	b.MarkDown(1, t0)
	b.MarkDown(0, t0.Add(10*time.Millisecond))
	// Nobody is due: the one due first is returned, so a lone server is always tried.
	if i := b.Pick(t0.Add(20*time.Millisecond), nil); i != 1 {
		t.Fatalf("all down: picked %d, want 1 (due first)", i)
	}
	if i := b.Pick(t0.Add(20*time.Millisecond), []bool{false, true}); i != 0 {
		t.Fatalf("all down, 1 excluded: picked %d, want 0", i)
	}
	if i := b.Pick(t0, []bool{true, true}); i != -1 {
		t.Fatalf("all excluded: picked %d, want -1", i)
	}
	one := newBalancer(eps(Server{Addr: "a:1"}), constantBackOff(time.Hour))
	one.MarkDown(0, t0)
	if i := one.Pick(t0, nil); i != 0 {
		t.Fatalf("single server down: picked %d, want 0", i)
	}
}

func TestEndpointTLSServerName(t *testing.T) {
	base := &tls.Config{MinVersion: tls.VersionTLS13}
	ep, err := NewEndpoint("tls://logs.example.com:24224", 0, false, base)
	if err != nil {
		t.Fatal(err)
	}
	if ep.TLS == base || ep.TLS.ServerName != "logs.example.com" || ep.TLS.MinVersion != tls.VersionTLS13 {
		t.Fatalf("tls config %+v", ep.TLS)
	}
	if base.ServerName != "" {
		t.Fatal("Config.TLS modified")
	}
	if _, err := NewEndpoint("a:1", -1, false, nil); err == nil {
		t.Fatal("negative weight accepted")
	}
}

// TestHealthIsSharedByAStreamsConnections: a server that fails on one connection is down for
// every balancer sharing the health, and the other connections' failures in the same
// outage do not lengthen its wait; once it is due, a failed retry does.
func TestHealthIsSharedByAStreamsConnections(t *testing.T) {
	servers := eps(Server{Addr: "a:1"}, Server{Addr: "b:1"})
	h := NewHealth(len(servers), func() backoff.BackOff { return NewBackOff(100*time.Millisecond, 10*time.Second) })
	one, two := NewBalancer(servers, h), NewBalancer(servers, h)
	one.MarkDown(0, t0)
	due := h.servers[0].retryAt
	for range 100 {
		if i := two.Pick(t0, nil); i != 1 {
			t.Fatalf("the other connection picked server %d while a is down, want b (1)", i)
		}
	}
	// Three more connections see the same outage before it is due: the wait stays.
	for range 3 {
		two.MarkDown(0, t0.Add(10*time.Millisecond))
	}
	if h.servers[0].retryAt != due {
		t.Fatalf("a's retry moved from %v to %v by failures within the same outage", due.Sub(t0), h.servers[0].retryAt.Sub(t0))
	}
	if !two.Available(0, due) {
		t.Fatal("a is not available to the other connection once due")
	}
	// The retry, when due, fails: that is a new failure, and a's next try is at least the
	// second interval's low end (150ms - 50 % jitter = 75ms) after it.
	two.MarkDown(0, due)
	if h.servers[0].retryAt.Before(due.Add(75 * time.Millisecond)) {
		t.Fatalf("a failed retry at %v set the next at %v, want at least 75ms later", due.Sub(t0), h.servers[0].retryAt.Sub(t0))
	}
	// A connection opened before that failure delivers (the receiver acks on the
	// connections it has, and refuses new ones): a stays down. One opened after it brings a
	// back up for every connection.
	one.MarkUp(0, due.Add(-time.Millisecond))
	if !two.IsDown(0) {
		t.Fatal("a delivery on a connection older than a's last failure brought a back up")
	}
	one.MarkUp(0, due.Add(time.Millisecond))
	if two.IsDown(0) {
		t.Fatal("a delivery on a connection opened after a's failure did not bring a back up for the other")
	}
}

// RetryMax is a bound: the jitter spreads the waits below max, never above it, and still
// spreads them (some waits at the top are well under max, some near it).
func TestBackOffNeverWaitsPastMax(t *testing.T) {
	const lo, hi = 10 * time.Millisecond, time.Second
	b := NewBackOff(lo, hi)
	var nearMax, underHalf bool
	for i := range 2000 {
		d := b.NextBackOff()
		if d > hi {
			t.Fatalf("wait %d is %v, past max %v", i, d, hi)
		}
		if i > 50 { // at the top of the schedule
			nearMax = nearMax || d > 9*hi/10
			underHalf = underHalf || d < 7*hi/10
		}
	}
	if !nearMax || !underHalf {
		t.Errorf("no jitter at the top: a wait near max %v, one well under it %v", nearMax, underHalf)
	}
	b.Reset()
	if d := b.NextBackOff(); d > 2*lo {
		t.Errorf("after Reset the first wait is %v, want about %v", d, lo)
	}
}
