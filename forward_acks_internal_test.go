package fluentcore

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore/internal/testkit"
)

// Tests of the ack window's parts (forward_acks.go): the ack token, the order of events.

// A batch that failed is resent with the same ack token, as fluentd does; a new batch,
// or the same buffer holding another length of entries (compact), gets a new one.
func TestResendReusesTheChunk(t *testing.T) {
	var tok ackToken
	a, b := testkit.Entries(2, "a"), testkit.Entries(2, "b")
	first := tok.forEntries(a)
	if again := tok.forEntries(a); again != first {
		t.Fatalf("resend got token %q, first attempt %q", again, first)
	}
	if other := tok.forEntries(b); other == first || len(other) != 24 {
		t.Fatalf("new batch got token %q (first %q)", other, first)
	}
	second := tok.forEntries(a)
	if shorter := tok.forEntries(a[:len(a)-1]); shorter == second {
		t.Fatalf("entries of another length kept token %q", shorter)
	}
}

// An ack already queued wins over the close that followed it (fluentd with deny_keepalive
// acks, then closes): with both ready, awaitAck must report the frame acknowledged, every
// time, not choose at random.
func TestAwaitAckPrefersAQueuedAckOverTheClose(t *testing.T) {
	f := newForwarder(settingsFor(Config{RequireAck: true}).connFor(infoStream))
	f.ackT = time.NewTimer(time.Hour)
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
