package dial

import (
	"time"

	"github.com/cenkalti/backoff/v4"
)

// NewBackOff returns a retry schedule: exponential from min to max, with jitter, never
// giving up. Reset it after a success.
func NewBackOff(min, max time.Duration) backoff.BackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = min
	b.MaxInterval = max
	b.MaxElapsedTime = 0
	b.Reset()
	return b
}

// Balancer chooses the server of each new connection: smooth weighted round robin over the
// servers that are up (or due to be tried again), standbys only when no other server is,
// and each server that fails is left alone for its own backoff (exponential with jitter,
// reset once it delivers). It is pure logic — time is an argument — and not safe for
// concurrent use: each stream's sender owns one.
type Balancer struct {
	nodes []node
}

type node struct {
	weight  int
	standby bool
	current int // smooth weighted round robin state
	down    bool
	retryAt time.Time // while down: when it may be tried again
	bo      backoff.BackOff
}

// NewBalancer returns a balancer over eps; newBackOff gives each server its retry schedule.
func NewBalancer(eps []Endpoint, newBackOff func() backoff.BackOff) *Balancer {
	b := &Balancer{nodes: make([]node, len(eps))}
	for i, ep := range eps {
		b.nodes[i] = node{weight: ep.Weight, standby: ep.Standby, bo: newBackOff()}
	}
	return b
}

// Available reports whether server i may take a connection at now: up, or down and due.
func (b *Balancer) Available(i int, now time.Time) bool {
	n := &b.nodes[i]
	return !n.down || !now.Before(n.retryAt)
}

// Pick returns the server for the next connection attempt, skipping those marked in
// exclude (the ones already tried in this attempt; nil for none), or -1 if every server is
// excluded. When every server is down and none is due, it returns the one due first: the
// caller's own backoff then paces the attempts, as with a single server.
func (b *Balancer) Pick(now time.Time, exclude []bool) int {
	skip := func(i int) bool { return exclude != nil && exclude[i] }
	for _, standby := range [2]bool{false, true} {
		best, total := -1, 0
		for i := range b.nodes {
			n := &b.nodes[i]
			if n.standby != standby || skip(i) || !b.Available(i, now) {
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
		if best < 0 || b.nodes[i].retryAt.Before(b.nodes[best].retryAt) {
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
	for j := range b.nodes {
		if !b.nodes[j].standby && b.Available(j, now) {
			return true
		}
	}
	return false
}

// MarkDown records a failure of server i: it is skipped until its next backoff interval
// has passed (each failure in a row waits longer, up to RetryMax).
func (b *Balancer) MarkDown(i int, now time.Time) {
	n := &b.nodes[i]
	d := n.bo.NextBackOff()
	if d == backoff.Stop { // not with NewBackOff's schedules, which never stop
		d = time.Minute
	}
	n.down = true
	n.retryAt = now.Add(d)
}

// MarkUp records a delivery through server i and resets its backoff.
func (b *Balancer) MarkUp(i int) {
	n := &b.nodes[i]
	if n.down {
		n.down = false
		n.retryAt = time.Time{}
		n.bo.Reset()
	}
}

// IsDown reports whether server i is marked down (for tests and messages).
func (b *Balancer) IsDown(i int) bool { return b.nodes[i].down }
