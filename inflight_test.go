package fluentcore_test

import (
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore"
	"github.com/fluentcore/fluentcore/forwardtest"
	"github.com/fluentcore/fluentcore/internal/testkit"
	"go.uber.org/zap"
)

// inFlight sums a stream's frames in flight over its servers.
func inFlight(st fluentcore.StreamStats) int {
	n := 0
	for _, sv := range st.Servers {
		n += sv.FramesInFlight
	}
	return n
}

// With acks on, a connection writes up to Transport.MaxInflight frames before the first ack comes
// back, and no more: the receiver holds every ack for a long time, so the frames it has
// read while no ack was written are the ones the client sent ahead. The stream's buffers
// bound the window too: all its batches but one per shard may be in flight (64 batches, so
// that the bound differs from the half the client once allowed on fewer than 16 cores;
// degrade off, so that no entry is thinned while the buffer is full).
func TestAcksLetMaxInflightFramesGoAhead(t *testing.T) {
	const batchBytes = 1024 // a frame every three entries
	shards := min(2*runtime.GOMAXPROCS(0), 64/2)
	for _, tc := range []struct {
		name                string
		maxInflight, buffer int
		want                int
	}{
		{"Transport.MaxInflight", 4, 0, 4},
		{"the buffers", fluentcore.MaxInflightLimit, 64 * batchBytes, 64 - shards},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := forwardtest.NewReceiver(t, forwardtest.WithAckDelay(time.Hour))
			core := newTestCore(t, r.Addr(), nil, func(c *fluentcore.Config) {
				c.Info.Acks, c.Transport.MaxInflight = fluentcore.AcksOn, tc.maxInflight
				c.Transport.MaxBatchBytes, c.Info.BufferBytes = batchBytes, tc.buffer
				c.Degrade.Policy = fluentcore.DegradeOff
				c.Timeouts.Close = 100 * time.Millisecond
			})
			logger := zap.New(core)
			for i := range 3*tc.want + 12 {
				logger.Info("ahead", zap.Int("i", i), zap.String("pad", strings.Repeat("p", 250)))
			}
			if err := r.WaitFor(func(s forwardtest.Stats) bool { return s.Frames >= int64(tc.want) }, 10*time.Second); err != nil {
				t.Fatalf("the receiver read %d frames; want %d before any ack: %v", r.Stats().Frames, tc.want, err)
			}
			// The batches after them are sealed and waiting; the next may go only once an ack
			// is in, and none is written for an hour.
			testkit.WaitUntil(t, "the client to show its frames in flight", func() bool {
				return inFlight(core.Stats().Info) == tc.want
			})
			if s := r.Stats(); s.Frames != int64(tc.want) || s.Acks != 0 {
				t.Fatalf("receiver read %d frames and wrote %d acks; want %d and 0", s.Frames, s.Acks, tc.want)
			}
			if sv := core.Stats().Info.Servers; len(sv) != 1 || sv[0].Connections != 1 || sv[0].Addr != r.Addr() {
				t.Fatalf("servers %+v; want one connection to %s", sv, r.Addr())
			}
		})
	}
}

