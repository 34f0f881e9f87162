package dial

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// NewBackOff returns a retry schedule: exponential from min to max, with jitter, never
// giving up. max is a bound: the jitter spreads a wait below it, never above (the
// exponential schedule alone would wait up to half as long again). Reset it after a
// success.
func NewBackOff(min, max time.Duration) backoff.BackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = min
	b.MaxInterval = max
	b.MaxElapsedTime = 0
	b.Reset()
	return capped{b, max}
}

// capped is a BackOff whose waits never pass max.
type capped struct {
	backoff.BackOff
	max time.Duration
}

func (c capped) NextBackOff() time.Duration {
	d := c.BackOff.NextBackOff()
	if d == backoff.Stop {
		return d
	}
	return min(d, c.max)
}

// Health is what a stream's connections know about its servers: which are down and when
// each may be tried again. The stream's connections share one, so that a server that fails
// on one connection is skipped by all of them for its backoff while another is available,
// instead of each finding it down on its own (against a server that swallows SYNs, a whole
// DialTimeout each). Safe for concurrent use.
//
// It also knows which servers the stream's connections are on (Take, Release), so that
// connections spread over the servers by weight, and, for a server given by a host name,
// that name's addresses (Track, Refresh): each address is a server of its own, in one of the
// slots Expand made for the name.
type Health struct {
	mu      sync.Mutex
	servers []health
	names   names         // the lookups of the servers given by host names (resolve.go)
	looked  chan struct{} // closed once the first lookup has ended, or by Track without a name (Looked)
}

type health struct {
	down    atomic.Bool // written under Health.mu; read without it by MarkUp, once per frame delivered
	downAt  time.Time   // the last failure seen while down
	retryAt time.Time   // while down: when it may be tried again
	bo      backoff.BackOff

	weight   int    // its share, from its endpoint or (SRV) its name's last lookup
	standby  bool   // likewise
	placed   bool   // weight and standby are set (NewBalancer)
	conns    int    // the connections on it now, taken and not released
	inactive bool   // a slot of a name that has no address now: never picked
	target   string // the address dialed: "" for the endpoint's own, else one of its name's (an IP's; an SRV target's name)
	gen      uint64 // changes each time target does: a connection to an older one moves
}

// NewHealth returns the health of n servers, all up; newBackOff gives each server its retry
// schedule.
func NewHealth(n int, newBackOff func() backoff.BackOff) *Health {
	h := &Health{servers: make([]health, n), looked: make(chan struct{})}
	for i := range h.servers {
		h.servers[i].bo = newBackOff()
	}
	return h
}

// available reports whether server i may take a connection at now: up, or down and due.
// The caller holds h.mu.
func (h *Health) available(i int, now time.Time) bool {
	n := &h.servers[i]
	return !n.inactive && (!n.down.Load() || !now.Before(n.retryAt))
}

// MarkDown records a failure of server i: it is skipped until its next backoff interval
// has passed (each failure in a row waits longer, up to RetryMax). A failure while the
// server is already down and not yet due is the same outage seen by another connection:
// it does not lengthen the wait.
func (h *Health) MarkDown(i int, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := &h.servers[i]
	h.askLookup(i)
	if n.down.Load() && now.Before(n.retryAt) {
		if now.After(n.downAt) {
			n.downAt = now
		}
		return
	}
	n.downAt = now
	d := n.bo.NextBackOff()
	if d == backoff.Stop { // not with NewBackOff's schedules, which never stop
		d = time.Minute
	}
	n.down.Store(true)
	n.retryAt = now.Add(d)
}

