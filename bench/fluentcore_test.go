package bench

import (
	"testing"

	"github.com/fluentcore/fluentcore"
	"go.uber.org/zap"
)

func init() {
	register(contender{name: "fluentcore", rank: 0, sugar: true, open: func(tb testing.TB, s scenario) *client {
		return openFluentcore(tb, s, nil)
	}})
	// The same core with the info stream's degrade policy off: entries are dropped only when
	// every buffer is full (queue_full), so its rows show what the pipeline itself delivers
	// when logging outruns the receiver, apart from the default policy's sampling.
	register(contender{name: "fluentcore-degrade-off", rank: 1, sugar: false, open: func(tb testing.TB, s scenario) *client {
		return openFluentcore(tb, s, func(c *fluentcore.Config) { c.Degrade.Policy = fluentcore.DegradeOff })
	}})
}

// newFluentcore returns a core with the default configuration, except the info stream's tag.
func newFluentcore(addr string, mod func(*fluentcore.Config)) *fluentcore.Core {
	cfg := fluentcore.Config{Addr: addr, Info: fluentcore.InfoConfig{Tag: Tag}}
	if mod != nil {
		mod(&cfg)
	}
	return fluentcore.New(cfg)
}

func openFluentcore(tb testing.TB, s scenario, mod func(*fluentcore.Config)) *client {
	r := mustStartReceiver(tb, KindForward)
	core := newFluentcore(r.Addr(), mod)
	return &client{
		log:     zapLog(zap.New(core), s),
		finish:  core.Sync,
		sync:    core.Sync,
		refused: func() uint64 { return core.Stats().Info.DroppedTotal() },
		// The share of calls dropped for want of buffer space, not by the degrade policy:
		// what DegradeAdaptive should keep rare (issue 15, target 1: at most 1 %).
		extra: func(b *testing.B, calls int64) {
			b.ReportMetric(float64(core.Stats().Info.Dropped["queue_full"])/float64(calls), "queue-full-frac")
		},
		recv: r,
		close: func() {
			_ = core.Close()
			_ = r.Close()
		},
	}
}
