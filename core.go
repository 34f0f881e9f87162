package fluentcore

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fluentcore/fluentcore/internal/stream"
	"github.com/fluentcore/fluentcore/internal/tagtable"
	"github.com/fluentcore/fluentcore/internal/zapenc"
	"go.uber.org/zap/zapcore"
)

// entrySink is all a Core asks of its sink (async_sink.go); the sink's other methods, and
// of its streams all but Stream.Write, are none of the Core's business. The Core holds the
// sink itself, not this interface, so that the per-entry calls (consults, admit, stream)
// are direct calls the compiler can inline; this interface is the contract, checked below.
// Its methods are safe for concurrent use.
type entrySink interface {
	// consults reports whether admit must be asked about an entry that passed the level
	// check: one atomic load, false while the info stream's policy sheds nothing.
	consults() bool
	// admit reports whether such an entry is to be written; an entry it refuses (the info
	// stream sheds it) is counted as dropped, never encoded. tag is the entry's tag if
	// tagged (its logger's Tag option), else its name's is looked up when needed.
	admit(ent *zapcore.Entry, tag tagtable.Ref, tagged bool) bool
	// stream is the stream an entry at level l goes to. Its Write encodes the entry into
	// the stream's buffers, to go under its tag; what cannot be buffered is counted (info)
	// or spilled (err), never reported.
	stream(l zapcore.Level) *stream.Stream
	// tagFor is the tag of an entry whose logger has no Tag option (its zap name's, with
	// Tags.FromName); tagNamed resolves a Tag option's name. Past Tags.Max both give the
	// stream's own tag, marked over.
	tagFor(ent *zapcore.Entry) tagtable.Ref
	tagNamed(name string) tagtable.Ref
	// sync waits until everything written before the call is delivered (err: or spilled),
	// at most timeout; with orSpill, for an entry the process may not survive, what the err
	// stream cannot deliver in time goes to the spill, within the same timeout.
	sync(timeout time.Duration, orSpill bool) error
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
	ctx *zapenc.Context // fields added by With, encoded once; nil for none
	// tag is the Forward tag a Tag option in With gave the core's entries, resolved there;
	// tagged says there was one (else an entry's tag is its name's, or its stream's).
	tag    tagtable.Ref
	tagged bool
	// own is ctx without the TagOverflowKey field of a Tag option past Tags.Max (over, the
	// name it carries): what a core derived by With builds on, so that a later Tag option
	// does not inherit it.
	own  *zapenc.Context
	over string
	// nameOver is ctx for an entry whose zap name came past Tags.Max (Tags.FromName): own with
	// that name to write under TagOverflowKey. Made by the first such entry (nameOverflow).
	nameOver atomic.Pointer[zapenc.Context]
}

// shared is what every Core made from one New has in common.
type shared struct {
	s       *settings
	sink    *sink          // used only through entrySink's methods
	metrics *metrics       // the collector it is counted in, shared on a Registerer (metrics.go)
	member  *metricsMember // its place in metrics, left by Close
	leave   sync.Once
	err     error // what New found wrong (config, spill, registration): Sync and Close report it
}

// New returns a Core for cfg. It never fails and never blocks on the network: it allocates
// the buffers and starts the senders, which connect in the background and retry with
// backoff. A Config that Validate rejects still gives a working Core: bad sizes fall back
// to their defaults, a bad address makes every send fail, bad Metrics.ConstLabels leave the metrics
// unregistered, and Sync and Close return the problem (so does a Registerer's refusal of
// the metrics). On a Registerer that has the metrics of a live core with the same
// Metrics.ConstLabels, the new core shares their series instead of registering its own (see
// Config.Metrics.Registerer): the usual config reload, the new core made before the old is closed.
// Safe for concurrent use.
func New(cfg Config) *Core {
	s, err := resolve(cfg)
	return newCore(s, err)
}

// newCore is New with its Config resolved: s its settings, err what resolve found wrong.
func newCore(s *settings, err error) *Core {
	m, member, rerr := joinMetrics(s.registerer, s.constLabels)
	k := newSink(s, m.sendDuration)
	m.start(member, k.stats)
	err = errors.Join(err, k.spillErr)
	if rerr != nil {
		err = errors.Join(err, fmt.Errorf("fluentcore: register metrics: %w", rerr))
	}
	sh := &shared{s: s, sink: k, metrics: m, member: member, err: err}
	releaseWhenGone(m, member, sh) // a closed core's later counts are read until then
	return &Core{shared: sh}
}

// Enabled reports whether entries at level l are logged.
func (c *Core) Enabled(l zapcore.Level) bool { return c.s.level.Enabled(l) }

// Level returns the minimum enabled level (for zap.Logger.Level and zapcore.LevelOf).
func (c *Core) Level() zapcore.Level { return zapcore.LevelOf(c.s.level) }

