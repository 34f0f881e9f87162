package bench

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
)

func dialCounter(t *testing.T, c Counter) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(c.Addr(), "tcp://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func TestLineReceiverCountsLinesAndStalls(t *testing.T) {
	r, err := StartLines()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	conn := dialCounter(t, r)
	if _, err := fmt.Fprint(conn, "a\nb\nc"); err != nil {
		t.Fatal(err)
	}
	if got := r.Wait(2, time.Second, 10*time.Second); got != 2 {
		t.Fatalf("counted %d lines, want 2 (the third is unterminated)", got)
	}
	r.Stall()
	if _, err := fmt.Fprint(conn, "\n"); err != nil {
		t.Fatal(err)
	}
	if got := r.Wait(3, 50*time.Millisecond, 10*time.Second); got != 2 {
		t.Fatalf("stalled receiver counted %d lines, want 2", got)
	}
	r.Resume()
	if got := r.Wait(3, time.Second, 10*time.Second); got != 3 {
		t.Fatalf("after Resume counted %d lines, want 3", got)
	}
}

func TestWaitGivesUpWhenQuiet(t *testing.T) {
	r, err := StartLines()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	start := time.Now()
	if got := r.Wait(1, 20*time.Millisecond, time.Minute); got != 0 {
		t.Fatalf("counted %d, want 0", got)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("Wait took %v: it should give up after the quiet period", d)
	}
}

// TestRemoteForward runs the forwardtest receiver in a child process (this test binary) and
// checks that it counts fluentcore's entries and reports its CPU time.
func TestRemoteForward(t *testing.T) {
	r, err := StartRemote(KindForward)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	core := newFluentcore(r.Addr(), nil)
	defer core.Close()
	l := zap.New(core)
	for range 1000 {
		LogFields(l)
	}
	if err := core.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := r.Wait(1000, time.Second, time.Minute); got != 1000 {
		t.Fatalf("remote receiver counted %d, want 1000", got)
	}
	if v := r.Violations(); v != 0 {
		t.Fatalf("%d protocol violations", v)
	}
	if r.CPU() <= 0 {
		t.Fatal("remote receiver reports no CPU time")
	}
}

// TestRemoteClock checks the err-latency receiver: only err entries are clocked, each with a
// latency between the log call and now.
func TestRemoteClock(t *testing.T) {
	rc, err := StartRemote(KindClock)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	r := rc.(*remote)
	core := newFluentcore(r.Addr(), nil)
	defer core.Close()
	l := zap.New(core)
	start := time.Now()
	for range 10 {
		LogFields(l)
		l.Error(Message)
	}
	if err := core.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := r.Wait(10, time.Second, time.Minute); got != 10 {
		t.Fatalf("clocked %d err entries, want 10", got)
	}
	// Wait counts the clocked tag only; the info entries travel on their own connection and
	// may be read a moment later.
	lat, others := r.Latencies()
	for deadline := time.Now().Add(time.Minute); others < 10 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
		lat, others = r.Latencies()
	}
	if len(lat) != 10 || others != 10 {
		t.Fatalf("got %d latencies and %d other entries, want 10 and 10", len(lat), others)
	}
	for _, d := range lat {
		if d <= 0 || d > time.Since(start) {
			t.Fatalf("latency %v outside (0, %v]", d, time.Since(start))
		}
	}
	if core.Stats().Err.Delivered != 10 {
		t.Fatalf("core delivered %d err entries, want 10", core.Stats().Err.Delivered)
	}
}

// TestReadBufferKindsAreParsed: a read buffer goes with a forwardtest kind and a rate, and
// anything else is refused rather than run with the kernel's buffer.
func TestReadBufferKindsAreParsed(t *testing.T) {
	for kind, ok := range map[string]bool{
		KindReadBuffer(KindRate(KindForward, 1000), 64<<10): true,
		KindReadBuffer(KindRate(KindSlowAck, 1000), 64<<10): true,
		KindReadBuffer(KindForward, 64<<10):                 false, // no rate
		KindReadBuffer(KindRate(KindClock, 1000), 64<<10):   false, // not forwardtest
		KindRate(KindForward, 1000) + "~0":                  false,
		KindRate(KindForward, 1000) + "~x":                  false,
	} {
		c, err := startLocal(kind)
		if (err == nil) != ok {
			t.Errorf("%s: err = %v, want ok %v", kind, err, ok)
		}
		if c != nil {
			_ = c.Close()
		}
	}
}
