package forward

import (
	"context"
	"crypto/rand"
	"errors"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/fluentcore/fluentcore/forwardtest"
	"github.com/fluentcore/fluentcore/internal/dial"
	"github.com/fluentcore/fluentcore/internal/testkit"
	"github.com/fluentcore/fluentcore/internal/wire"
	"github.com/tinylib/msgp/msgp"
)

// A name's address comes from Settings.Resolver, never from the dialer: the transport is
// handed the address the Resolver gave. When a name with one address moves (its receiver
// gone from the old address, the name giving a new one), the failed connection asks for a
// lookup, and the reconnect dials the new address.
func TestReconnectFollowsANameThatMoves(t *testing.T) {
	port, rs := forwardtest.NewFleet(t, 2)
	res := testkit.NewResolver()
	res.Set("moving.test", "127.0.0.1")
	s := settingsFor(t, nil, "moving.test:"+port)
	s.RequireAck, s.Resolver = true, res
	clock := &steppedClock{now: time.Unix(1_700_000_000, 0)}
	s.Clock = clock
	var mu sync.Mutex
	var dialed []string
	s.Dial = onDial(s.Dial, func(address string) {
		mu.Lock()
		dialed = append(dialed, address)
		mu.Unlock()
	})
	f := newOne(t, s)
	entries := testkit.Entries(1, "x")
	ctx := context.Background()
	send := func(what string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, _, err := f.Send(ctx, "t", entries, 1)
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %v", what, err)
			}
			clock.add(dial.MinLookupGap) // a lookup, if a failure asked for one, and the server due again
		}
	}
	send("to the first address")
	if _, err := rs[0].WaitForEntries(1, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	res.Set("moving.test", "127.0.0.2")
	if err := rs[0].Close(); err != nil {
		t.Fatal(err)
	}
	send("to the address the name moved to")
	if _, err := rs[1].WaitForEntries(1, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, a := range dialed {
		if a != "127.0.0.1:"+port && a != "127.0.0.2:"+port {
			t.Fatalf("dialed %q, want only the addresses the Resolver gave (dialed %v)", a, dialed)
		}
	}
	if dialed[len(dialed)-1] != "127.0.0.2:"+port {
		t.Fatalf("dialed %v, want the new address last", dialed)
	}
}

func TestDialTimeout(t *testing.T) {
	s := settingsFor(t, nil, "192.0.2.1:24224")
	s.DialTimeout = 50 * time.Millisecond
	s.Dial = func(ctx context.Context, network, address string) (net.Conn, error) {
		<-ctx.Done() // a peer that never answers
		return nil, ctx.Err()
	}
	f := newOne(t, s)
	start := time.Now()
	_, _, err := f.Send(context.Background(), "t", testkit.Entries(1, "x"), 1)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("send: %v, want the dial deadline", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("send took %v with a 50ms dial timeout", d)
	}
	if f.Status().DisconnectedFor(time.Now()) == 0 || f.Status().LastError() == nil || !f.Status().Failing() {
		t.Fatal("failure not recorded")
	}
}

// WriteTimeout bounds a write into a receiver that stopped reading; once it reads again,
// the next attempt goes through.
func TestWriteTimeout(t *testing.T) {
	r := forwardtest.NewReceiver(t, forwardtest.CountOnly())
	s := settingsFor(t, nil, r.Addr())
	s.WriteTimeout = 50 * time.Millisecond
	f := newOne(t, s)
	entries := testkit.Entries(40_000, "fills the socket buffers quickly") // about 2 MB
	r.Stall()
	var err error
	for i := 0; i < 200 && err == nil; i++ {
		_, _, err = f.Send(context.Background(), "t", entries, 40_000)
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("send into a stalled receiver: %v, want a write deadline error", err)
	}
	r.Resume()
	// The receiver first drains what was written; attempts may still time out meanwhile.
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, _, err := f.Send(context.Background(), "t", entries, 40_000)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("send after Resume: %v", err)
		}
	}
}