// MarkUp records a delivery through server i on a connection opened at since, and resets
// its backoff. A connection opened before the server's last failure proves nothing about
// new connections (a receiver shutting down still acks on the ones it has): its deliveries
// leave the server down.
func (h *Health) MarkUp(i int, since time.Time) {
	n := &h.servers[i]
	if !n.down.Load() { // the usual case, every frame: no lock
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if n.down.Load() && !since.Before(n.downAt) {
		n.down.Store(false)
		n.retryAt = time.Time{}
		n.bo.Reset()
	}
}

// IsDown reports whether server i is marked down (for tests and messages).
func (h *Health) IsDown(i int) bool { return h.servers[i].down.Load() }

// Balancer chooses the server of one connection's next attempt: smooth weighted round
// robin over the servers that are up (or due to be tried again) in its Health, standbys
// only when no other server is. Time is an argument. The round robin is the balancer's
// own and it is not safe for concurrent use (each connection's sender owns one); the
// Health may be shared.
type Balancer struct {
	*Health
	nodes []node
}

type node struct {
	current int // smooth weighted round robin state
}

// NewBalancer returns a balancer over eps whose servers' health is h, which must have been
// made for len(eps) servers (NewHealth(len(eps), ...)); it panics otherwise.
func NewBalancer(eps []Endpoint, h *Health) *Balancer {
	if len(h.servers) != len(eps) {
		panic("dial: NewBalancer: a Health for another number of servers")
	}
	b := &Balancer{Health: h, nodes: make([]node, len(eps))}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.place(eps)
	return b
}

// Available reports whether server i may take a connection at now: up, or down and due.
func (b *Balancer) Available(i int, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.available(i, now)
}

// Pick returns the server for the next connection attempt, skipping those marked in
// exclude (the ones already tried in this attempt; nil for none), or -1 if every server is
// excluded. When every server is down and none is due, it returns the one due first: the
// caller's own backoff then paces the attempts, as with a single server.
func (b *Balancer) Pick(now time.Time, exclude []bool) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	skip := func(i int) bool { return exclude != nil && exclude[i] }
	for _, standby := range [2]bool{false, true} {
		best, total := -1, 0
		for i := range b.nodes {
			n := &b.nodes[i]
			if b.servers[i].standby != standby || skip(i) || !b.available(i, now) {
				continue
			}
			n.current += b.servers[i].weight
			total += b.servers[i].weight
			if best < 0 || n.current > b.nodes[best].current {
				best = i
			}
		}
		if best >= 0 {
			b.nodes[best].current -= total
			return best
		}
	}
	return b.dueFirst(skip)
}

// dueFirst returns the active server not skipped that is due first, -1 if none. The caller
// holds b.mu.
func (b *Balancer) dueFirst(skip func(int) bool) int {
	best := -1
	for i := range b.nodes {
		if skip(i) || b.servers[i].inactive {
			continue
		}
		if best < 0 || b.servers[i].retryAt.Before(b.servers[best].retryAt) {
			best = i
		}
	}
	return best
}

// Take chooses the server of a new connection, as Pick does but by load: among the
// servers that are up or due (standbys only when no other is), those with the fewest
// connections for their weight, and among them the round robin's pick; and it counts the
// connection on that server until Release. So a stream's N connections over N servers of
// one weight land one on each, a connection that comes back after a failure goes where
// connections are missing, and one connection that reconnects again and again (the err
// stream's) goes round the servers by weight, as Pick does. It skips those marked in
// exclude (nil for none) and returns -1 if every server is excluded; when every server is
// down and none is due, it takes the one due first.
func (b *Balancer) Take(now time.Time, exclude []bool) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	skip := func(i int) bool { return exclude != nil && exclude[i] }
	for _, standby := range [2]bool{false, true} {
		least := -1 // a candidate with the fewest connections for its weight
		for i := range b.nodes {
			if b.servers[i].standby != standby || skip(i) || !b.available(i, now) {
				continue
			}
			if least < 0 || b.fewer(i, least) {
				least = i
			}
		}
		if least < 0 {
			continue
		}
		best, total := -1, 0
		for i := range b.nodes {
			n := &b.nodes[i]
			if b.servers[i].standby != standby || skip(i) || !b.available(i, now) || b.fewer(least, i) {
				continue
			}
			n.current += b.servers[i].weight
			total += b.servers[i].weight
			if best < 0 || n.current > b.nodes[best].current {
				best = i
			}
		}
		b.nodes[best].current -= total
		b.servers[best].conns++
		return best
	}
	best := b.dueFirst(skip)
	if best >= 0 {
		b.servers[best].conns++
	}
	return best
}