// With returns a Core that adds fields to every entry. The fields are encoded once, here.
// A Tag field among them is not a field: it sets the tag the Core's entries go under,
// resolved here (see Tag).
func (c *Core) With(fields []zapcore.Field) zapcore.Core {
	if len(fields) == 0 {
		return c
	}
	nc := &Core{shared: c.shared, tag: c.tag, tagged: c.tagged, over: c.over}
	if i := slices.IndexFunc(fields, isTagOption); i >= 0 {
		rest := make([]zapcore.Field, 0, len(fields))
		for _, f := range fields {
			if !isTagOption(f) {
				rest = append(rest, f)
				continue
			}
			nc.tag, nc.tagged, nc.over = c.sink.tagNamed(f.String), f.String != "", ""
			if nc.tag.Over {
				nc.over = f.String
			}
		}
		fields = rest
	}
	nc.own = c.s.stream.Enc.NewContext(c.own, fields)
	nc.ctx = nc.own
	if nc.over != "" {
		// Past Tags.Max: the stream's tag, and the name the logger asked for in the record,
		// where a receiver can route by it.
		nc.ctx = nc.own.Overflowing(nc.over)
	}
	return nc
}

// nameOverflow returns the context of an entry of c whose zap name came past Tags.Max
// (Tags.FromName): c's own fields, then its name under TagOverflowKey. Made once per Core,
// by the first such entry (two at once may both make it: either is right).
func (c *Core) nameOverflow() *zapenc.Context {
	if ctx := c.nameOver.Load(); ctx != nil {
		return ctx
	}
	ctx := c.own.Overflowing("")
	c.nameOver.Store(ctx)
	return ctx
}

// isTagOption reports whether f is a Tag field.
func isTagOption(f zapcore.Field) bool {
	_, ok := f.Interface.(tagOption)
	return ok && f.Type == zapcore.SkipType
}

// Check decides whether ent is logged. While the info stream is shedding, it applies the
// degrade policy here, so a dropped entry costs no encoding; the drop is counted.
func (c *Core) Check(ent zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if !c.s.level.Enabled(ent.Level) || c.sink.consults() && !c.sink.admit(&ent, c.tag, c.tagged) {
		return ce
	}
	return ce.AddCore(ent, c)
}

// Write encodes the entry into its stream's buffers and returns; the entry is sent in the
// background. Entries above Error (DPanic, Panic, Fatal) are flushed before Write returns,
// within Timeouts.Sync: delivered, or — on the err stream (where Err.Level sends them by
// default), when the receiver cannot take them in time — moved with every other
// undelivered err entry to the spill (Spill.Dir, or Spill.Fallback), so a Fatal does not take
// its own entry down with the process. The error says if delivery failed, and whether the
// entries went to the spill.
// Entries that cannot be buffered are counted (info) or spilled (err: to Spill.Dir or
// Spill.Fallback); Write does not report those.
func (c *Core) Write(ent zapcore.Entry, fields []zapcore.Field) error {
	tag, ctx := c.tag, c.ctx
	if !c.tagged {
		if tag = c.sink.tagFor(&ent); tag.Over {
			ctx = c.nameOverflow() // its zap name, past Tags.Max, in the record
		}
	}
	c.sink.stream(ent.Level).Write(ctx, tag, &ent, fields)
	if ent.Level > zapcore.ErrorLevel {
		return c.sink.sync(c.s.syncTimeout, true)
	}
	return nil
}

// Sync flushes both streams and waits until everything logged before the call is delivered
// (or, for err, moved to the spill), or Timeouts.Sync passes (then it returns an error; the
// entries stay queued). It also returns the configuration problem, if New found one.
func (c *Core) Sync() error {
	return errors.Join(c.err, c.sink.sync(c.s.syncTimeout, false))
}

// Close flushes, tries for up to Timeouts.Close to deliver everything logged, and stops the
// senders. What is still undelivered then is accounted for: info entries are counted as
// dropped (reason shutdown), err entries are spilled (to Spill.Dir, for the next process to
// replay, or to Spill.Fallback). Close does not wait for the spill to be replayed; it releases
// Spill.Dir, and takes the core out of the live cores of its metrics on Config.Metrics.Registerer:
// its counts stay in the series, those it makes after Close included; the series are
// exported while a core with the same Metrics.ConstLabels is open, and dropped with the last core
// on the Registerer (see Config.Metrics.Registerer); Stats still works. Close is idempotent and
// safe to call while other goroutines log: later entries are counted as dropped (reason
// closed) or, for err, written to Spill.Fallback. It returns what went wrong, if anything;
// when it could not deliver everything in time, its error counts the info entries dropped
// and the err entries spilled, and the same report is written to Spill.Fallback as a last
// record (level error, logger "fluentcore", the counts in the fields shutdown_info_dropped
// and shutdown_err_spilled), where it is seen although no scrape reads the final counters.
func (c *Core) Close() error {
	err := c.sink.close(c.s.closeTimeout)
	c.leave.Do(func() { c.metrics.leave(c.member) })
	return errors.Join(c.err, err)
}

// Stats returns the core's counters, the same numbers as its Prometheus metrics. Safe for
// concurrent use; the numbers of a running core are read one by one, not as a snapshot.
func (c *Core) Stats() Stats { return c.sink.stats() }

var _ zapcore.Core = (*Core)(nil)
