package stream

import (
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/fluentcore/fluentcore/internal/dial"
	"github.com/fluentcore/fluentcore/internal/forward"
	"github.com/fluentcore/fluentcore/internal/msgpenc"
	"github.com/fluentcore/fluentcore/internal/tagtable"
	"github.com/fluentcore/fluentcore/internal/zapenc"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// The defaults a core resolves, for streams built alone.
const (
	defaultBatchBytes = 256 << 10
	defaultEntryBytes = 64 << 10
	defaultBudget     = 8 << 20
)

// testSettings returns a stream's settings as a core resolves them by default, with
// batches of batchBytes and entries of at most entryBytes.
func testSettings(batchBytes, entryBytes int) Settings {
	zc := zap.NewProductionEncoderConfig()
	zc.TimeKey = ""
	enc := zapenc.NewConfig(zc)
	enc.OverflowKey, enc.OverflowMax = msgpenc.AppendStr(nil, "fluentcore_tag"), 256
	return Settings{Clock: zapcore.DefaultClock, Enc: enc, BatchBytes: batchBytes, EntryBytes: entryBytes, FlushInterval: 500 * time.Millisecond}
}

// newTestTags returns a tag table as a core's default: the streams' own tags "app" and
// "app.err", a name's tags "app.<name>" and "app.<name>.err".
func newTestTags() *tagtable.Table {
	return tagtable.New([tagtable.Streams]string{"app", "app.err"}, 64, 64, func(name string, stream int) string {
		if stream == int(Err) {
			return fmt.Sprintf("app.%s.err", name)
		}
		return "app." + name
	})
}

// testForwarders returns n connections to addr with a core's default settings, closed when
// the test ends.
func testForwarders(t *testing.T, addr string, n int) []*forward.Forwarder {
	t.Helper()
	ep, err := dial.NewEndpoint(addr, 60, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	fwds := forward.New(forward.Settings{
		Clock:            zapcore.DefaultClock,
		Endpoints:        dial.Expand([]dial.Endpoint{ep}, 16),
		MaxInflight:      32,
		DialTimeout:      5 * time.Second,
		HandshakeTimeout: 5 * time.Second,
		WriteTimeout:     10 * time.Second,
		AckTimeout:       30 * time.Second,
		NewBackoff:       func() backoff.BackOff { return dial.NewBackOff(100*time.Millisecond, 10*time.Second) },
		Resolver:         net.DefaultResolver,
		ResolveInterval:  30 * time.Second,
		SpreadMost:       8,
		Dial:             (&net.Dialer{KeepAlive: 30 * time.Second}).DialContext,
	}, n)
	for _, f := range fwds {
		t.Cleanup(f.Close)
	}
	return fwds
}

// newTestStream builds an info stream of budget bytes on s as a sink builds it, alone:
// with a tag table of its own and a histogram of send times that no registry collects.
// The test is its sender, or starts one.
func newTestStream(s Settings, budget int, policy Policy, fwds ...*forward.Forwarder) *Stream {
	sendDuration := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "send_duration_seconds"})
	return New(Info, newTestTags(), budget, s, policy, DropsAll, sendDuration, fwds...)
}

// testPolicy is an info stream's policy as the adaptive one is while calm: it admits every
// entry without counting it against the room left, reserves nothing and never wakes. A
// test sets what it needs otherwise; with kickAt, it wakes as the adaptive one does by
// default once the queue passes that share of the budget (woken), and from then on admits
// entries against the room left.
type testPolicy struct {
	reserves     bool              // the reserve goes to the entries kept whole
	roomAdmitted bool              // entries are admitted against the room left
	keepsWhole   func(string) bool // nil: no message
	kickAt       float64           // 0: never wakes
	woken        atomic.Bool
}

func (*testPolicy) Written()      {}
func (*testPolicy) Freed(int)     {}
func (*testPolicy) Report(*Stats) {}
func (p *testPolicy) RoomAdmitted() bool {
	return p.roomAdmitted || p.woken.Load()
}
func (p *testPolicy) Wakes(queuedShare float64) bool {
	return p.kickAt > 0 && queuedShare >= p.kickAt && !p.woken.Load()
}
func (p *testPolicy) WakeWith(uint64) { p.woken.Store(true) }
func (p *testPolicy) Reserves() bool  { return p.reserves }
func (p *testPolicy) KeepsWhole(_ zapcore.Level, _ uint16, msg string) bool {
	return p.keepsWhole != nil && p.keepsWhole(msg)
}

// adaptiveKickAt is where the adaptive policy wakes by default: half its low mark.
const adaptiveKickAt = 0.125

// notFlood keeps every message but "flood" whole.
func notFlood(msg string) bool { return msg != "flood" }

// TestMain checks that no test leaves a goroutine behind: a stream's senders, its
// connections' readers.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
