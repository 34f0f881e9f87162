package fluentcore

import (
	"testing"
	"time"

	"github.com/fluentcore/fluentcore/internal/dial"
	"github.com/fluentcore/fluentcore/internal/msgpenc"
	"github.com/fluentcore/fluentcore/internal/testkit"
	"go.uber.org/zap/zapcore"
)

// Test helpers shared with the external test package (core_test.go): the conformance
// normalisation of internal/zapenc/msgp_test.go, so both compare records to zap's JSON one way,
// and the accounting identity, so both check it one way.
var (
	NormMsgp      = testkit.NormMsgp
	NormJSON      = testkit.NormJSON
	DiffValues    = testkit.Diff
	IdentityHolds = identityHolds
	EnvNames      = envNames
)

// identityHolds checks entries = delivered + spilled + dropped for both streams.
func identityHolds(t *testing.T, st Stats) {
	t.Helper()
	for name, s := range map[string]StreamStats{"info": st.Info, "err": st.Err} {
		if s.Entries != s.Delivered+s.Spilled+s.DroppedTotal() {
			t.Errorf("%s: entries %d != delivered %d + spilled %d + dropped %d %v",
				name, s.Entries, s.Delivered, s.Spilled, s.DroppedTotal(), s.Dropped)
		}
	}
}

// acksIf returns AcksOn if on, else AcksDefault: a stream's acks from a test table's flag.
func acksIf(on bool) Acks {
	if on {
		return AcksOn
	}
	return AcksDefault
}

// fastRetry returns cfg with the quick reconnects of the tests whose receiver is down,
// stalled or restarting: Transport.RetryMin 1 ms and, unless cfg sets one, Transport.RetryMax 5 ms.
func fastRetry(cfg Config) Config {
	cfg.Transport.RetryMin = time.Millisecond
	if cfg.Transport.RetryMax == 0 {
		cfg.Transport.RetryMax = 5 * time.Millisecond
	}
	return cfg
}

// steadyAllocs is testkit.SteadyAllocs, under the name the tests of this package use.
var steadyAllocs = testkit.SteadyAllocs

// settingsFor returns cfg's settings, whatever resolve thinks of cfg.
func settingsFor(cfg Config) *settings {
	s, _ := resolve(cfg)
	return s
}

// NewWithClock is New with the sink's time (settings.clock) from c rather than
// zapcore.DefaultClock: the streams' flush ticks, their senders' attempts and Spill.After,
// the connections' failures and ack deadlines. An entry's time stays zap's. The sink Resets
// c's tickers, so c.NewTicker must return one made by time.NewTicker.
func NewWithClock(cfg Config, c zapcore.Clock) *Core {
	s, err := resolve(cfg)
	s.setClock(c)
	return newCore(s, err)
}

// newWith is New with the sink's time from c (as NewWithClock; nil: the default clock)
// and the connections' transports opened by d (settings' conn.dial; nil: the default).
func newWith(cfg Config, c zapcore.Clock, d dial.Func) *Core {
	s, err := resolve(cfg)
	if c != nil {
		s.setClock(c)
	}
	if d != nil {
		s.conn.dial = d
	}
	return newCore(s, err)
}

// sinkOf returns the sink behind a Core made by New.
func sinkOf(c *Core) *sink { return c.sink }

// MaxDepth and TooDeepMarker are the encoder's nesting cap and what it writes at the cut.
const MaxDepth = msgpenc.MaxDepth

var TooDeepMarker = msgpenc.TooDeepMarker
