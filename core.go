package fluentcore

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"io/fs"
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
	DefaultSpillAfter      = 5 * time.Second
	DefaultSpillMaxBytes   = 256 << 20
)

// maxBatchLimit keeps every frame under fluent-bit's 6144000-byte message limit, with room
// for the frame's header and option map.
const maxBatchLimit = 6_000_000

// StreamConfig configures one stream.
type StreamConfig struct {
	// Tag is the Forward tag of the stream's entries. Default: Config.Tag + ".info" for the
	// info stream, Config.Tag + ".err" for the err stream.
	Tag string `json:"tag,omitempty" yaml:"tag,omitempty"`
	// BufferBytes is the stream's buffer budget: the memory of all its batch buffers,
	// allocated once by New. Default 8 MiB for info, 4 MiB for err; at least
	// 2 × MaxBatchBytes.
	BufferBytes int `json:"buffer_bytes,omitempty" yaml:"buffer_bytes,omitempty"`
}

// Config configures a Core. The zero value is usable: every field has a documented default.
// Config is read once by New; changing it afterwards has no effect.
type Config struct {
	// Addr is the receiver: "tcp://host:port", "host:port", "tls://host:port" or
	// "unix:///path". Default DefaultAddr, unless Servers is set (then Addr must be empty).
	// The name is resolved again on every reconnect.
	Addr string `json:"addr,omitempty" yaml:"addr,omitempty"`
	// Tag is the base tag; the streams' tags default to Tag+".info" and Tag+".err".
	// Default DefaultTag ("app").
	Tag string `json:"tag,omitempty" yaml:"tag,omitempty"`
	// Info and Err configure the two streams.
	Info StreamConfig `json:"info,omitempty" yaml:"info,omitempty"`
	Err  StreamConfig `json:"err,omitempty" yaml:"err,omitempty"`
	// Level is the minimum level logged. Default zapcore.InfoLevel.
	Level zapcore.LevelEnabler `json:"level,omitempty" yaml:"level,omitempty"`
	// ErrLevel selects the entries sent on the err stream; a zapcore.Level works here.
	// Default zapcore.ErrorLevel.
	ErrLevel zapcore.LevelEnabler `json:"err_level,omitempty" yaml:"err_level,omitempty"`
	// EncoderConfig names the record's keys and encodes levels, callers, durations and time
	// fields, as in zap. Default: zap.NewProductionEncoderConfig() with no TimeKey, because
	// each entry's time travels as its Forward EventTime. A zero EncoderConfig (no keys and
	// no encoders) means the default.
	EncoderConfig zapcore.EncoderConfig `json:"-" yaml:"-"`
	// MaxBatchBytes is the size of one batch buffer, the largest frame payload sent.
	// Default DefaultMaxBatchBytes (256 KiB); at most 6,000,000 (fluent-bit's limit).
	MaxBatchBytes int `json:"max_batch_bytes,omitempty" yaml:"max_batch_bytes,omitempty"`
	// MaxEntryBytes is the largest encoded entry. A larger info entry is dropped (too_large);
	// a larger err entry is delivered with its largest string and binary values truncated,
	// each ending in "…(truncated N bytes)", and "<MessageKey>Truncated": true in its record
	// (it goes to the spill, SpillDir or ErrFallback, whole only if truncating can't make it
	// fit). Default DefaultMaxEntryBytes (64 KiB); at most MaxBatchBytes.
	MaxEntryBytes int `json:"max_entry_bytes,omitempty" yaml:"max_entry_bytes,omitempty"`
	// FlushInterval is the longest an info entry waits in a batch that is not full. Err
	// entries do not wait for it: the err sender seals and sends them as soon as it is free
	// (entries logged while it sends share the next frame). Default DefaultFlushInterval
	// (500ms).
	FlushInterval time.Duration `json:"flush_interval,omitempty" yaml:"flush_interval,omitempty"`
	// ErrMaxWait bounds how long an err entry waits for room when the err buffers are full;
	// after it the entry goes to the spill (SpillDir) or ErrFallback. Default
	// DefaultErrMaxWait (50ms).
	ErrMaxWait time.Duration `json:"err_max_wait,omitempty" yaml:"err_max_wait,omitempty"`
	// ErrFallback receives err entries that cannot be delivered — buffers full past
	// ErrMaxWait, larger than MaxEntryBytes even truncated, logged after Close, or undelivered when Close
	// gives up — as JSON lines {"tag","time","record"}. Default os.Stderr. Writes to it are
	// serialised. With SpillDir those entries go to the spill instead, and ErrFallback only
	// gets what the spill cannot take: entries refused because the spill is full
	// (counted as dropped, spill_full) or because writing it failed (spill_failed), entries
	// logged after Close, and entries too large for any frame (over 6,144,000 bytes).
	ErrFallback io.Writer `json:"-" yaml:"-"`
	// SpillDir turns on the durable err spill: a directory (created if missing, mode 0700)
	// where err batches that cannot be delivered are appended to segment files in Forward
	// wire format, fsynced, and replayed in order — before newer err entries — once the
	// receiver is back, also by the next process after a crash. See the README's "Durable
	// err spill". Default "": off, err entries that cannot be delivered go to ErrFallback.
	// The directory is locked (flock) for the life of the core; if it cannot be created or
	// locked (another core uses it), the core runs without a spill and New reports the
	// problem through Sync, Close and OnEvent (EventSpillDisabled).
	SpillDir string `json:"spill_dir,omitempty" yaml:"spill_dir,omitempty"`
	// SpillAfter is how long the err stream keeps retrying a batch in memory before it
	// moves its batches to the spill. The err buffers filling up past ErrMaxWait moves them
	// at once. Default DefaultSpillAfter (5s). Only with SpillDir.
	SpillAfter time.Duration `json:"spill_after,omitempty" yaml:"spill_after,omitempty"`
	// SpillMaxBytes bounds the spill's segment files; an err entry that does not fit is
	// counted as dropped (spill_full) and written to ErrFallback. Default
	// DefaultSpillMaxBytes (256 MiB); at least 2 × MaxBatchBytes. Only with SpillDir.
	SpillMaxBytes int64 `json:"spill_max_bytes,omitempty" yaml:"spill_max_bytes,omitempty"`
	// SyncTimeout bounds Sync and the flush after a DPanic, Panic or Fatal entry.
	// Default DefaultSyncTimeout (5s).
	SyncTimeout time.Duration `json:"sync_timeout,omitempty" yaml:"sync_timeout,omitempty"`
	// CloseTimeout bounds how long Close tries to deliver what was logged.
	// Default DefaultCloseTimeout (10s).
	CloseTimeout time.Duration `json:"close_timeout,omitempty" yaml:"close_timeout,omitempty"`
	// DialTimeout bounds connecting, TLS handshake included. Default 5s.
	DialTimeout time.Duration `json:"dial_timeout,omitempty" yaml:"dial_timeout,omitempty"`
	// HandshakeTimeout bounds the shared-key handshake (HELO, PING, PONG) of a new
	// connection. Default: DialTimeout.
	HandshakeTimeout time.Duration `json:"handshake_timeout,omitempty" yaml:"handshake_timeout,omitempty"`
	// WriteTimeout bounds writing one frame. Default 10s.
	WriteTimeout time.Duration `json:"write_timeout,omitempty" yaml:"write_timeout,omitempty"`
	// RequireAck asks the receiver to acknowledge every frame (at-least-once delivery:
	// a frame whose ack is lost is sent again, so duplicates are possible). Default false
	// (at-most-once, like fluentd's out_forward).
	RequireAck bool `json:"require_ack,omitempty" yaml:"require_ack,omitempty"`
	// AckTimeout bounds the wait for one ack. Default 30s.
	AckTimeout time.Duration `json:"ack_timeout,omitempty" yaml:"ack_timeout,omitempty"`
	// RetryMin and RetryMax bound the exponential backoff (with jitter) between attempts to
	// send a frame. Defaults 100ms and 10s.
	RetryMin time.Duration `json:"retry_min,omitempty" yaml:"retry_min,omitempty"`
	RetryMax time.Duration `json:"retry_max,omitempty" yaml:"retry_max,omitempty"`
	// TLS configures "tls://" addresses: RootCAs, client Certificates for mutual TLS,
	// ServerName, versions. Default: system roots, TLS 1.2 or later. A config without
	// ServerName gets the host of each address. The receiver's certificate is verified
	// unless InsecureSkipVerify is set.
	TLS *tls.Config `json:"-" yaml:"-"`
	// Compression is "" (the default: PackedForward, entries as bin) or "gzip"
	// (CompressedPackedForward: each batch is one gzip member, options say
	// "compressed":"gzip"). Anything else is a Validate error and means "".
	Compression string `json:"compression,omitempty" yaml:"compression,omitempty"`
	// SharedKey, if set, makes every new connection run the shared_key handshake
	// (HELO/PING/PONG) before any data is sent. Default "" (no handshake). A failed
	// handshake is an error wrapping ErrHandshake (never containing the key or the
	// password), counted in fluentcore_handshake_failures_total; the sender keeps retrying
	// with backoff.
	SharedKey string `json:"shared_key,omitempty" yaml:"shared_key,omitempty"`
	// SelfHostname is the client's name in the handshake. It must differ from the
	// receiver's self_hostname (fluentd's rule: otherwise the receiver's proof would be our
	// own). Default os.Hostname(), or "localhost" if that fails.
	SelfHostname string `json:"self_hostname,omitempty" yaml:"self_hostname,omitempty"`
	// Username and Password answer a receiver that asks for user authentication in its
	// HELO (fluentd's user_auth, fluent-bit's security.users). They need SharedKey.
	// Default "" (none).
	Username string `json:"username,omitempty" yaml:"username,omitempty"`
	Password string `json:"password,omitempty" yaml:"password,omitempty"`
	// Servers, if set, replaces Addr by several receivers: new connections go to the
	// servers that are up by weighted round robin, standbys take over while every other
	// server is down, and a server that fails is left alone for its own backoff (RetryMin
	// to RetryMax, with jitter) before it is tried again. Each stream keeps its connection
	// until it fails. Default nil: Addr only.
	Servers []Server `json:"servers,omitempty" yaml:"servers,omitempty"`
	// Degrade tunes the info stream's degrade state machine.
	Degrade DegradeConfig `json:"degrade,omitempty" yaml:"degrade,omitempty"`
	// Registerer receives the core's Prometheus metrics. Default nil: none registered
	// (Core.Stats still reports them).
	Registerer prometheus.Registerer `json:"-" yaml:"-"`
	// ConstLabels are added to every metric, so that several cores can share a Registerer.
	ConstLabels prometheus.Labels `json:"const_labels,omitempty" yaml:"const_labels,omitempty"`
	// OnEvent, if set, is called when the info stream enters or leaves the degraded state
	// (on the sink's own goroutine) and on spill events: EventSpillDisabled,
	// EventSpillFull, EventSpillCorrupt, EventSpillFailed (on the goroutine that met the
	// condition, which may be a logging one). It must not block or log through this core.
	OnEvent func(Event) `json:"-" yaml:"-"`
}

