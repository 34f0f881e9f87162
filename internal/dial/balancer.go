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
type Health struct {
	mu      sync.Mutex
	servers []health
}

type health struct {
	down    atomic.Bool // written under Health.mu; read without it by MarkUp, once per frame delivered
	downAt  time.Time   // the last failure seen while down
	retryAt time.Time   // while down: when it may be tried again
	bo      backoff.BackOff
}

// NewHealth returns the health of n servers, all up; newBackOff gives each server its retry
// schedule.
func NewHealth(n int, newBackOff func() backoff.BackOff) *Health {
	h := &Health{servers: make([]health, n)}
	for i := range h.servers {
		h.servers[i].bo = newBackOff()
	}
	return h
}

// available reports whether server i may take a connection at now: up, or down and due.
// The caller holds h.mu.
func (h *Health) available(i int, now time.Time) bool {
	n := &h.servers[i]
	return !n.down.Load() || !now.Before(n.retryAt)
}

// MarkDown records a failure of server i: it is skipped until its next backoff interval
// has passed (each failure in a row waits longer, up to RetryMax). A failure while the
// server is already down and not yet due is the same outage seen by another connection:
// it does not lengthen the wait.
func (h *Health) MarkDown(i int, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := &h.servers[i]
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
	weight  int
	standby bool
	current int // smooth weighted round robin state
}

// NewBalancer returns a balancer over eps whose servers' health is h, which must have been
// made for len(eps) servers (NewHealth(len(eps), ...)); it panics otherwise.
func NewBalancer(eps []Endpoint, h *Health) *Balancer {
	if len(h.servers) != len(eps) {
		panic("dial: NewBalancer: a Health for another number of servers")
	}
	b := &Balancer{Health: h, nodes: make([]node, len(eps))}
	for i, ep := range eps {
		b.nodes[i] = node{weight: ep.Weight, standby: ep.Standby}
	}
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
			if n.standby != standby || skip(i) || !b.available(i, now) {
				continue
			}
			n.current += n.weight
			total += n.weight
			if best < 0 || n.current > b.nodes[best].current {
				best = i
			}
		}
		if best >= 0 {
			b.nodes[best].current -= total
			return best
		}
	}
	best := -1
	for i := range b.nodes {
		if skip(i) {
			continue
		}
		if best < 0 || b.servers[i].retryAt.Before(b.servers[best].retryAt) {
			best = i
		}
	}
	return best
}

// ShouldYield reports whether a connection to server i should make way for another one:
// i is a standby and a server that is not has become available.
func (b *Balancer) ShouldYield(i int, now time.Time) bool {
	if !b.nodes[i].standby {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for j := range b.nodes {
		if !b.nodes[j].standby && b.available(j, now) {
			return true
		}
	}
	return false
}
