package fluentcore

import (
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore/forwardtest"
	"github.com/fluentcore/fluentcore/internal/ring"
	"github.com/fluentcore/fluentcore/internal/testkit"
	"go.uber.org/zap"
)

// Tests of the ack window's parts (forward_acks.go): the ack token, the order of events.

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
// acks, then closes): with both ready, awaitAck must report the frame acknowledged, every
// time, not choose at random.
func TestAwaitAckPrefersAQueuedAckOverTheClose(t *testing.T) {
	f := newForwarder(settingsFor(Config{RequireAck: true}).connFor(infoStream))
	f.ackT = time.NewTicker(time.Hour)
	defer f.ackT.Stop()
	for i := 0; i < 100; i++ {
		c := &fconn{acks: make(chan string, 1), dead: make(chan struct{}), err: io.EOF, keepalive: true}
		c.acks <- "tok"
		close(c.dead)
		f.conn = c
		f.flights = append(f.flights[:0], flight{chunk: "tok", at: time.Now()})
		fl, err := f.awaitAck(context.Background())
		if err != nil || fl.chunk != "tok" {
			t.Fatalf("attempt %d: %v, %q; the queued ack was there", i, err, fl.chunk)
		}
	}
}

// Which streams ask for acks: the err stream unless Err.Acks is AcksOff, the info stream
// with RequireAck or Info.Acks, Info.Acks winning.
func TestAcksPerStream(t *testing.T) {
	for _, tc := range []struct {
		name            string
		cfg             Config
		infoAck, errAck bool
	}{
		{"default", Config{}, false, true},
		{"RequireAck", Config{RequireAck: true}, true, true},
		{"Err.Acks off", Config{Err: StreamConfig{Acks: AcksOff}}, false, false},
		{"RequireAck, Info.Acks off", Config{RequireAck: true, Info: StreamConfig{Acks: AcksOff}}, false, true},
		{"Info.Acks on", Config{Info: StreamConfig{Acks: AcksOn}}, true, true},
		{"RequireAck, Err.Acks off", Config{RequireAck: true, Err: StreamConfig{Acks: AcksOff}}, true, false},
		{"unix socket", Config{Addr: "unix:///run/fluentd.sock"}, false, false},
		{"unix socket, Err.Acks on", Config{Addr: "unix:///run/fluentd.sock", Err: StreamConfig{Acks: AcksOn}}, false, true},
		{"unix socket, RequireAck", Config{Addr: "unix:///run/fluentd.sock", RequireAck: true}, true, false},
		{"a unix socket and a tcp server", Config{Servers: []Server{{Addr: "unix:///run/fluentd.sock"}, {Addr: "tcp://127.0.0.1:24224"}}}, false, true},
	} {
		s := settingsFor(tc.cfg)
		if got := s.connFor(infoStream).requireAck; got != tc.infoAck {
			t.Errorf("%s: info asks for acks %v, want %v", tc.name, got, tc.infoAck)
		}
		if got := s.connFor(errStream).requireAck; got != tc.errAck {
			t.Errorf("%s: err asks for acks %v, want %v", tc.name, got, tc.errAck)
		}
	}
	if err := (Config{Err: StreamConfig{Acks: 7}}).Validate(); err == nil || !strings.Contains(err.Error(), "Err.Acks") {
		t.Errorf("Validate of Err.Acks 7: %v", err)
	}
}

// An ack's deadline is read on the injected clock (settings.clock), and so is the tick that
// ends it: with AckTimeout a minute and a receiver that withholds its acks, the frame waits
// for its ack while the clock stands short of AckTimeout, and once the clock is moved past
// it the connection ends and the frame is sent again, with no minute of real time passing.
func TestAckTimeoutRunsOnTheInjectedClock(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	r.SetAckFault(forwardtest.AckWithhold)
	clk := &steppedClock{manualClock: manualClock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}}
	const ackTimeout = time.Minute
	core := NewWithClock(Config{
		Addr: r.Addr(), RequireAck: true, AckTimeout: ackTimeout, CloseTimeout: 100 * time.Millisecond, ErrFallback: io.Discard,
		RetryMin: time.Millisecond, RetryMax: time.Millisecond,
	}, clk)
	defer core.Close()
	zap.New(core).Info("once", zap.Int64("id", 1))

	// Each poll moves the clock by a millisecond, which ticks the sink's tickers. The real
	// deadline is short: a wait on a real timer of AckTimeout would outlast it.
	poll := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !cond(); {
			if time.Now().After(deadline) {
				t.Fatalf("no %s within 5 s of real time (stats %+v)", what, core.Stats().Info)
			}
			clk.add(time.Millisecond)
			time.Sleep(time.Millisecond) // let the sink's goroutines run before the next tick
		}
	}
	poll("frame at the receiver", func() bool {
		return r.Len() == 1 && sinkOf(core).streams[infoStream].senders[0].fwd.loadInFlight() == 1
	})
	clk.add(ackTimeout / 2)
	if st := core.Stats().Info; st.SendErrors != 0 || r.Len() != 1 {
		t.Fatalf("with the clock short of AckTimeout: %d send errors, %d entries at the receiver", st.SendErrors, r.Len())
	}
	clk.add(ackTimeout / 2)
	poll("second copy of the frame after its ack deadline on the clock", func() bool { return r.Len() >= 2 })
	if st := core.Stats().Info; st.SendErrors == 0 || st.Delivered != 0 {
		t.Errorf("%d send errors, %d delivered; want the ack timeout counted, and nothing delivered without an ack", st.SendErrors, st.Delivered)
	}
}

// steppedClock is a manualClock whose tickers tick each time the test moves it (add), and
// never on their own: a wait on one ends when the clock moves, whatever its period. They are
// real tickers with their channel replaced, so that Stop and Reset work (and change nothing:
// the code that reads them checks the time at each tick).
type steppedClock struct {
	manualClock
	tickMu sync.Mutex
	ticks  []chan time.Time
}

func (c *steppedClock) NewTicker(d time.Duration) *time.Ticker {
	ch := make(chan time.Time, 1)
	t := time.NewTicker(d)
	t.C = ch
	c.tickMu.Lock()
	c.ticks = append(c.ticks, ch)
	c.tickMu.Unlock()
	return t
}

func (c *steppedClock) add(d time.Duration) {
	c.manualClock.add(d)
	now := c.Now()
	c.tickMu.Lock()
	defer c.tickMu.Unlock()
	for _, ch := range c.ticks {
		select {
		case ch <- now:
		default:
		}
	}
}
