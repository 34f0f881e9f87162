package fluentcore

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore/forwardtest"
)

// Every reconnect hands the dialer the host name as configured, never an address cached
// from an earlier lookup, so a name that moves is followed (Go resolves on every dial).
func TestReconnectResolvesTheNameAgain(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(r.Addr(), "tcp://"))
	f := newForwarder(resolve(Config{Addr: "localhost:" + port, RequireAck: true}))
	defer f.close()
	var mu sync.Mutex
	var dialed []string
	real := f.dialRaw
	f.dialRaw = func(ctx context.Context, network, address string) (net.Conn, error) {
		mu.Lock()
		dialed = append(dialed, address)
		mu.Unlock()
		return real(ctx, network, address)
	}
	entries := testEntries(1, "x")
	ctx := context.Background()
	for round := range 3 {
		deadline := time.Now().Add(5 * time.Second)
		for {
			_, _, err := f.send(ctx, "t", entries, 1)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		r.CloseConnections()
	}
	mu.Lock()
	defer mu.Unlock()
	if len(dialed) < 3 {
		t.Fatalf("dialed %v, want a dial per round", dialed)
	}
	for _, a := range dialed {
		if a != "localhost:"+port {
			t.Fatalf("dialed %q, want the name localhost:%s every time", a, port)
		}
	}
}

func TestDialTimeout(t *testing.T) {
	f := newForwarder(resolve(Config{Addr: "fluentd.invalid:24224", DialTimeout: 50 * time.Millisecond}))
	defer f.close()
	f.dialRaw = func(ctx context.Context, network, address string) (net.Conn, error) {
		<-ctx.Done() // a peer that never answers
		return nil, ctx.Err()
	}
	start := time.Now()
	_, _, err := f.send(context.Background(), "t", testEntries(1, "x"), 1)
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

// A batch that failed is resent with the same ack token, as fluentd does; a new batch
// gets a new one.
func TestResendReusesTheChunk(t *testing.T) {
	f := newForwarder(resolve(Config{RequireAck: true}))
	a, b := testEntries(2, "a"), testEntries(2, "b")
	first := f.chunkFor(a)
	if again := f.chunkFor(a); again != first {
		t.Fatalf("resend got token %q, first attempt %q", again, first)
	}
	if other := f.chunkFor(b); other == first || len(other) != 24 {
		t.Fatalf("new batch got token %q (first %q)", other, first)
	}
}

// WriteTimeout bounds a write into a receiver that stopped reading; once it reads again,
// the next attempt goes through.
func TestWriteTimeout(t *testing.T) {
	r := forwardtest.NewReceiver(t, forwardtest.CountOnly())
	f := newForwarder(resolve(Config{Addr: r.Addr(), WriteTimeout: 50 * time.Millisecond}))
	defer f.close()
	entries := testEntries(40_000, "fills the socket buffers quickly") // about 2 MB
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
