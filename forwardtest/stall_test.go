package forwardtest

import (
	"net"
	"testing"
	"time"
)

func TestStallResume(t *testing.T) {
	r := NewReceiver(t, CountOnly())
	const perFrame = 1000
	var payload []byte
	for i := range perFrame {
		payload = append(payload, entry(et(uint32(i), 0), m("msg", "a log line of moderate length", "i", i))...)
	}
	frame := req("stall", bin(payload), m("size", perFrame))

	// phase runs one stall: fill the connection while stalled, prove nothing was read,
	// resume and see everything arrive.
	phase := func(c net.Conn, written int, base int64) int64 {
		t.Helper()
		if s := r.Stats(); s.Entries != base || s.Frames != base/perFrame {
			t.Fatalf("while stalled: stats = %+v, want %d entries", s, base)
		}
		r.Resume()
		frames := written / len(frame)
		if rest := written % len(frame); rest > 0 {
			// Finish the request the blocked write left half-written.
			if _, err := c.Write(frame[rest:]); err != nil {
				t.Fatal(err)
			}
			frames++
		}
		want := base + int64(frames*perFrame)
		if err := r.WaitFor(func(s Stats) bool { return s.Entries == want }, waitTimeout); err != nil {
			t.Fatal(err)
		}
		return want
	}

	// Stalled before the connection exists.
	r.Stall()
	c := dial(t, r.Addr())
	written := fillUntilBlocked(t, c, frame)
	if err := c.SetWriteDeadline(time.Now().Add(waitTimeout)); err != nil {
		t.Fatal(err)
	}
	if written < 2*len(frame) {
		t.Fatalf("only %d bytes written before blocking", written)
	}
	got := phase(c, written, 0)

	// Stalled while the connection is open and idle.
	r.Stall()
	written = fillUntilBlocked(t, c, frame)
	if err := c.SetWriteDeadline(time.Now().Add(waitTimeout)); err != nil {
		t.Fatal(err)
	}
	got = phase(c, written, got)
	t.Logf("%d entries (%d bytes per request) went through two stalls", got, len(frame))
}

// Allow lets a stalled receiver read exactly so many requests, in order, and no more: a
// test delivers frame by frame with it.
func TestAllowReadsSoManyRequests(t *testing.T) {
	r := NewReceiver(t)
	r.Allow(3) // not stalled: nothing to allow, and nothing kept for a later stall
	r.Stall()
	c := dial(t, r.Addr())
	for i := range 5 {
		send(t, c, req("allow", it(1), m("i", i)))
	}
	read := func(n int64) {
		t.Helper()
		if err := r.WaitFor(func(s Stats) bool { return s.Entries >= n }, waitTimeout); err != nil {
			t.Fatal(err)
		}
		if s := r.Stats(); s.Entries != n || s.Frames != n {
			t.Fatalf("stats %+v; want %d requests read", s, n)
		}
	}
	r.Allow(2)
	read(2)
	r.Allow(1)
	read(3)
	r.Resume()
	read(5)
	for i, e := range r.Entries() {
		if e.Record["i"] != int64(i) {
			t.Errorf("entry %d is %v: not in order", i, e.Record)
		}
	}
}