// The largest batch, incompressible, still makes a frame fluent-bit accepts: forwardtest
// enforces its 6144000-byte limit on the frame and on the decompressed entries.
func TestGzipFrameOfTheLargestIncompressibleBatchFits(t *testing.T) {
	const maxBatchLimit = 6_000_000 // the largest Config.Transport.MaxBatchBytes
	r := forwardtest.NewReceiver(t, forwardtest.CountOnly())
	s := settingsFor(t, nil, r.Addr())
	s.Compression, s.RequireAck = wire.Gzip, true
	f := newOne(t, s)

	noise := make([]byte, maxBatchLimit-64)
	_, _ = rand.Read(noise)
	var entries []byte
	entries = msgp.AppendArrayHeader(entries, 2)
	entries = wire.AppendEventTime(entries, 1_700_000_000, 0)
	entries = msgp.AppendMapHeader(entries, 1)
	entries = msgp.AppendString(entries, "noise")
	entries = msgp.AppendBytes(entries, noise)
	if len(entries) > maxBatchLimit {
		t.Fatalf("test batch is %d bytes, over the limit", len(entries))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	size, _, err := f.Send(ctx, "big", entries, 1)
	if err != nil {
		t.Fatal(err)
	}
	if size <= len(entries) || size > wire.MaxFrameBytes {
		t.Fatalf("frame of %d bytes (entries %d, limit %d)", size, len(entries), wire.MaxFrameBytes)
	}
	if err := r.WaitFor(func(st forwardtest.Stats) bool { return st.Acks == 1 }, 10*time.Second); err != nil {
		t.Fatal(err)
	}
}

// A server that one connection finds down is left alone by the stream's other connections
// for its backoff: they share its health, so the next connection goes straight to the server
// that is up instead of dialing the dead one again (for a server that swallows SYNs, a whole
// DialTimeout per connection).
func TestConnectionsShareTheServersHealth(t *testing.T) {
	dead := testkit.FreePort(t) // nothing listens there: dials are refused
	r := forwardtest.NewReceiver(t)
	up := hostPort(r)
	s := settingsFor(t, nil, dead, up)
	s.NewBackoff = func() backoff.BackOff { return dial.NewBackOff(time.Hour, time.Hour) }
	var mu sync.Mutex
	dials := map[string]int{}
	s.Dial = onDial(s.Dial, func(address string) {
		mu.Lock()
		dials[address]++
		mu.Unlock()
	})
	fs := New(s, 3)
	for _, f := range fs {
		defer f.Close()
	}
	// Connections 0 and 2 both start their round robin at the dead server.
	ctx := context.Background()
	for _, f := range []*Forwarder{fs[0], fs[2]} {
		if _, _, err := f.Send(ctx, "t", testkit.Entries(1, "x"), 1); err != nil {
			t.Fatalf("send: %v", err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if dials[dead] != 1 || dials[up] != 2 {
		t.Fatalf("dials = %v, want the dead server dialed once (by the first connection) and the live one twice", dials)
	}
	if _, err := r.WaitForEntries(2, 5*time.Second); err != nil {
		t.Fatal(err)
	}
}

// When every server is down and none is due, an attempt dials one of them, the one due
// first, and leaves the next try to the sender's backoff: a connection that arrives just
// after another found them all down does not dial each one again.
func TestWhenNoServerIsDueAnAttemptTriesOne(t *testing.T) {
	s := settingsFor(t, nil, testkit.FreePort(t), testkit.FreePort(t)) // nothing listens there: dials are refused
	s.NewBackoff = func() backoff.BackOff { return dial.NewBackOff(time.Hour, time.Hour) }
	dials := make([]int, 2)
	var k int // the connection that dials: each is used from this goroutine only, in turn
	s.Dial = onDial(s.Dial, func(string) { dials[k]++ })
	fs := New(s, 2)
	ctx := context.Background()
	for i, f := range fs {
		defer f.Close()
		k = i
		if _, _, err := f.Send(ctx, "t", testkit.Entries(1, "x"), 1); err == nil {
			t.Fatal("send succeeded with every server refusing")
		}
	}
	if dials[0] != 2 || dials[1] != 1 {
		t.Fatalf("dials per connection = %v, want [2 1]: the first finds both servers down, the second tries one", dials)
	}
}
