package forward

import (
	"context"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore/forwardtest"
	"github.com/fluentcore/fluentcore/internal/testkit"
)

// New never waits on a lookup: with a resolver that does not answer, a stream that counts
// its servers gets the most connections it may have, sends on one until the first lookup
// ends, and then on as many as the name has addresses; the connections wait for that
// lookup (Start), and those past the count never start.
func TestNewNeverWaitsOnALookup(t *testing.T) {
	port, rs := forwardtest.NewFleet(t, 3)
	res := testkit.NewResolver()
	res.Set("fleet.test", "127.0.0.1", "127.0.0.2", "127.0.0.3")
	release := res.Hold() // before Close, which waits for the lookup under way
	s := settingsFor(t, nil, "fleet.test:"+port)
	s.Resolver = res
	start := time.Now()
	fs := New(s, 0)
	if took := time.Since(start); took > 100*time.Millisecond {
		t.Fatalf("New took %v with a resolver that does not answer", took)
	}
	for _, f := range fs {
		defer f.Close()
	}
	defer release()
	if len(fs) != s.SpreadMost || fs[0].Sending() != 1 {
		t.Fatalf("%d forwarders, %d sending before the lookup; want %d and 1", len(fs), fs[0].Sending(), s.SpreadMost)
	}
	started := make(chan bool, len(fs))
	for _, f := range fs {
		go func() { started <- f.Start(context.Background(), 28) }()
	}
	select {
	case <-started:
		t.Fatal("a connection started before the first lookup ended")
	case <-time.After(20 * time.Millisecond):
	}
	release()
	n := 0
	for range fs {
		if <-started {
			n++
		}
	}
	if n != 3 || fs[0].Sending() != 3 {
		t.Fatalf("%d connections started, %d sending; want 3, one per address", n, fs[0].Sending())
	}
	if w := fs[0].acks.maxInflight; w != 28/3 {
		t.Fatalf("window %d, want the stream's 28 frames shared by 3 connections", w)
	}
	targets := map[string]bool{}
	for _, f := range fs[:3] {
		if _, _, err := f.Send(context.Background(), "t", testkit.Entries(1, "x"), 1); err != nil {
			t.Fatal(err)
		}
		targets[f.Target()] = true
	}
	if len(targets) != 3 {
		t.Fatalf("connections on %v, want one on each address", targets)
	}
	for _, r := range rs {
		if _, err := r.WaitForEntries(1, 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
}

// One connection never waits for a lookup: it looks the name up as it dials. Several that
// were asked for wait for the first lookup, so that they are placed over its addresses, and
// a connection waiting for it gives up when its context ends.
func TestOnlySeveralConnectionsWaitForTheFirstLookup(t *testing.T) {
	res := testkit.NewResolver()
	release := res.Hold()
	s := settingsFor(t, nil, "fleet.test:24224")
	s.Resolver = res
	one := New(s, 1)[0]
	defer one.Close()
	if !one.Start(context.Background(), 28) || one.Sending() != 1 {
		t.Fatal("the only connection did not start at once")
	}
	if one.acks.maxInflight != 28 {
		t.Fatalf("window %d, want the stream's 28 frames", one.acks.maxInflight)
	}
	two := New(s, 2)
	for _, f := range two {
		defer f.Close()
	}
	defer release()
	if two[0].Sending() != 2 {
		t.Fatalf("%d sending, want the 2 asked for", two[0].Sending())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if two[0].Start(ctx, 28) {
		t.Fatal("one of two connections started before the first lookup ended")
	}
}

// Without a name, the count is the servers' at once, and the connections do not wait.
func TestServersGivenByAddressAreCountedAtOnce(t *testing.T) {
	s := settingsFor(t, nil, "127.0.0.1:1", "127.0.0.2:1", "127.0.0.3:1")
	fs := New(s, 0)
	for _, f := range fs {
		defer f.Close()
	}
	if len(fs) != 3 || fs[0].Sending() != 3 {
		t.Fatalf("%d forwarders, %d sending; want 3, one per server", len(fs), fs[0].Sending())
	}
	for _, f := range fs {
		if !f.Start(context.Background(), 28) {
			t.Fatal("a connection did not start")
		}
	}
}
