// Package fluentcore is a zapcore.Core that sends zap's entries to fluentd (or fluent-bit,
// Vector, the OpenTelemetry collector: any Fluent Forward receiver).
//
// Entries are encoded straight to MessagePack into buffers the core owns, and sent in the
// background on two streams with their own connections: info (Debug, Info, Warn) and err
// (Error and above). Under backpressure the info stream degrades — entries are sampled or
// dropped, each drop counted by reason — while err entries are delivered, or written to a
// fallback and counted, never lost silently.
//
//	caller: Check (level, degrade) -> Write: encode into a batch buffer (no allocation)
//	sink:   sealed batches -> one sender per stream -> PackedForward frames -> receiver
//
// Logging never blocks on I/O: the only waits a caller can see are an err entry finding the
// err buffers full (at most Config.ErrMaxWait) and the flush of a DPanic, Panic or Fatal
// entry (at most Config.SyncTimeout).
package fluentcore

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Defaults of Config's fields.
const (
	DefaultAddr            = "tcp://127.0.0.1:24224"
	DefaultTag             = "app"
	DefaultMaxBatchBytes   = 256 << 10
	DefaultMaxEntryBytes   = 64 << 10
	DefaultInfoBufferBytes = 8 << 20
	DefaultErrBufferBytes  = 4 << 20
	DefaultFlushInterval   = 500 * time.Millisecond
	DefaultErrMaxWait      = 50 * time.Millisecond
	DefaultSyncTimeout     = 5 * time.Second
	DefaultCloseTimeout    = 10 * time.Second
	DefaultDialTimeout     = 5 * time.Second
	DefaultWriteTimeout    = 10 * time.Second
	DefaultAckTimeout      = 30 * time.Second
	DefaultRetryMin        = 100 * time.Millisecond
	DefaultRetryMax        = 10 * time.Second
)

// maxBatchLimit keeps every frame under fluent-bit's 6144000-byte message limit, with room
// for the frame's header and option map.
const maxBatchLimit = 6_000_000

// StreamConfig configures one stream.
type StreamConfig struct {
	// Tag is the Forward tag of the stream's entries. Default: Config.Tag + ".info" for the
	// info stream, Config.Tag + ".err" for the err stream.
	Tag string
	// BufferBytes is the stream's buffer budget: the memory of all its batch buffers,
	// allocated once by New. Default 8 MiB for info, 4 MiB for err; at least
	// 2 × MaxBatchBytes.
	BufferBytes int
}

// Config configures a Core. The zero value is usable: every field has a documented default.
// Config is read once by New; changing it afterwards has no effect.
type Config struct {
	// Addr is the receiver: "tcp://host:port", "host:port", "tls://host:port" or
	// "unix:///path". Default DefaultAddr. The name is resolved again on every reconnect.
	Addr string
	// Tag is the base tag; the streams' tags default to Tag+".info" and Tag+".err".
	// Default DefaultTag ("app").
	Tag string
	// Info and Err configure the two streams.
	Info, Err StreamConfig
	// Level is the minimum level logged. Default zapcore.InfoLevel.
	Level zapcore.LevelEnabler
	// ErrLevel selects the entries sent on the err stream; a zapcore.Level works here.
	// Default zapcore.ErrorLevel.
	ErrLevel zapcore.LevelEnabler
	// EncoderConfig names the record's keys and encodes levels, callers, durations and time
	// fields, as in zap. Default: zap.NewProductionEncoderConfig() with no TimeKey, because
	// each entry's time travels as its Forward EventTime. A zero EncoderConfig (no keys and
	// no encoders) means the default.
	EncoderConfig zapcore.EncoderConfig
	// MaxBatchBytes is the size of one batch buffer, the largest frame payload sent.
	// Default DefaultMaxBatchBytes (256 KiB); at most 6,000,000 (fluent-bit's limit).
	MaxBatchBytes int
	// MaxEntryBytes is the largest encoded entry. A larger info entry is dropped (too_large);
	// a larger err entry is delivered with its largest string and binary values truncated,
	// each ending in "…(truncated N bytes)", and "<MessageKey>Truncated": true in its record
	// (it goes to ErrFallback whole only if truncating can't make it fit). Default
	// DefaultMaxEntryBytes (64 KiB); at most MaxBatchBytes.
	MaxEntryBytes int
	// FlushInterval is the longest an entry waits in a batch that is not full.
	// Default DefaultFlushInterval (500ms).
	FlushInterval time.Duration
	// ErrMaxWait bounds how long an err entry waits for room when the err buffers are full;
	// after it the entry goes to ErrFallback. Default DefaultErrMaxWait (50ms).
	ErrMaxWait time.Duration
	// ErrFallback receives err entries that cannot be delivered — buffers full past
	// ErrMaxWait, larger than MaxEntryBytes even truncated, logged after Close, or
	// undelivered when Close gives up — as JSON lines {"tag","time","record"}. Default
	// os.Stderr. Writes to it are serialised.
	ErrFallback io.Writer
	// SyncTimeout bounds Sync and the flush after a DPanic, Panic or Fatal entry.
	// Default DefaultSyncTimeout (5s).
	SyncTimeout time.Duration
	// CloseTimeout bounds how long Close tries to deliver what was logged.
	// Default DefaultCloseTimeout (10s).
	CloseTimeout time.Duration
	// DialTimeout bounds connecting (and the TLS handshake). Default 5s.
	DialTimeout time.Duration
	// WriteTimeout bounds writing one frame. Default 10s.
	WriteTimeout time.Duration
	// RequireAck asks the receiver to acknowledge every frame (at-least-once delivery:
	// a frame whose ack is lost is sent again, so duplicates are possible). Default false
	// (at-most-once, like fluentd's out_forward).
	RequireAck bool
	// AckTimeout bounds the wait for one ack. Default 30s.
	AckTimeout time.Duration
	// RetryMin and RetryMax bound the exponential backoff (with jitter) between attempts to
	// send a frame. Defaults 100ms and 10s.
	RetryMin, RetryMax time.Duration
	// TLS configures "tls://" addresses. Default: system roots, ServerName from Addr,
	// TLS 1.2 or later. A config without ServerName gets the one from Addr.
	TLS *tls.Config
	// Degrade tunes the info stream's degrade state machine.
	Degrade DegradeConfig
	// Registerer receives the core's Prometheus metrics. Default nil: none registered
	// (Core.Stats still reports them).
	Registerer prometheus.Registerer
	// ConstLabels are added to every metric, so that several cores can share a Registerer.
	ConstLabels prometheus.Labels
	// OnEvent, if set, is called on the sink's own goroutine when the info stream enters or
	// leaves the degraded state. It must not block or log through this core.
	OnEvent func(Event)
}