// An overdue ack costs only its own frame: the receiver withholds the ack of "b" and acks
// "c", written after it, so the client gets an ack for its second frame in flight first.
// It delivers "c" at once, times "b" out, and sends "b" again — alone, with the same
// chunk — on a new connection.
func TestOverdueAckResendsOnlyTheFramesNotAcked(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	core := newTestCore(t, r.Addr(), nil, func(c *fluentcore.Config) {
		c.Info.Acks, c.Timeouts.Ack = fluentcore.AcksOn, 300*time.Millisecond
	})
	logger := zap.New(core)
	logger.Error("a")
	if err := core.Sync(); err != nil {
		t.Fatal(err)
	}
	r.SetAckFault(forwardtest.AckWithhold)
	logger.Error("b")
	if err := r.WaitFor(func(s forwardtest.Stats) bool { return s.FaultedAcks == 1 }, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	r.SetAckFault(forwardtest.AckOK)
	logger.Error("c") // sent while "b" is in flight: one frame in flight lets the err stream flush
	testkit.WaitUntil(t, "everything acked", func() bool { return core.Sync() == nil })

	count := map[string]int{}
	var order []string
	for _, e := range r.Entries() {
		msg, _ := e.Record["msg"].(string)
		count[msg]++
		order = append(order, msg)
	}
	if count["a"] != 1 || count["b"] != 2 || count["c"] != 1 {
		t.Fatalf("arrivals %v (in order %v); want a once, b twice (its ack withheld), c once", count, order)
	}
	if got := strings.Join(order, ""); got != "abcb" {
		t.Fatalf("arrival order %q; want abcb", got)
	}
	st := core.Stats().Err
	if st.Delivered != 3 || st.SendErrors == 0 || r.Stats().Connections != 2 {
		t.Fatalf("delivered %d, send errors %d, connections %d; want 3, at least 1, 2", st.Delivered, st.SendErrors, r.Stats().Connections)
	}
	if sv := st.Servers; len(sv) != 1 || sv[0].Delivered != 3 || sv[0].FramesInFlight != 0 {
		t.Fatalf("servers %+v; want 3 delivered, none in flight", sv)
	}
}

// A receiver that acks every frame twice: the second ack matches no frame in flight, so
// the client ends the connection (a protocol error, counted) and opens a new one. Every
// entry still arrives, and Sync reports success.
func TestDuplicateAckEndsTheConnection(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	r.SetAckFault(forwardtest.AckTwice)
	core := newTestCore(t, r.Addr(), nil, func(c *fluentcore.Config) { c.Info.Acks = fluentcore.AcksOn })
	logger := zap.New(core)
	const n = 5
	for i := range n {
		logger.Error("twice", zap.Int("i", i))
		testkit.WaitUntil(t, "entry acked", func() bool { return core.Sync() == nil })
	}
	// Each frame's second ack ends its connection, perhaps after the next frame was written
	// on it: that one is then sent again (at least once).
	testkit.WaitUntil(t, "every connection ended", func() bool { return core.Stats().Err.SendErrors >= n })
	count, _ := seen(n, r)
	for i, c := range count {
		if c < 1 {
			t.Fatalf("entry %d arrived %d times", i, c)
		}
	}
	if got := r.Stats().Connections; got < n {
		t.Fatalf("%d connections for %d frames; a duplicate ack should end each", got, n)
	}
	if st := core.Stats().Err; st.Delivered != n {
		t.Fatalf("delivered %d, want %d", st.Delivered, n)
	}
}

func TestMaxInflightLimits(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  fluentcore.Config
		want string
	}{
		{"default", fluentcore.Config{Info: fluentcore.InfoConfig{Acks: fluentcore.AcksOn}}, ""},
		{"one", fluentcore.Config{Info: fluentcore.InfoConfig{Acks: fluentcore.AcksOn}, Transport: fluentcore.TransportConfig{MaxInflight: 1}}, ""},
		{"the limit", fluentcore.Config{Info: fluentcore.InfoConfig{Acks: fluentcore.AcksOn}, Transport: fluentcore.TransportConfig{MaxInflight: fluentcore.MaxInflightLimit}}, ""},
		{"over the limit", fluentcore.Config{Info: fluentcore.InfoConfig{Acks: fluentcore.AcksOn}, Transport: fluentcore.TransportConfig{MaxInflight: fluentcore.MaxInflightLimit + 1}}, "Transport.MaxInflight"},
		{"negative", fluentcore.Config{Transport: fluentcore.TransportConfig{MaxInflight: -1}}, "Transport.MaxInflight"},
	} {
		err := c.cfg.Validate()
		if (err == nil) != (c.want == "") || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: Validate() = %v, want an error naming %q", c.name, err, c.want)
		}
	}
}

// A failure that comes after the write (here an ack for another chunk) waits for the
// backoff like a failed write: the client does not reconnect in a loop (as it once did,
// when the ack moved out of the write).
func TestAckFailureWaitsForTheBackoff(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	r.SetAckFault(forwardtest.AckWrongToken)
	core := newTestCore(t, r.Addr(), nil, func(c *fluentcore.Config) {
		c.Info.Acks = fluentcore.AcksOn
		c.Transport.RetryMin, c.Transport.RetryMax = 100*time.Millisecond, 100*time.Millisecond
		c.Timeouts.Close, c.Spill.Fallback = 100*time.Millisecond, io.Discard
	})
	zap.New(core).Error("x")
	testkit.WaitUntil(t, "a first failure", func() bool { return core.Stats().Err.SendErrors >= 1 })
	start := time.Now()
	testkit.WaitUntil(t, "three more", func() bool { return core.Stats().Err.SendErrors >= 4 })
	// Each wait is at least half of Transport.RetryMin (the backoff's jitter).
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Fatalf("three more failed attempts in %v; the backoff allows no fewer than 150ms", d)
	}
}

// Spill.After counts from the write of a frame whose ack never comes: the err entry goes to
// the durable spill, as when the write itself fails.
func TestUnackedErrFrameIsSpilledAfterSpillAfter(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	r.SetAckFault(forwardtest.AckWithhold)
	core := newTestCore(t, r.Addr(), nil, func(c *fluentcore.Config) {
		c.Info.Acks, c.Timeouts.Ack = fluentcore.AcksOn, 150*time.Millisecond
		c.Spill.Dir, c.Spill.After = t.TempDir(), 100*time.Millisecond
		c.Timeouts.Close, c.Spill.Fallback = 100*time.Millisecond, io.Discard
	})
	zap.New(core).Error("x")
	testkit.WaitUntil(t, "the entry spilled", func() bool { return core.Stats().Err.Spilled == 1 })
	r.SetAckFault(forwardtest.AckOK)
	testkit.WaitUntil(t, "the entry replayed", func() bool { return core.Stats().Err.Replayed == 1 })
}
