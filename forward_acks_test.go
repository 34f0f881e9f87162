package fluentcore_test

import (
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/fluentcore/fluentcore"
	"github.com/fluentcore/fluentcore/forwardtest"
	"github.com/fluentcore/fluentcore/internal/testkit"
)

// Tests of the ack window (forward_acks.go) against forwardtest: acks and their faults,
// an ack followed by the close, a receiver that never acks.

// With Info.Acks on, every way an ack can go wrong makes the client drop the connection and
// send the same batch again; nothing is lost, and duplicates are possible.
func TestAckFaultsResendTheBatch(t *testing.T) {
	for _, fault := range []forwardtest.AckFault{forwardtest.AckWithhold, forwardtest.AckWrongToken, forwardtest.AckMalformed} {
		t.Run(fault.String(), func(t *testing.T) {
			r := forwardtest.NewReceiver(t)
			core := newTestCore(t, r.Addr(), nil, quiet, func(c *fluentcore.Config) {
				c.Info.Acks = fluentcore.AcksOn
				c.Timeouts.Ack = 100 * time.Millisecond
			})
			r.SetAckFault(fault)
			const n = 50
			logErrs(core, 0, n)
			// Two failed attempts: the frames were sent, and sent again after the failure.
			// (Two faulted acks alone may be two frames in flight at once.)
			testkit.WaitUntil(t, "two failed attempts", func() bool { return core.Stats().Err.SendErrors >= 2 })
			if core.Stats().Err.Delivered != 0 {
				t.Fatal("entries counted as delivered without their ack")
			}
			r.SetAckFault(forwardtest.AckOK)
			testkit.WaitUntil(t, "delivery after healing", func() bool { return core.Stats().Err.Delivered == n })
			st := core.Stats().Err
			if st.Delivered != n || st.SendErrors < 2 || st.Reconnects < 2 {
				t.Fatalf("delivered %d, send errors %d, reconnects %d", st.Delivered, st.SendErrors, st.Reconnects)
			}
			if dup := checkAll(t, n, r); dup == 0 {
				t.Error("no duplicates, yet the faulted attempts stored their batch")
			}
		})
	}
}

// fluentd's in_unix never acks. With acks asked for on a unix socket every frame times out;
// the error says why, and what to set, instead of only that the ack is missing.
func TestUnixSocketWithoutAcksSaysWhy(t *testing.T) {
	r := forwardtest.NewReceiver(t, forwardtest.WithAddr("unix://"+filepath.Join(t.TempDir(), "fwd.sock")))
	r.SetAckFault(forwardtest.AckWithhold)
	core := newTestCore(t, r.Addr(), nil, func(c *fluentcore.Config) {
		c.Err.Acks = fluentcore.AcksOn
		c.Timeouts.Ack = 100 * time.Millisecond
		c.Timeouts.Sync = 2 * time.Second
		c.Timeouts.Close = 200 * time.Millisecond
		c.Spill.Fallback = io.Discard
	})
	logErrs(core, 0, 1)
	err := core.Sync()
	if err == nil || !strings.Contains(err.Error(), "in_unix never sends acks") || !strings.Contains(err.Error(), "Err.Acks to AcksOff") {
		t.Fatalf("Sync: %v", err)
	}
}

// With the default config, a unix socket that never acks (fluentd's in_unix) gets every err
// entry once: the err stream asks no acks of a unix:// receiver, so Sync returns as soon as
// the frames are written, and nothing is sent again or written to Spill.Fallback.
func TestUnixSocketThatNeverAcksGetsEachErrEntryOnceByDefault(t *testing.T) {
	r := forwardtest.NewReceiver(t, forwardtest.WithAddr("unix://"+filepath.Join(t.TempDir(), "fwd.sock")))
	r.SetAckFault(forwardtest.AckWithhold)
	fallback := new(testkit.Lines)
	core := fluentcore.New(fluentcore.Config{Addr: r.Addr(), Metrics: fluentcore.MetricsConfig{Disabled: true}, Spill: fluentcore.SpillConfig{Fallback: fallback}})
	const n = 200
	logErrs(core, 0, n)
	start := time.Now()
	if err := core.Sync(); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	// Well under the default Timeouts.Ack (30 s) and Timeouts.Sync (5 s): Sync waited for no ack.
	if took := time.Since(start); took > time.Second {
		t.Errorf("Sync took %v against a receiver that never acks", took)
	}
	if err := core.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if dup := checkAll(t, n, r); dup != 0 {
		t.Errorf("%d err entries arrived twice", dup)
	}
	if lines := fallback.Records(); lines != 0 {
		t.Errorf("%d lines in Spill.Fallback, want none: every entry was delivered", lines)
	}
	if st := core.Stats().Err; st.Delivered != n || st.Spilled != 0 {
		t.Errorf("err delivered %d, spilled %d; want %d, 0", st.Delivered, st.Spilled, n)
	}
}

// By default the err stream asks for acks and the info stream does not: the receiver acks
// the err entry's frame and no other.
func TestErrStreamAsksForAcksByDefault(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	core := newTestCore(t, r.Addr(), nil, quiet)
	logger := zap.New(core)
	logger.Error("err")
	if err := r.WaitFor(func(s forwardtest.Stats) bool { return s.Acks >= 1 }, 5*time.Second); err != nil {
		t.Fatalf("the err frame was not acked: %v", err)
	}
	logger.Info("info")
	if err := core.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := r.WaitFor(func(s forwardtest.Stats) bool { return s.Entries >= 2 }, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	// Had the info frame asked for an ack, Sync would have waited for it: it is written.
	if n := r.Stats().Acks; n != 1 {
		t.Errorf("%d acks written, want 1 (the err frame's)", n)
	}
}

// fluentd with deny_keepalive acks each request and then closes the connection. The ack is
// read before the close, so no acknowledged batch may be taken for lost and sent again.
func TestAckThenCloseIsNotAResend(t *testing.T) {
	r := forwardtest.NewReceiver(t, forwardtest.DenyKeepalive())
	core := newTestCore(t, r.Addr(), nil, quiet, func(c *fluentcore.Config) { c.Info.Acks = fluentcore.AcksOn })
	for i := 0; i < 30; i++ {
		logErrs(core, i, 1)
		if err := core.Sync(); err != nil { // one batch, one connection each
			t.Fatal(err)
		}
	}
	seen := indexes(r)
	for i, n := range seen {
		if n != 1 {
			t.Errorf("entry %d arrived %d times", i, n)
		}
	}
	// Send errors are allowed: the next frame can start on the connection before its close
	// is seen, and is then sent again on a new one, which the receiver never saw twice.
	if st := core.Stats().Err; st.Delivered != 30 || len(seen) != 30 {
		t.Fatalf("delivered %d, receiver has %d distinct entries; want 30 and 30", st.Delivered, len(seen))
	}
}
