package fluentcore_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore"
	"github.com/fluentcore/fluentcore/forwardtest"
	"github.com/fluentcore/fluentcore/internal/testkit"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	"go.uber.org/zap"
)

// logIndexed logs n info entries, each with its index i, from g goroutines.
func logIndexed(logger *zap.Logger, n, g int) {
	var wg sync.WaitGroup
	for w := range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += g {
				logger.Info("indexed", zap.Int("i", i), zap.String("pad", strings.Repeat("p", 200)))
			}
		}()
	}
	wg.Wait()
}

// seen returns how often each index arrived at the receivers, and whether any arrived at all
// at each receiver.
func seen(n int, rs ...*forwardtest.Receiver) (count []int, each []int) {
	count, each = make([]int, n), make([]int, len(rs))
	for k, r := range rs {
		for _, e := range r.Entries() {
			if i, ok := e.Record["i"].(int64); ok && int(i) < n {
				count[i]++
				each[k]++
			}
		}
	}
	return count, each
}

// startServers starts n receivers and returns them and the Servers that name them.
func startServers(t *testing.T, n int, opts ...forwardtest.Option) ([]*forwardtest.Receiver, []fluentcore.Server) {
	rs, servers := make([]*forwardtest.Receiver, n), make([]fluentcore.Server, n)
	for i := range rs {
		rs[i] = forwardtest.NewReceiver(t, opts...)
		servers[i] = fluentcore.Server{Addr: rs[i].Addr()}
	}
	return rs, servers
}

// With Info.Connections 4 and four servers, the stream's connections spread over all of
// them and send at once: every server gets entries, and every entry arrives once. The
// metrics by server say the same: one connection each, and what each server got.
func TestConnectionsSpreadOverServers(t *testing.T) {
	rs, servers := startServers(t, 4)
	reg := prometheus.NewRegistry()
	core := newTestCore(t, "", reg, func(c *fluentcore.Config) {
		c.Servers = servers
		c.Info.Connections = 4
		c.Transport.MaxBatchBytes = 4 << 10 // many small batches, so every connection has some
		c.Degrade.Policy = fluentcore.DegradeOff
	})
	const n = 20_000
	logIndexed(zap.New(core), n, 8)
	if err := core.Sync(); err != nil {
		t.Fatal(err)
	}
	// Without acks, Sync means written: the receivers may still be reading.
	testkit.WaitUntil(t, "every entry read", func() bool {
		total := 0
		for _, r := range rs {
			total += r.Len()
		}
		return total >= n
	})
	count, each := seen(n, rs...)
	for k, m := range each {
		if m == 0 {
			t.Errorf("server %d got no entry of %d; per server: %v", k, n, each)
		}
	}
	for i, c := range count {
		if c != 1 {
			t.Fatalf("entry %d arrived %d times; per server: %v", i, c, each)
		}
	}
	if st := core.Stats().Info; st.Delivered != n || st.DroppedTotal() != 0 {
		t.Fatalf("delivered %d, dropped %d of %d", st.Delivered, st.DroppedTotal(), n)
	}
	for k, r := range rs {
		labels := map[string]string{"stream": "info", "server": r.Addr()}
		if got := testkit.Metric(t, reg, "fluentcore_server_delivered_entries_total", labels); got != float64(each[k]) {
			t.Errorf("server %d: fluentcore_server_delivered_entries_total %v, the server got %d", k, got, each[k])
		}
		if got := testkit.Metric(t, reg, "fluentcore_server_connections", labels); got != 1 {
			t.Errorf("server %d: fluentcore_server_connections %v, want 1", k, got)
		}
		if got := testkit.Metric(t, reg, "fluentcore_server_frames_in_flight", labels); got != 0 {
			t.Errorf("server %d: fluentcore_server_frames_in_flight %v without acks", k, got)
		}
	}
}

// Sync waits for every connection: batches finish out of order when connections are read
// at their own pace, and Sync returns only once all that was logged before it has been
// acknowledged (with acks, delivered means the receiver has read it).
func TestSyncWaitsForEveryConnection(t *testing.T) {
	r := forwardtest.NewReceiver(t, forwardtest.CountOnly(), forwardtest.WithConnReadRate(50_000))
	core := newTestCore(t, r.Addr(), nil, func(c *fluentcore.Config) {
		c.Info.Connections = 4
		c.Info.Acks = fluentcore.AcksOn
		c.Transport.MaxBatchBytes = 16 << 10
		c.Degrade.Policy = fluentcore.DegradeOff
		c.Timeouts.Sync = 20 * time.Second
	})
	logger := zap.New(core)
	for round := range 3 {
		const n = 10_000
		logIndexed(logger, n, 4)
		if err := core.Sync(); err != nil {
			t.Fatal(err)
		}
		if got, want := r.Stats().Entries, int64((round+1)*n); got != want {
			t.Fatalf("round %d: Sync returned with %d of %d entries received", round, got, want)
		}
	}
	// Four info connections and the err stream's one.
	if got := r.Stats().Connections; got != 4 {
		t.Errorf("the receiver saw %d connections, want 4 (the info stream's; err logged nothing)", got)
	}
}