// EventKind says what an Event reports.
type EventKind int

const (
	// EventDegraded reports that the stream entered the degraded state.
	EventDegraded EventKind = iota
	// EventRecovered reports that the stream left the degraded state.
	EventRecovered
	// EventSpillDisabled reports that SpillDir cannot be used (not creatable, or locked by another
	// core); err entries go to ErrFallback. Reported once, when the err sender starts.
	EventSpillDisabled
	// EventSpillFull reports that the spill reached SpillMaxBytes; err entries it refuses are counted
	// (spill_full) and written to ErrFallback. Reported once per episode.
	EventSpillFull
	// EventSpillCorrupt reports that a damaged segment tail (a frame cut by a crash, garbage) was
	// skipped during replay; the frames before it were replayed.
	EventSpillCorrupt
	// EventSpillFailed reports that writing or deleting a segment failed.
	EventSpillFailed
)

var eventKindNames = [...]string{"degraded", "recovered", "spill_disabled", "spill_full", "spill_corrupt", "spill_failed"}

// String returns "degraded", "recovered", "spill_disabled", "spill_full", "spill_corrupt"
// or "spill_failed" ("degraded" for an unknown value).
func (k EventKind) String() string {
	if k < 0 || int(k) >= len(eventKindNames) {
		return eventKindNames[0]
	}
	return eventKindNames[k]
}

