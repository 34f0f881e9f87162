package fluentcore

import (
	"context"
	"crypto/rand"
	"errors"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore/forwardtest"
	"github.com/fluentcore/fluentcore/internal/dial"
	"github.com/fluentcore/fluentcore/internal/testkit"
	"github.com/fluentcore/fluentcore/internal/wire"
	"github.com/tinylib/msgp/msgp"
)

// A name's address comes from Config.Resolver, never from the dialer: the transport is
// handed the address the Resolver gave. When a name with one address moves (its receiver
// gone from the old address, the name giving a new one), the failed connection asks for a
// lookup, and the reconnect dials the new address.
func TestReconnectFollowsANameThatMoves(t *testing.T) {
	port, rs := loopbackFleet(t, 2)
	res := newTableResolver()
	res.set("moving.test", "127.0.0.1")
	s := settingsFor(Config{Addr: "moving.test:" + port, RequireAck: true, Resolver: res})
	clock := &manualClock{now: time.Unix(1_700_000_000, 0)}
	s.setClock(clock)
	f := newForwarder(s.connFor(infoStream))
	defer f.close()
	var mu sync.Mutex
	var dialed []string
	onDial(f, func(address string) {
		mu.Lock()
		dialed = append(dialed, address)
		mu.Unlock()
	})
	entries := testkit.Entries(1, "x")
	ctx := context.Background()
	send := func(what string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, _, err := f.send(ctx, "t", entries, 1)
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
	res.set("moving.test", "127.0.0.2")
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
	f := newForwarder(settingsFor(Config{Addr: "192.0.2.1:24224", DialTimeout: 50 * time.Millisecond}).connFor(infoStream))
	defer f.close()
	f.dialRaw = func(ctx context.Context, network, address string) (net.Conn, error) {
		<-ctx.Done() // a peer that never answers
		return nil, ctx.Err()
	}
	start := time.Now()
	_, _, err := f.send(context.Background(), "t", testkit.Entries(1, "x"), 1)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("send: %v, want the dial deadline", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("send took %v with a 50ms dial timeout", d)
	}
	if f.disconnectedFor(time.Now()) == 0 || f.lastError() == nil {
		t.Fatal("failure not recorded")
	}
}

// WriteTimeout bounds a write into a receiver that stopped reading; once it reads again,
// the next attempt goes through.
func TestWriteTimeout(t *testing.T) {
	r := forwardtest.NewReceiver(t, forwardtest.CountOnly())
	f := newForwarder(settingsFor(Config{Addr: r.Addr(), WriteTimeout: 50 * time.Millisecond}).connFor(infoStream))
	defer f.close()
	entries := testkit.Entries(40_000, "fills the socket buffers quickly") // about 2 MB
	r.Stall()
	var err error
	for i := 0; i < 200 && err == nil; i++ {
		_, _, err = f.send(context.Background(), "t", entries, 40_000)
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("send into a stalled receiver: %v, want a write deadline error", err)
	}
	r.Resume()
	// The receiver first drains what was written; attempts may still time out meanwhile.
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, _, err := f.send(context.Background(), "t", entries, 40_000)
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
	r := forwardtest.NewReceiver(t, forwardtest.CountOnly())
	s := settingsFor(Config{Addr: r.Addr(), Compression: "gzip", MaxBatchBytes: maxBatchLimit, RequireAck: true})
	f := newForwarder(s.connFor(infoStream))
	defer f.close()

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
	size, _, err := f.send(ctx, "big", entries, 1)
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
	dead := freePort(t) // nothing listens there: dials are refused
	r := forwardtest.NewReceiver(t)
	up := strings.TrimPrefix(r.Addr(), "tcp://")
	s := settingsFor(Config{Servers: []Server{{Addr: dead}, {Addr: up}}, RetryMin: time.Hour, RetryMax: time.Hour})
	fs := newForwarders(s.connFor(infoStream), 3)
	var mu sync.Mutex
	dials := map[string]int{}
	for _, f := range fs {
		defer f.close()
		onDial(f, func(address string) {
			mu.Lock()
			dials[address]++
			mu.Unlock()
		})
	}
	// Connections 0 and 2 both start their round robin at the dead server.
	ctx := context.Background()
	for _, f := range []*forwarder{fs[0], fs[2]} {
		if _, _, err := f.send(ctx, "t", testkit.Entries(1, "x"), 1); err != nil {
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
	var dead []Server
	for range 2 {
		dead = append(dead, Server{Addr: freePort(t)}) // nothing listens there: dials are refused
	}
	fs := newForwarders(settingsFor(Config{Servers: dead, RetryMin: time.Hour, RetryMax: time.Hour}).connFor(infoStream), 2)
	dials := make([]int, len(fs))
	for k, f := range fs {
		defer f.close()
		onDial(f, func(string) { dials[k]++ }) // each forwarder is used from this goroutine only
	}
	ctx := context.Background()
	for _, f := range fs {
		if _, _, err := f.send(ctx, "t", testkit.Entries(1, "x"), 1); err == nil {
			t.Fatal("send succeeded with every server refusing")
		}
	}
	if dials[0] != 2 || dials[1] != 1 {
		t.Fatalf("dials per connection = %v, want [2 1]: the first finds both servers down, the second tries one", dials)
	}
}

// onDial calls seen with each address f dials, before dialing it.
func onDial(f *forwarder, seen func(address string)) {
	real := f.dialRaw
	f.dialRaw = func(ctx context.Context, network, address string) (net.Conn, error) {
		seen(address)
		return real(ctx, network, address)
	}
}