// The most connections a stream may have, each with frames waiting for acks that never
// come: Close returns, accounts for every entry (the frames in flight and the batches
// queued behind them are dropped at shutdown, counted) and leaves no goroutine behind.
func TestManyConnectionsCloseWithFramesInFlight(t *testing.T) {
	before := goleak.IgnoreCurrent()
	r := forwardtest.NewReceiver(t, forwardtest.WithAckDelay(time.Hour))
	core := newTestCore(t, r.Addr(), nil, func(c *fluentcore.Config) {
		c.Info.Connections = fluentcore.MaxConnections
		c.Info.Acks, c.Transport.MaxInflight = fluentcore.AcksOn, 1 // so that MaxConnections frames in flight are one on each
		c.Transport.MaxBatchBytes = 1024                            // a frame every three entries
		c.Degrade.Policy = fluentcore.DegradeOff
		c.Timeouts.Close = 200 * time.Millisecond
	})
	logger := zap.New(core)
	testkit.WaitUntil(t, "a frame in flight on every connection", func() bool {
		logger.Info("held", zap.String("pad", strings.Repeat("p", 250)))
		sv := core.Stats().Info.Servers
		return len(sv) == 1 && sv[0].Connections == fluentcore.MaxConnections && sv[0].FramesInFlight == fluentcore.MaxConnections
	})
	done := make(chan error, 1)
	go func() { done <- core.Close() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Close did not return with frames in flight on every connection")
	}
	st := core.Stats().Info
	if st.Delivered != 0 || st.Dropped["shutdown"] == 0 || st.Entries != st.Delivered+st.DroppedTotal() {
		t.Fatalf("entries %d, delivered %d, dropped %v: want none delivered and every entry dropped at shutdown, counted", st.Entries, st.Delivered, st.Dropped)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	goleak.VerifyNone(t, before)
}

// A server that goes away mid-stream loses its connections to the others: with acks,
// every entry still arrives (a frame whose ack was lost may arrive twice), nothing is
// dropped, and the stream keeps sending on the servers left.
func TestConnectionsSurviveAServerGoingAway(t *testing.T) {
	rs, servers := startServers(t, 3, forwardtest.AllowViolations())
	core := newTestCore(t, "", nil, func(c *fluentcore.Config) {
		c.Servers = servers
		c.Info.Connections = 3
		c.Info.Acks = fluentcore.AcksOn
		c.Transport.MaxBatchBytes = 4 << 10
		c.Degrade.Policy = fluentcore.DegradeOff
		c.Timeouts.Sync = 20 * time.Second
	})
	logger := zap.New(core)
	const n = 30_000
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		logIndexed(logger, n, 4)
	}()
	testkit.WaitUntil(t, "entries at the server that goes away", func() bool { return rs[0].Len() > 1000 })
	if err := rs[0].SetRefuse(true); err != nil {
		t.Fatal(err)
	}
	rs[0].CloseConnections()
	wg.Wait()
	if err := core.Sync(); err != nil {
		t.Fatal(err)
	}
	count, each := seen(n, rs...)
	for i, c := range count {
		if c == 0 {
			t.Fatalf("entry %d never arrived; per server: %v", i, each)
		}
	}
	if st := core.Stats().Info; st.Delivered != n || st.DroppedTotal() != 0 {
		t.Fatalf("delivered %d, dropped %d of %d (per server %v)", st.Delivered, st.DroppedTotal(), n, each)
	}
}

// Info.Connections is checked: at most MaxConnections and half the stream's batches.
func TestConnectionsLimits(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  fluentcore.Config
		want string
	}{
		{"default", fluentcore.Config{}, ""},
		{"sixteen", fluentcore.Config{Info: fluentcore.InfoConfig{Connections: fluentcore.MaxConnections}}, ""},
		{"too many", fluentcore.Config{Info: fluentcore.InfoConfig{Connections: fluentcore.MaxConnections + 1}}, "Info.Connections"},
		{"more than half the batches", fluentcore.Config{Info: fluentcore.InfoConfig{Connections: 3, BufferBytes: 1 << 20}, Transport: fluentcore.TransportConfig{MaxBatchBytes: 256 << 10}}, "Info.Connections"},
		{"negative", fluentcore.Config{Info: fluentcore.InfoConfig{Connections: -1}}, "Info.Connections"},
	} {
		err := c.cfg.Validate()
		if (err == nil) != (c.want == "") || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: Validate() = %v, want an error naming %q", c.name, err, c.want)
		}
	}
}