// EventKind says what an Event reports.
type EventKind int

const (
	// EventDegraded: the stream entered the degraded state.
	EventDegraded EventKind = iota
	// EventRecovered: the stream left the degraded state.
	EventRecovered
)

// String returns "degraded" or "recovered".
func (k EventKind) String() string {
	if k == EventRecovered {
		return "recovered"
	}
	return "degraded"
}

// Event is a state change of a stream, passed to Config.OnEvent.
type Event struct {
	Kind   EventKind
	Stream string // "info"
	Time   time.Time
}

// Validate reports the first problem that keeps cfg from working as written: a malformed
// address, a negative or inconsistent size or duration. It is for callers who want to fail
// fast; New accepts any Config.
func (cfg Config) Validate() error {
	var errs []error
	addr := cfg.Addr
	if addr == "" {
		addr = DefaultAddr
	}
	if _, _, _, err := parseAddr(addr); err != nil {
		errs = append(errs, err)
	}
	batch := orDefault(cfg.MaxBatchBytes, DefaultMaxBatchBytes)
	switch {
	case cfg.MaxBatchBytes < 0 || (cfg.MaxBatchBytes > 0 && cfg.MaxBatchBytes < 1024) || cfg.MaxBatchBytes > maxBatchLimit:
		errs = append(errs, fmt.Errorf("fluentcore: MaxBatchBytes %d is outside [1024, %d]", cfg.MaxBatchBytes, maxBatchLimit))
	case cfg.MaxEntryBytes < 0 || cfg.MaxEntryBytes > batch:
		errs = append(errs, fmt.Errorf("fluentcore: MaxEntryBytes %d is outside [0, MaxBatchBytes=%d]", cfg.MaxEntryBytes, batch))
	}
	for _, sc := range []struct {
		name string
		v    int
	}{{"Info.BufferBytes", cfg.Info.BufferBytes}, {"Err.BufferBytes", cfg.Err.BufferBytes}} {
		if sc.v < 0 || (sc.v > 0 && sc.v < 2*batch) {
			errs = append(errs, fmt.Errorf("fluentcore: %s %d is less than 2 × MaxBatchBytes (%d)", sc.name, sc.v, 2*batch))
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"FlushInterval", cfg.FlushInterval}, {"ErrMaxWait", cfg.ErrMaxWait}, {"SyncTimeout", cfg.SyncTimeout},
		{"CloseTimeout", cfg.CloseTimeout}, {"DialTimeout", cfg.DialTimeout}, {"WriteTimeout", cfg.WriteTimeout},
		{"AckTimeout", cfg.AckTimeout}, {"RetryMin", cfg.RetryMin}, {"RetryMax", cfg.RetryMax}} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("fluentcore: %s is negative (%v)", d.name, d.v))
		}
	}
	dg := cfg.Degrade.withDefaults()
	if dg.HighWatermark > 1 || dg.LowWatermark >= dg.HighWatermark {
		errs = append(errs, fmt.Errorf("fluentcore: Degrade watermarks need 0 < low (%v) < high (%v) <= 1", dg.LowWatermark, dg.HighWatermark))
	}
	if dg.Policy < DegradeSample || dg.Policy > DegradeOff {
		errs = append(errs, fmt.Errorf("fluentcore: unknown Degrade.Policy %d", dg.Policy))
	}
	return errors.Join(errs...)
}