// Event is a state change of a stream, passed to Config.OnEvent.
type Event struct {
	Kind   EventKind
	Stream string // "info" for degrade events, "err" for spill events
	Time   time.Time
	Err    error // for spill events: what happened, naming the directory or segment
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
	switch {
	case len(cfg.Servers) > 0 && cfg.Addr != "":
		errs = append(errs, errors.New("fluentcore: set Addr or Servers, not both"))
	case len(cfg.Servers) > 0:
		for _, srv := range cfg.Servers {
			if _, err := newEndpoint(srv, nil); err != nil {
				errs = append(errs, err)
			}
		}
	default:
		if _, _, _, err := parseAddr(addr); err != nil {
			errs = append(errs, err)
		}
	}
	if cfg.Compression != "" && cfg.Compression != compressGzip {
		errs = append(errs, fmt.Errorf("fluentcore: Compression %q: want \"\" or \"gzip\"", cfg.Compression))
	}
	if cfg.SharedKey == "" && (cfg.Username != "" || cfg.Password != "") {
		errs = append(errs, errors.New("fluentcore: Username and Password need a SharedKey"))
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
		{"CloseTimeout", cfg.CloseTimeout}, {"DialTimeout", cfg.DialTimeout}, {"HandshakeTimeout", cfg.HandshakeTimeout}, {"WriteTimeout", cfg.WriteTimeout},
		{"AckTimeout", cfg.AckTimeout}, {"RetryMin", cfg.RetryMin}, {"RetryMax", cfg.RetryMax},
		{"SpillAfter", cfg.SpillAfter}} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("fluentcore: %s is negative (%v)", d.name, d.v))
		}
	}
	if cfg.SpillMaxBytes < 0 || (cfg.SpillMaxBytes > 0 && cfg.SpillMaxBytes < 2*int64(batch)) {
		errs = append(errs, fmt.Errorf("fluentcore: SpillMaxBytes %d is less than 2 × MaxBatchBytes (%d)", cfg.SpillMaxBytes, 2*batch))
	}
	if cfg.SpillDir != "" {
		// A missing directory is fine: New creates it.
		if fi, err := os.Stat(cfg.SpillDir); err == nil && !fi.IsDir() {
			errs = append(errs, fmt.Errorf("fluentcore: SpillDir %s is not a directory", cfg.SpillDir))
		} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("fluentcore: SpillDir: %w", err))
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
	handshakeTimeout                      time.Duration
	retryMin, retryMax                    time.Duration
	requireAck                            bool
	compression                           string       // "" or "gzip"
	endpoints                             []endpoint   // Addr, or Servers; at least one
	creds                                 *credentials // nil: no handshake
	addrErr                               error        // a bad Addr or server: every send fails with it
	degrade                               DegradeConfig
	errFallback                           io.Writer
	spillDir                              string
	spillAfter                            time.Duration
	spillMaxBytes                         int64
	onEvent                               func(Event)
}