// fewer reports whether server i has fewer connections for its weight than server j. The
// caller holds b.mu.
func (b *Balancer) fewer(i, j int) bool {
	return b.servers[i].conns*b.servers[j].weight < b.servers[j].conns*b.servers[i].weight
}

// Release ends the count of a connection Take put on server i: it closed, or never opened.
func (b *Balancer) Release(i int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.servers[i].conns > 0 {
		b.servers[i].conns--
	}
}

// Target returns the address a connection to server i dials ("" for the endpoint's own)
// and its generation, which ShouldMove compares.
func (b *Balancer) Target(i int) (string, uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.servers[i].target, b.servers[i].gen
}

// IsStandby reports whether server i is a standby now (an SRV target's priority may
// change it).
func (b *Balancer) IsStandby(i int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.servers[i].standby
}

// Gone reports whether a connection to server i opened at generation gen is to an address
// the name no longer has.
func (b *Balancer) Gone(i int, gen uint64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.servers[i].gen != gen || b.servers[i].inactive
}

// ShouldMove reports whether a connection to server i, opened at generation gen, should
// make way for another one: its address is gone from the name (Gone); or i is a standby
// and a server that is not has become available; or another server that is available has
// fewer connections for its weight than i would have without this one (a server back from
// a failure gets its share again, one connection at a time; one connection alone never
// moves for this).
func (b *Balancer) ShouldMove(i int, gen uint64, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.servers[i].gen != gen || b.servers[i].inactive {
		return true
	}
	for j := range b.nodes {
		if j == i || b.servers[j].standby || !b.available(j, now) {
			continue
		}
		if b.servers[i].standby || b.servers[j].conns*b.servers[i].weight < (b.servers[i].conns-1)*b.servers[j].weight {
			return true
		}
	}
	return false
}

// Skip moves the round robin on by n picks, as if they had been made with every server
// up: connections (and processes) that start with different n break Take's ties
// differently, so that they do not all begin on the same server.
func (b *Balancer) Skip(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for range n {
		best, total := -1, 0
		for i := range b.nodes {
			nd := &b.nodes[i]
			if b.servers[i].standby || b.servers[i].inactive {
				continue
			}
			nd.current += b.servers[i].weight
			total += b.servers[i].weight
			if best < 0 || nd.current > b.nodes[best].current {
				best = i
			}
		}
		if best < 0 {
			return
		}
		b.nodes[best].current -= total
	}
}

// place gives the servers their endpoints' weights and standby flags, once: the first
// balancer of h (or Track) sets them for all. The caller holds h.mu.
func (h *Health) place(eps []Endpoint) {
	for i, ep := range eps {
		if sv := &h.servers[i]; !sv.placed {
			sv.weight, sv.standby, sv.placed = ep.Weight, ep.Standby, true
		}
	}
}

// Spread returns how many connections a stream spreads over the servers that are not
// standbys and have an address now, at most most: the sum of their weights over the weights'
// greatest common divisor, so that Take puts on each a number in proportion to its weight
// (one each when the weights are equal); when that is more than most, one per server (Take
// then favours the heavier ones), and at most most. At least 1.
func (h *Health) Spread(eps []Endpoint, most int) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.place(eps)
	n, g, sum := 0, 0, 0
	for i := range h.servers {
		sv := &h.servers[i]
		if sv.inactive || sv.standby || sv.weight <= 0 {
			continue
		}
		n++
		g, sum = gcd(g, sv.weight), sum+sv.weight
	}
	if n > 0 && sum/g <= most {
		return sum / g
	}
	return max(min(n, most), 1)
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
