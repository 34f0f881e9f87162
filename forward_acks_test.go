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

// With RequireAck, every way an ack can go wrong makes the client drop the connection and
// send the same batch again; nothing is lost, and duplicates are possible.
func TestAckFaultsResendTheBatch(t *testing.T) {
	for _, fault := range []forwardtest.AckFault{forwardtest.AckWithhold, forwardtest.AckWrongToken, forwardtest.AckMalformed} {
		t.Run(fault.String(), func(t *testing.T) {
			r := forwardtest.NewReceiver(t)
			core := newTestCore(t, r.Addr(), nil, quiet, func(c *fluentcore.Config) {
				c.RequireAck = true
				c.AckTimeout = 100 * time.Millisecond
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

// fluentd's in_unix never acks. With acks on a unix socket (the err stream's default) every
// frame times out; the error says why, and what to set, instead of only that the ack is
// missing.
func TestUnixSocketWithoutAcksSaysWhy(t *testing.T) {
	r := forwardtest.NewReceiver(t, forwardtest.WithAddr("unix://"+filepath.Join(t.TempDir(), "fwd.sock")))
	r.SetAckFault(forwardtest.AckWithhold)
	core := newTestCore(t, r.Addr(), nil, func(c *fluentcore.Config) {
		c.AckTimeout = 100 * time.Millisecond
		c.SyncTimeout = 2 * time.Second
		c.CloseTimeout = 200 * time.Millisecond
		c.ErrFallback = io.Discard
	})
	logErrs(core, 0, 1)
	err := core.Sync()
	if err == nil || !strings.Contains(err.Error(), "in_unix never sends acks") || !strings.Contains(err.Error(), "Err.Acks to AcksOff") {
		t.Fatalf("Sync: %v", err)
	}
}

// The err stream asks for acks by default and the info stream does not; each stream's Acks
// and RequireAck change that as documented. Read from the receiver's acks: it writes one
// only for a frame that asked.
func TestErrStreamAsksForAcksByDefault(t *testing.T) {
	for _, tc := range []struct {
		name            string
		cfg             func(*fluentcore.Config)
		infoAck, errAck bool
	}{
		{"default", func(*fluentcore.Config) {}, false, true},
		{"RequireAck", func(c *fluentcore.Config) { c.RequireAck = true }, true, true},
		{"Err.Acks off", func(c *fluentcore.Config) { c.Err.Acks = fluentcore.AcksOff }, false, false},
		{"RequireAck, Info.Acks off", func(c *fluentcore.Config) { c.RequireAck = true; c.Info.Acks = fluentcore.AcksOff }, false, true},
		{"Info.Acks on", func(c *fluentcore.Config) { c.Info.Acks = fluentcore.AcksOn }, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := forwardtest.NewReceiver(t)
			core := newTestCore(t, r.Addr(), nil, quiet, tc.cfg)
			logger := zap.New(core)
			logger.Info("info")
			if err := core.Sync(); err != nil {
				t.Fatal(err)
			}
			afterInfo := r.Stats().Acks
			logger.Error("err")
			if err := core.Sync(); err != nil {
				t.Fatal(err)
			}
			infoAck, errAck := afterInfo > 0, r.Stats().Acks > afterInfo
			if infoAck != tc.infoAck || errAck != tc.errAck {
				t.Errorf("acks asked: info %v, err %v; want %v, %v", infoAck, errAck, tc.infoAck, tc.errAck)
			}
		})
	}
}

// fluentd with deny_keepalive acks each request and then closes the connection. The ack is
// read before the close, so no acknowledged batch may be taken for lost and sent again.
func TestAckThenCloseIsNotAResend(t *testing.T) {
	r := forwardtest.NewReceiver(t, forwardtest.DenyKeepalive())
	core := newTestCore(t, r.Addr(), nil, quiet, func(c *fluentcore.Config) { c.RequireAck = true })
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
