package fluentcore

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zapcore"
)

// entrySink is all a Core asks of its sink (async_sink.go); the sink's other methods and
// its streams are none of the Core's business. The Core holds the sink itself, not this
// interface, so that the per-entry calls (admit, write) are direct calls the compiler can
// inline; this interface is the contract, checked below. Its methods
// are safe for concurrent use.
type entrySink interface {
	// admit reports whether an entry that passed the level check is to be written; an
	// entry it refuses (the info stream sheds it) is counted as dropped, never encoded.
	admit(ent *zapcore.Entry) bool
	// write encodes the entry into its stream's buffers; what cannot be buffered is
	// counted (info) or spilled (err), never reported.
	write(ctx *encodedContext, ent *zapcore.Entry, fields []zapcore.Field)
	// sync waits until everything written before the call is delivered (err: or spilled),
	// at most timeout.
	sync(timeout time.Duration) error
	// syncOrSpill is sync for an entry the process may not survive: what the err stream
	// cannot deliver in time goes to the spill, within the same timeout.
	syncOrSpill(timeout time.Duration) error
	// close stops the sink after delivering what it can within timeout. Idempotent.
	close(timeout time.Duration) error
	stats() Stats
}

var _ entrySink = (*sink)(nil)

// Core is a zapcore.Core that forwards entries to a Fluent Forward receiver. It is safe for
// concurrent use. Cores returned by With share their parent's sink: closing any of them
// closes it for all.
type Core struct {
	*shared
	ctx *encodedContext // fields added by With, encoded once; nil for none
}

// shared is what every Core made from one New has in common.
type shared struct {
	s          *settings
	sink       *sink // used only through entrySink's methods
	metrics    prometheus.Collector
	registerer prometheus.Registerer // where metrics are registered; nil if not (or it failed)
	unregister sync.Once
	err        error // what New found wrong (config, spill, registration): Sync and Close report it
}

// New returns a Core for cfg. It never fails and never blocks on the network: it allocates
// the buffers and starts the senders, which connect in the background and retry with
// backoff. A Config that Validate rejects still gives a working Core: bad sizes fall back
// to their defaults, a bad address makes every send fail, and Sync and Close return the
// problem (so does a failed metrics registration).
func New(cfg Config) *Core {
	s, err := resolve(cfg)
	return newCore(cfg, s, err)
}

// newCore is New with cfg resolved: s its settings, err what resolve found wrong.
func newCore(cfg Config, s *settings, err error) *Core {
	sendDuration := newSendDuration(cfg.ConstLabels)
	k := newSink(s, sendDuration)
	m := newMetrics(k.stats, sendDuration, cfg.ConstLabels)
	err = errors.Join(err, k.spillErr)
	sh := &shared{s: s, sink: k, metrics: m}
	if cfg.Registerer != nil {
		if rerr := cfg.Registerer.Register(m); rerr != nil {
			err = errors.Join(err, fmt.Errorf("fluentcore: register metrics: %w", rerr))
		} else {
			sh.registerer = cfg.Registerer
		}
	}
	sh.err = err
	return &Core{shared: sh}
}

// Enabled reports whether entries at level l are logged.
func (c *Core) Enabled(l zapcore.Level) bool { return c.s.level.Enabled(l) }

// Level returns the minimum enabled level (for zap.Logger.Level and zapcore.LevelOf).
func (c *Core) Level() zapcore.Level { return zapcore.LevelOf(c.s.level) }

// With returns a Core that adds fields to every entry. The fields are encoded once, here.
func (c *Core) With(fields []zapcore.Field) zapcore.Core {
	if len(fields) == 0 {
		return c
	}
	return &Core{shared: c.shared, ctx: c.s.stream.enc.newContext(c.ctx, fields)}
}

// Check decides whether ent is logged. While the info stream is shedding, it applies the
// degrade policy here, so a dropped entry costs no encoding; the drop is counted.
func (c *Core) Check(ent zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if !c.s.level.Enabled(ent.Level) || !c.sink.admit(&ent) {
		return ce
	}
	return ce.AddCore(ent, c)
}

// Write encodes the entry into its stream's buffers and returns; the entry is sent in the
// background. Entries above Error (DPanic, Panic, Fatal) are flushed before Write returns,
// within SyncTimeout: delivered, or — on the err stream (where ErrLevel sends them by
// default), when the receiver cannot take them in time — moved with every other
// undelivered err entry to the spill (SpillDir, or ErrFallback), so a Fatal does not take
// its own entry down with the process. The error says if delivery failed, and whether the
// entries went to the spill.
// Entries that cannot be buffered are counted (info) or spilled (err: to SpillDir or
// ErrFallback); Write does not report those.
func (c *Core) Write(ent zapcore.Entry, fields []zapcore.Field) error {
	c.sink.write(c.ctx, &ent, fields)
	if ent.Level > zapcore.ErrorLevel {
		return c.sink.syncOrSpill(c.s.syncTimeout)
	}
	return nil
}

// Sync flushes both streams and waits until everything logged before the call is delivered
// (or, for err, moved to the spill), or SyncTimeout passes (then it returns an error; the
// entries stay queued). It also returns the configuration problem, if New found one.
func (c *Core) Sync() error {
	return errors.Join(c.err, c.sink.sync(c.s.syncTimeout))
}

// Close flushes, tries for up to CloseTimeout to deliver everything logged, and stops the
// senders. What is still undelivered then is accounted for: info entries are counted as
// dropped (reason shutdown), err entries are spilled (to SpillDir, for the next process to
// replay, or to ErrFallback). Close does not wait for the spill to be replayed; it releases
// SpillDir, and unregisters the metrics from Config.Registerer (so a new Core, after a
// config reload, can register on the same one; Stats still works). Close is idempotent and
// safe to call while other goroutines log: later entries are counted as dropped (reason
// closed) or, for err, written to ErrFallback. It returns what went wrong, if anything.
func (c *Core) Close() error {
	err := c.sink.close(c.s.closeTimeout)
	c.unregister.Do(func() {
		if c.registerer != nil {
			c.registerer.Unregister(c.metrics)
		}
	})
	return errors.Join(c.err, err)
}

// Stats returns the core's counters, the same numbers as its Prometheus metrics. Safe for
// concurrent use; the numbers of a running core are read one by one, not as a snapshot.
func (c *Core) Stats() Stats { return c.sink.stats() }

var _ zapcore.Core = (*Core)(nil)
