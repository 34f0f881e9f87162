package forward

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore/forwardtest"
	"github.com/fluentcore/fluentcore/internal/ring"
	"github.com/fluentcore/fluentcore/internal/testkit"
	"github.com/tinylib/msgp/msgp"
)

// Tests of the ack window's parts (acks.go): the ack token, the order of events, the ack
// deadline.

// A batch that failed is resent with the same ack token, as fluentd does; a new batch,
// or the same buffer holding another length of entries (compact), gets a new one.
func TestResendReusesTheChunk(t *testing.T) {
	var tok ring.AckToken
	a, b := testkit.Entries(2, "a"), testkit.Entries(2, "b")
	first := tok.ForEntries(a)
	if again := tok.ForEntries(a); again != first {
		t.Fatalf("resend got token %q, first attempt %q", again, first)
	}
	if other := tok.ForEntries(b); other == first || len(other) != 24 {
		t.Fatalf("new batch got token %q (first %q)", other, first)
	}
	second := tok.ForEntries(a)
	if shorter := tok.ForEntries(a[:len(a)-1]); shorter == second {
		t.Fatalf("entries of another length kept token %q", shorter)
	}
}

// An ack already queued wins over the close that followed it (fluentd with deny_keepalive
// acks, then closes): with both ready, AwaitAck must report the frame acknowledged, every
// time, not choose at random.
func TestAwaitAckPrefersAQueuedAckOverTheClose(t *testing.T) {
	// A receiver that acks the chunk "tok" of the first frame on each connection, then
	// closes it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ack := msgp.AppendString(msgp.AppendString(msgp.AppendMapHeader(nil, 1), "ack"), "tok")
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if err := msgp.NewReader(c).Skip(); err == nil { // the whole frame, read
					_, _ = c.Write(ack)
				}
			}()
		}
	}()
	s := settingsFor(t, nil, ln.Addr().String())
	s.RequireAck = true
	f := newOne(t, s)
	ctx := context.Background()
	for i := 0; i < 100; i++ {
		if _, _, err := f.Post(ctx, "t", testkit.Entries(1, "x"), 1, "tok", nil); err != nil {
			t.Fatalf("attempt %d: %v", i, err)
		}
		<-f.link.conn.dead // the ack is queued, and the connection has ended
		fl, err := f.AwaitAck(ctx)
		if err != nil || fl.Chunk != "tok" {
			t.Fatalf("attempt %d: %v, %q; the queued ack was there", i, err, fl.Chunk)
		}
	}
}

// An ack's deadline is read on the injected clock (Settings.Clock), and so is the tick that
// ends it: with AckTimeout a minute and a receiver that withholds its acks, the frame waits
// for its ack while the clock stands short of AckTimeout, and once the clock is moved past
// it the connection ends, its frame back among the lost batches, with no minute of real
// time passing.
func TestAckTimeoutRunsOnTheInjectedClock(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	r.SetAckFault(forwardtest.AckWithhold)
	clk := &steppedClock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	const ackTimeout = time.Minute
	s := settingsFor(t, nil, r.Addr())
	s.RequireAck, s.AckTimeout, s.Clock = true, ackTimeout, clk
	f := newOne(t, s)
	b := ring.NewBatch(1024)
	if _, _, err := f.Post(context.Background(), "t", testkit.Entries(1, "x"), 1, "tok", b); err != nil {
		t.Fatal(err)
	}
	if err := r.WaitFor(func(st forwardtest.Stats) bool { return st.Frames == 1 }, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	_, _, due := f.AckEvents()
	clk.add(ackTimeout / 2)
	<-due
	if err := f.OnDue(); err != nil || f.Window().InFlight() != 1 {
		t.Fatalf("with the clock short of AckTimeout: %v, %d in flight; want the frame still waiting", err, f.Window().InFlight())
	}
	_, _, due = f.AckEvents()
	clk.add(ackTimeout / 2)
	<-due
	err := f.OnDue()
	if err == nil || !strings.Contains(err.Error(), "no ack from") {
		t.Fatalf("past AckTimeout on the clock: %v, want no ack", err)
	}
	if f.Window().InFlight() != 0 || !f.Window().HasUnacked() || f.Window().OldestLost().IsZero() {
		t.Fatal("the frame is not among the lost batches")
	}
	if lost := f.Window().TakeUnacked(nil); len(lost) != 1 || lost[0] != b {
		t.Fatalf("lost %v, want the frame's batch", lost)
	}
	if f.Status().FramesInFlight() != 0 || f.Status().BusySince() != 0 || !f.Status().Failing() {
		t.Fatal("Status still shows a frame in flight, or no failure")
	}
}
