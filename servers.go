package fluentcore

import (
	"crypto/tls"
	"fmt"
	"net"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// DefaultServerWeight is a Server's weight when Weight is 0, as in fluentd's out_forward.
const DefaultServerWeight = 60

// Server is one receiver of Config.Servers. It is a plain value, safe to copy and share.
type Server struct {
	// Addr is the receiver, in the forms Config.Addr takes ("tcp://host:port", "host:port",
	// "tls://host:port", "unix:///path"). Required: an empty or malformed Addr is a Validate
	// error, and makes every send fail.
	Addr string `json:"addr,omitempty" yaml:"addr,omitempty"`
	// Weight is the server's share of new connections among the servers in use: with weights
	// 60 and 30, two connections in three go to the first. Default DefaultServerWeight (60)
	// when 0; negative is a Validate error.
	Weight int `json:"weight,omitempty" yaml:"weight,omitempty"`
	// Standby servers take connections only while every server that is not a standby is
	// down; once one of those is due to be tried again, the next send moves back to it.
	// Default false.
	Standby bool `json:"standby,omitempty" yaml:"standby,omitempty"`
}

// endpoint is a Server ready to dial: parsed once by resolve, read-only afterwards.
type endpoint struct {
	addr             string // as configured, for messages
	network, address string // for net.Dialer; address keeps the host name, resolved on every dial
	useTLS           bool
	tlsConfig        *tls.Config // per endpoint: ServerName comes from its own address
	weight           int
	standby          bool
}

// newEndpoint parses one server. tlsBase is Config.TLS (nil for the defaults).
func newEndpoint(srv Server, tlsBase *tls.Config) (endpoint, error) {
	ep := endpoint{addr: srv.Addr, weight: srv.Weight, standby: srv.Standby}
	if ep.weight == 0 {
		ep.weight = DefaultServerWeight
	}
	var err error
	ep.network, ep.address, ep.useTLS, err = parseAddr(srv.Addr)
	if err != nil {
		return ep, err
	}
	if srv.Weight < 0 {
		return ep, fmt.Errorf("fluentcore: server %q: negative weight %d", srv.Addr, srv.Weight)
	}
	if ep.useTLS {
		if tlsBase != nil {
			ep.tlsConfig = tlsBase.Clone()
		} else {
			ep.tlsConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		if ep.tlsConfig.ServerName == "" {
			host, _, _ := net.SplitHostPort(ep.address)
			ep.tlsConfig.ServerName = host
		}
	}
	return ep, nil
}

// balancer chooses the server of each new connection: smooth weighted round robin over the
// servers that are up (or due to be tried again), standbys only when no other server is,
// and each server that fails is left alone for its own backoff (exponential with jitter,
// reset once it delivers). It is pure logic — time is an argument — and not safe for
// concurrent use: each forwarder owns one.
type balancer struct {
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

// newBalancer returns a balancer over eps; newBackOff gives each server its retry schedule.
func newBalancer(eps []endpoint, newBackOff func() backoff.BackOff) *balancer {
	b := &balancer{nodes: make([]node, len(eps))}
	for i, ep := range eps {
		b.nodes[i] = node{weight: ep.weight, standby: ep.standby, bo: newBackOff()}
	}
	return b
}

// available reports whether server i may take a connection at now: up, or down and due.
func (b *balancer) available(i int, now time.Time) bool {
	n := &b.nodes[i]
	return !n.down || !now.Before(n.retryAt)
}

// pick returns the server for the next connection attempt, skipping those marked in
// exclude (the ones already tried in this attempt; nil for none), or -1 if every server is
// excluded. When every server is down and none is due, it returns the one due first: the
// caller's own backoff then paces the attempts, as with a single server.
func (b *balancer) pick(now time.Time, exclude []bool) int {
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
		if best < 0 || b.nodes[i].retryAt.Before(b.nodes[best].retryAt) {
			best = i
		}
	}
	return best
}

// preferred reports whether a connection to server i should make way for another one:
// i is a standby and a server that is not has become available.
func (b *balancer) preferred(i int, now time.Time) bool {
	if !b.nodes[i].standby {
		return false
	}
	for j := range b.nodes {
		if !b.nodes[j].standby && b.available(j, now) {
			return true
		}
	}
	return false
}

// markDown records a failure of server i: it is skipped until its next backoff interval
// has passed (each failure in a row waits longer, up to RetryMax).
func (b *balancer) markDown(i int, now time.Time) {
	n := &b.nodes[i]
	d := n.bo.NextBackOff()
	if d == backoff.Stop { // not with the schedules settings makes, which never stop
		d = time.Minute
	}
	n.down = true
	n.retryAt = now.Add(d)
}

// markUp records a delivery through server i and resets its backoff.
func (b *balancer) markUp(i int) {
	n := &b.nodes[i]
	if n.down {
		n.down = false
		n.retryAt = time.Time{}
		n.bo.Reset()
	}
}

// isDown reports whether server i is marked down (for tests and messages).
func (b *balancer) isDown(i int) bool { return b.nodes[i].down }