// settings is a Config with defaults applied, read by every part of the sink.
type settings struct {
	tags                                  [numStreams]string
	level                                 zapcore.LevelEnabler
	split                                 levelSplit
	enc                                   *encoderConfig
	infoBufferBytes, errBufferBytes       int
	batchBytes, entryBytes                int
	flushInterval, errMaxWait             time.Duration
	syncTimeout, closeTimeout             time.Duration
	dialTimeout, writeTimeout, ackTimeout time.Duration
	retryMin, retryMax                    time.Duration
	requireAck                            bool
	network, address                      string
	useTLS                                bool
	tlsConfig                             *tls.Config
	addrErr                               error // a bad Addr: every send fails with it
	degrade                               DegradeConfig
	errFallback                           io.Writer
	onEvent                               func(Event)
}

func orDefault[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// resolve applies defaults. Values Validate rejects are replaced by their defaults, except
// the address, whose error every send reports.
func resolve(cfg Config) *settings {
	s := &settings{
		level:         cfg.Level,
		split:         newLevelSplit(cfg.ErrLevel),
		batchBytes:    orDefault(cfg.MaxBatchBytes, DefaultMaxBatchBytes),
		flushInterval: orDefault(cfg.FlushInterval, DefaultFlushInterval),
		errMaxWait:    orDefault(cfg.ErrMaxWait, DefaultErrMaxWait),
		syncTimeout:   orDefault(cfg.SyncTimeout, DefaultSyncTimeout),
		closeTimeout:  orDefault(cfg.CloseTimeout, DefaultCloseTimeout),
		dialTimeout:   orDefault(cfg.DialTimeout, DefaultDialTimeout),
		writeTimeout:  orDefault(cfg.WriteTimeout, DefaultWriteTimeout),
		ackTimeout:    orDefault(cfg.AckTimeout, DefaultAckTimeout),
		retryMin:      orDefault(cfg.RetryMin, DefaultRetryMin),
		retryMax:      orDefault(cfg.RetryMax, DefaultRetryMax),
		requireAck:    cfg.RequireAck,
		degrade:       cfg.Degrade,
		errFallback:   cfg.ErrFallback,
		onEvent:       cfg.OnEvent,
	}
	if s.level == nil {
		s.level = zapcore.InfoLevel
	}
	if s.batchBytes < 1024 || s.batchBytes > maxBatchLimit {
		s.batchBytes = DefaultMaxBatchBytes
	}
	s.entryBytes = orDefault(cfg.MaxEntryBytes, min(DefaultMaxEntryBytes, s.batchBytes))
	if s.entryBytes > s.batchBytes {
		s.entryBytes = s.batchBytes
	}
	s.infoBufferBytes = max(orDefault(cfg.Info.BufferBytes, DefaultInfoBufferBytes), 2*s.batchBytes)
	s.errBufferBytes = max(orDefault(cfg.Err.BufferBytes, DefaultErrBufferBytes), 2*s.batchBytes)
	if s.retryMax < s.retryMin {
		s.retryMax = s.retryMin
	}
	if s.errFallback == nil {
		s.errFallback = os.Stderr
	}
	if cfg.Tag == "" {
		cfg.Tag = DefaultTag
	}
	s.tags = streamTags(&cfg)

	ec := cfg.EncoderConfig
	if isZeroEncoderConfig(ec) {
		ec = zap.NewProductionEncoderConfig()
		ec.TimeKey = ""
	}
	s.enc = newEncoderConfig(ec)

	addr := cfg.Addr
	if addr == "" {
		addr = DefaultAddr
	}
	s.network, s.address, s.useTLS, s.addrErr = parseAddr(addr)
	if s.useTLS {
		if cfg.TLS != nil {
			s.tlsConfig = cfg.TLS.Clone()
		} else {
			s.tlsConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		if s.tlsConfig.ServerName == "" {
			host, _, _ := net.SplitHostPort(s.address)
			s.tlsConfig.ServerName = host
		}
	}
	return s
}

func isZeroEncoderConfig(c zapcore.EncoderConfig) bool {
	return c.MessageKey == "" && c.LevelKey == "" && c.TimeKey == "" && c.NameKey == "" &&
		c.CallerKey == "" && c.FunctionKey == "" && c.StacktraceKey == "" &&
		c.EncodeLevel == nil && c.EncodeTime == nil && c.EncodeDuration == nil &&
		c.EncodeCaller == nil && c.EncodeName == nil
}

// newBackoff returns the retry schedule of one sender: exponential with jitter, never
// giving up, reset after each delivered batch.
func (s *settings) newBackoff() backoff.BackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = s.retryMin
	b.MaxInterval = s.retryMax
	b.MaxElapsedTime = 0
	b.Reset()
	return b
}

// Core is a zapcore.Core that forwards entries to a Fluent Forward receiver. It is safe for
// concurrent use. Cores returned by With share their parent's sink: closing any of them
// closes it for all.
type Core struct {
	sink *sink
	ctx  *encodedContext
}

// New returns a Core for cfg. It never fails and never blocks on the network: it allocates
// the buffers and starts the senders, which connect in the background and retry with
// backoff. A Config that Validate rejects still gives a working Core: bad sizes fall back
// to their defaults, a bad address makes every send fail, and Sync and Close return the
// problem (so does a failed metrics registration).
func New(cfg Config) *Core {
	err := cfg.Validate()
	k := newSink(resolve(cfg), cfg.ConstLabels)
	if cfg.Registerer != nil {
		if rerr := cfg.Registerer.Register(k.metrics); rerr != nil {
			err = errors.Join(err, fmt.Errorf("fluentcore: register metrics: %w", rerr))
		}
	}
	k.configErr = err
	return &Core{sink: k}
}

// Enabled reports whether entries at level l are logged.
func (c *Core) Enabled(l zapcore.Level) bool { return c.sink.settings.level.Enabled(l) }

// Level returns the minimum enabled level (for zap.Logger.Level and zapcore.LevelOf).
func (c *Core) Level() zapcore.Level { return zapcore.LevelOf(c.sink.settings.level) }

// With returns a Core that adds fields to every entry. The fields are encoded once, here.
func (c *Core) With(fields []zapcore.Field) zapcore.Core {
	if len(fields) == 0 {
		return c
	}
	return &Core{sink: c.sink, ctx: c.sink.settings.enc.newContext(c.ctx, fields)}
}

// Check decides whether ent is logged. While the info stream is degraded, it applies the
// degrade policy here, so a dropped entry costs no encoding; the drop is counted.
func (c *Core) Check(ent zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	s := c.sink.settings
	if !s.level.Enabled(ent.Level) {
		return ce
	}
	if s.split.streamFor(ent.Level) == infoStream {
		info := c.sink.streams[infoStream]
		if info.degrade.active.Load() {
			if ok, reason := info.degrade.admit(ent); !ok {
				info.countCheckDrop(reason)
				return ce
			}
		}
	}
	return ce.AddCore(ent, c)
}

// Write encodes the entry into its stream's buffers and returns; the entry is sent in the
// background. Entries above Error (DPanic, Panic, Fatal) are flushed before Write returns,
// within SyncTimeout; the error says if that failed. Entries that cannot be buffered are
// counted (info) or written to ErrFallback (err); Write does not report those.
func (c *Core) Write(ent zapcore.Entry, fields []zapcore.Field) error {
	k := c.sink
	k.streams[k.settings.split.streamFor(ent.Level)].write(c.ctx, ent, fields)
	if ent.Level > zapcore.ErrorLevel {
		return k.sync(k.settings.syncTimeout)
	}
	return nil
}

// Sync flushes both streams and waits until everything logged before the call is delivered,
// or SyncTimeout passes (then it returns an error; the entries stay queued). It also
// returns the configuration problem, if New found one.
func (c *Core) Sync() error {
	return errors.Join(c.sink.configErr, c.sink.sync(c.sink.settings.syncTimeout))
}

// Close flushes, tries for up to CloseTimeout to deliver everything logged, and stops the
// senders. What is still undelivered then is accounted for: info entries are counted as
// dropped (reason shutdown), err entries are written to ErrFallback. Close is idempotent and
// safe to call while other goroutines log: later entries are counted as dropped (reason
// closed) or, for err, written to ErrFallback. It returns what went wrong, if anything.
func (c *Core) Close() error {
	return errors.Join(c.sink.configErr, c.sink.close(c.sink.settings.closeTimeout))
}

// Stats returns the core's counters, the same numbers as its Prometheus metrics. Safe for
// concurrent use; the numbers of a running core are read one by one, not as a snapshot.
func (c *Core) Stats() Stats {
	return Stats{Info: c.sink.streams[infoStream].stats(), Err: c.sink.streams[errStream].stats()}
}

var _ zapcore.Core = (*Core)(nil)
