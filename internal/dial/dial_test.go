package dial

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// fakeDial records the addresses it is given and the time each attempt had; it refuses
// those in refuse and connects the others to one end of a pipe.
type fakeDial struct {
	mu     sync.Mutex
	addrs  []string
	shares []time.Duration
	refuse map[string]bool
}

func (d *fakeDial) dial(ctx context.Context, network, address string) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.addrs = append(d.addrs, address)
	if deadline, ok := ctx.Deadline(); ok {
		d.shares = append(d.shares, time.Until(deadline))
	}
	if d.refuse[address] {
		return nil, &net.OpError{Op: "dial", Net: network, Err: syscall.ECONNREFUSED}
	}
	c, other := net.Pipe()
	_ = other.Close()
	return c, nil
}

// Dial hands the transport the addresses the Resolver gives for a name, never the name:
// the endpoint's own before a lookup placed its addresses, and an SRV target's; each
// address in turn, within a share of the time left, until one answers. An IP address is
// dialed as it is, without a lookup; a name the Resolver does not know is an error naming
// the server, and nothing is dialed.
func TestDialLooksNamesUpThroughTheResolver(t *testing.T) {
	r := &fakeResolver{addrs: map[string][]string{}}
	r.set("multi.test", "10.0.0.2", "10.0.0.1", "fd00::1")
	r.set("b.logging.svc", "10.0.1.1")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	ep, err := NewEndpoint("tcp://multi.test:24224", 60, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := &fakeDial{refuse: map[string]bool{"10.0.0.1:24224": true}}
	conn, raw, err := Dial(ctx, d.dial, r, &ep, "")
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.Close()
	if conn != raw {
		t.Fatal("without TLS, conn is the socket")
	}
	if !slices.Equal(d.addrs, []string{"10.0.0.1:24224", "10.0.0.2:24224"}) {
		t.Fatalf("dialed %q, want the name's IPv4 addresses in turn", d.addrs)
	}
	if d.shares[0] > 31*time.Second || d.shares[1] < 50*time.Second {
		t.Fatalf("the attempts had %v: want the first half of the minute, the last all that was left", d.shares)
	}

	// Every address refused: the first error, naming the server and the address.
	d = &fakeDial{refuse: map[string]bool{"10.0.0.1:24224": true, "10.0.0.2:24224": true}}
	if _, _, err := Dial(ctx, d.dial, r, &ep, ""); err == nil || !strings.Contains(err.Error(), "tcp://multi.test:24224 (10.0.0.1:24224)") || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("Dial with every address refused: %v", err)
	}

	// An SRV target: its name looked up.
	srv, err := NewEndpoint("srv://_fluentd._tcp.logging.svc", 60, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	d = &fakeDial{}
	conn, _, err = Dial(ctx, d.dial, r, &srv, "b.logging.svc:24224")
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.Close()
	if !slices.Equal(d.addrs, []string{"10.0.1.1:24224"}) {
		t.Fatalf("SRV target: dialed %q, want its address", d.addrs)
	}

	// A name the Resolver does not know.
	d = &fakeDial{}
	if _, _, err := Dial(ctx, d.dial, r, &srv, "c.logging.svc:24224"); err == nil || !strings.Contains(err.Error(), "srv://_fluentd._tcp.logging.svc (c.logging.svc:24224)") || !strings.Contains(err.Error(), "no such host") {
		t.Fatalf("unknown SRV target: %v", err)
	}
	if len(d.addrs) != 0 {
		t.Fatalf("dialed %q after a failed lookup", d.addrs)
	}

	// An IP address: no lookup.
	n := r.count()
	ip, err := NewEndpoint("tcp://10.0.0.9:24224", 60, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	d = &fakeDial{}
	conn, _, err = Dial(ctx, d.dial, r, &ip, "")
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.Close()
	if r.count() != n || !slices.Equal(d.addrs, []string{"10.0.0.9:24224"}) {
		t.Fatalf("an IP address: %d lookups, dialed %q", r.count()-n, d.addrs)
	}
}
