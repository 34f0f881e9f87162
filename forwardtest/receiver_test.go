package forwardtest

import (
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tinylib/msgp/msgp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const waitTimeout = 10 * time.Second

var t0 = time.Unix(1700000000, 123456789).UTC()

func TestUnixSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fluent.sock")
	r := NewReceiver(t, WithAddr("unix://"+path))
	if got, want := r.Addr(), "unix://"+path; got != want {
		t.Fatalf("Addr = %q, want %q", got, want)
	}
	c := dial(t, r.Addr())
	rd := msgp.NewReader(c)
	if err := c.SetReadDeadline(time.Now().Add(waitTimeout)); err != nil {
		t.Fatal(err)
	}
	send(t, c, req("unix", bin(entry(et(1, 0), m("k", "v"))), m("chunk", "tok")))
	if got := readAck(t, rd); got != "tok" {
		t.Errorf("ack = %q", got)
	}
	got, err := r.WaitForEntries(1, waitTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Tag != "unix" || got[0].Record["k"] != "v" {
		t.Errorf("entry = %+v", got[0])
	}
}

func TestAddr(t *testing.T) {
	r := NewReceiver(t, WithAddr("tcp://127.0.0.1:0"))
	if !strings.HasPrefix(r.Addr(), "tcp://127.0.0.1:") || strings.HasSuffix(r.Addr(), ":0") {
		t.Errorf("Addr = %q", r.Addr())
	}
	for _, bad := range []string{"udp://127.0.0.1:0", "unix://", "tcp://", "127.0.0.1:notaport"} {
		if r, err := Start(WithAddr(bad)); err == nil {
			_ = r.Close()
			t.Errorf("Start(WithAddr(%q)) succeeded", bad)
		}
	}
}

// fakeTB records what NewReceiver reports, to test the cleanup report.
type fakeTB struct {
	testing.TB
	cleanups []func()
	errors   []string
}

func (f *fakeTB) Helper()                   {}
func (f *fakeTB) Cleanup(fn func())         { f.cleanups = append(f.cleanups, fn) }
func (f *fakeTB) Errorf(s string, a ...any) { f.errors = append(f.errors, fmt.Sprintf(s, a...)) }
func (f *fakeTB) runCleanups() {
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
}

func TestViolationsReportedAtCleanup(t *testing.T) {
	for _, allow := range []bool{false, true} {
		t.Run(fmt.Sprintf("allow=%v", allow), func(t *testing.T) {
			ftb := &fakeTB{TB: t}
			var opts []Option
			if allow {
				opts = append(opts, AllowViolations())
			}
			r := NewReceiver(ftb, opts...)
			c := dial(t, r.Addr())
			send(t, c, req("t", v(1.5), m()), v(nil))
			expectClosed(t, c)
			if err := r.WaitFor(func(s Stats) bool { return s.Violations == 1 }, waitTimeout); err != nil {
				t.Fatal(err)
			}
			ftb.runCleanups()
			switch {
			case allow && len(ftb.errors) != 0:
				t.Errorf("reported %q despite AllowViolations", ftb.errors)
			case !allow && (len(ftb.errors) != 1 || !strings.Contains(ftb.errors[0], "time is a float")):
				t.Errorf("reported %q, want the float time violation", ftb.errors)
			}
		})
	}
}

func TestTruncated(t *testing.T) {
	full := req("t", bin(cat(entry(et(1, 0), m("a", 1)), entry(et(2, 0), m("b", 2)))), m("chunk", "x"))
	for _, cut := range []int{1, 3, 10, len(full) - 1} {
		t.Run(fmt.Sprint(cut), func(t *testing.T) {
			r := NewReceiver(t)
			c := dial(t, r.Addr())
			send(t, c, full, full[:cut])
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			if err := r.WaitFor(func(s Stats) bool { return s.Truncated == 1 }, waitTimeout); err != nil {
				t.Fatal(err)
			}
			if s := r.Stats(); s.Violations != 0 || s.Entries != 2 || s.Frames != 1 {
				t.Errorf("stats = %+v", s)
			}
		})
	}
}

func TestWaitForEntriesTimeout(t *testing.T) {
	r := NewReceiver(t)
	start := time.Now()
	got, err := r.WaitForEntries(3, 50*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "0 of 3 entries") || len(got) != 0 {
		t.Fatalf("WaitForEntries = %v, %v; want a timeout saying 0 of 3", got, err)
	}
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Errorf("returned after %v", d)
	}
	c := dial(t, r.Addr())
	send(t, c, req("t", it(1), m()))
	got, err = r.WaitForEntries(3, 200*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "1 of 3 entries") || len(got) != 1 {
		t.Fatalf("WaitForEntries = %v, %v; want a timeout saying 1 of 3", got, err)
	}
	if err := r.WaitFor(func(s Stats) bool { return s.Acks > 0 }, 20*time.Millisecond); err == nil || !strings.Contains(err.Error(), "timed out") {
		t.Errorf("WaitFor = %v, want a timeout", err)
	}
}