func orDefault[T int | int64 | time.Duration](v, def T) T {
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
		spillDir:      cfg.SpillDir,
		spillAfter:    orDefault(cfg.SpillAfter, DefaultSpillAfter),
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
	s.spillMaxBytes = max(orDefault(cfg.SpillMaxBytes, DefaultSpillMaxBytes), 2*int64(s.batchBytes))
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

	s.handshakeTimeout = orDefault(cfg.HandshakeTimeout, s.dialTimeout)
	if cfg.Compression == compressGzip {
		s.compression = compressGzip
	}
	if cfg.SharedKey != "" {
		s.creds = &credentials{sharedKey: cfg.SharedKey, selfHostname: cfg.SelfHostname, username: cfg.Username, password: cfg.Password}
		if s.creds.selfHostname == "" {
			s.creds.selfHostname = defaultHostname()
		}
	}
	servers := cfg.Servers
	if len(servers) == 0 {
		addr := cfg.Addr
		if addr == "" {
			addr = DefaultAddr
		}
		servers = []Server{{Addr: addr}}
	} else if cfg.Addr != "" {
		s.addrErr = errors.New("fluentcore: set Addr or Servers, not both")
	}
	for _, srv := range servers {
		ep, err := newEndpoint(srv, cfg.TLS)
		if err != nil && s.addrErr == nil {
			s.addrErr = err
		}
		s.endpoints = append(s.endpoints, ep)
	}
	return s
}

// defaultHostname is SelfHostname's default.
func defaultHostname() string {
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return "localhost"
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
	err = errors.Join(err, k.spillErr)
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
// background. Entries above Error (DPanic, Panic, Fatal) are flushed before Write returns
// (delivered, or moved to the spill), within SyncTimeout; the error says if that failed.
// Entries that cannot be buffered are counted (info) or spilled (err: to SpillDir or
// ErrFallback); Write does not report those.
func (c *Core) Write(ent zapcore.Entry, fields []zapcore.Field) error {
	k := c.sink
	k.streams[k.settings.split.streamFor(ent.Level)].write(c.ctx, ent, fields)
	if ent.Level > zapcore.ErrorLevel {
		return k.sync(k.settings.syncTimeout)
	}
	return nil
}

// Sync flushes both streams and waits until everything logged before the call is delivered
// (or, for err, moved to the spill), or SyncTimeout passes (then it returns an error; the
// entries stay queued). It also returns the configuration problem, if New found one.
func (c *Core) Sync() error {
	return errors.Join(c.sink.configErr, c.sink.sync(c.sink.settings.syncTimeout))
}

// Close flushes, tries for up to CloseTimeout to deliver everything logged, and stops the
// senders. What is still undelivered then is accounted for: info entries are counted as
// dropped (reason shutdown), err entries are spilled (to SpillDir, for the next process to
// replay, or to ErrFallback). Close does not wait for the spill to be replayed; it releases
// SpillDir. Close is idempotent and safe to call while other goroutines log: later entries
// are counted as dropped (reason closed) or, for err, written to ErrFallback. It returns
// what went wrong, if anything.
func (c *Core) Close() error {
	return errors.Join(c.sink.configErr, c.sink.close(c.sink.settings.closeTimeout))
}

// Stats returns the core's counters, the same numbers as its Prometheus metrics. Safe for
// concurrent use; the numbers of a running core are read one by one, not as a snapshot.
func (c *Core) Stats() Stats {
	return Stats{Info: c.sink.streams[infoStream].stats(), Err: c.sink.streams[errStream].stats()}
}

var _ zapcore.Core = (*Core)(nil)