func TestReset(t *testing.T) {
	r := NewReceiver(t, AllowViolations())
	c := dial(t, r.Addr())
	send(t, c, req("t", it(1), m()), req("t", it(1), m()))
	if _, err := r.WaitForEntries(2, waitTimeout); err != nil {
		t.Fatal(err)
	}
	r.Reset()
	if r.Len() != 0 || len(r.Entries()) != 0 || r.Stats() != (Stats{}) {
		t.Fatalf("after Reset: Len %d, stats %+v", r.Len(), r.Stats())
	}
	send(t, c, req("t2", it(1), m()), v(nil))
	got, err := r.WaitForEntries(1, waitTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Tag != "t2" {
		t.Errorf("entries = %+v", got)
	}
	if err := r.WaitFor(func(s Stats) bool { return s.Violations == 1 }, waitTimeout); err != nil {
		t.Fatal(err)
	}
	r.Reset()
	if len(r.Violations()) != 1 {
		t.Errorf("Reset forgot violations: %v", r.Violations())
	}
}

func TestClose(t *testing.T) {
	r, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	idle := dial(t, r.Addr())
	half := dial(t, r.Addr())
	stalled := dial(t, r.Addr())
	send(t, idle, req("t", it(1), m()))
	send(t, half, req("t", bin(entry(it(1), m())))[:5])
	if _, err := r.WaitForEntries(1, waitTimeout); err != nil {
		t.Fatal(err)
	}
	if err := r.WaitFor(func(s Stats) bool { return s.Connections == 3 }, waitTimeout); err != nil {
		t.Fatal(err)
	}
	r.Stall()
	send(t, stalled, req("t", it(1), m()))

	waitErr := make(chan error, 1)
	go func() {
		_, err := r.WaitForEntries(10, time.Minute)
		waitErr <- err
	}()
	if err := r.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := <-waitErr; err == nil || !strings.Contains(err.Error(), "receiver closed") {
		t.Errorf("WaitForEntries during Close = %v", err)
	}
	for _, c := range []net.Conn{idle, half, stalled} {
		expectClosed(t, c)
	}
	if s := r.Stats(); s.Truncated != 0 || s.Violations != 0 || s.Entries != 1 {
		t.Errorf("stats after Close = %+v", s)
	}
	if len(r.Entries()) != 1 {
		t.Errorf("entries lost at Close")
	}
	// Close is safe from several goroutines at once.
	r2, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 4)
	for range 4 {
		go func() { done <- r2.Close() }()
	}
	for range 4 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

func TestModeString(t *testing.T) {
	for m, want := range map[Mode]string{
		Message: "Message", Forward: "Forward", PackedForward: "PackedForward",
		CompressedPackedForward: "CompressedPackedForward", 0: "Mode(0)", 9: "Mode(9)",
	} {
		if got := m.String(); got != want {
			t.Errorf("Mode(%d).String() = %q, want %q", int(m), got, want)
		}
	}
}

func TestNegativeRatesAndDelaysAreRefused(t *testing.T) {
	for name, opt := range map[string]Option{
		"conn read rate": WithConnReadRate(-1),
		"ack delay":      WithAckDelay(-time.Millisecond),
	} {
		if r, err := Start(opt); err == nil {
			r.Close()
			t.Errorf("%s: Start accepted a negative value", name)
		}
	}
}
