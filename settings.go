package fluentcore

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net"
	"os"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cenkalti/backoff/v4"
	"github.com/fluentcore/fluentcore/internal/dial"
	"github.com/fluentcore/fluentcore/internal/spill"
	"github.com/fluentcore/fluentcore/internal/stream"
	"github.com/fluentcore/fluentcore/internal/wire"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	"go.uber.org/zap/zapcore"
)

// Validate reports every problem that keeps cfg from working as written: a malformed
// address, a negative or inconsistent size or duration, a duration under MinInterval, a
// secret file that cannot be read or holds nothing, Metrics.ConstLabels the metrics cannot
// carry, joined into one error; each problem names its field by its path in Config
// (Transport.MaxBatchBytes, Spill.Dir). It is for callers who want to fail fast; New accepts
// any Config and reports the same error from Sync and Close. Safe for concurrent use: it
// changes nothing, and looks no further than cfg, Spill.Dir's status and the host name.
func (cfg Config) Validate() error {
	_, err := resolve(cfg)
	return err
}

// settings is a Config with every default applied. It is built once, by resolve, and never
// changed. resolve fills the parts' own settings (conn, stream, spill) and each part is handed
// only its own: a forwarder sees where and how to connect, a stream how big its batches are,
// the err policy where to spill; the rest is the sink's and the core's.
type settings struct {
	// clock is where the sink, its streams and their connections read the time and get the
	// clock's tickers: zapcore.DefaultClock, or a test's. Not in Config: an entry's time is
	// zap's (zap.WithClock), and Go's runtime still times the sockets' deadlines and the
	// plain waits (timers). resolve copies it into the parts' settings.
	clock                           zapcore.Clock
	tags                            [numStreams]string
	tagBase                         string      // Config.Tag, for TagTemplate's {tag}
	tagTemplate                     tagTemplate // Config.TagTemplate, parsed (tags.go)
	maxTags                         int         // Config.MaxTags
	tagFromName                     bool        // Config.TagFromName
	level                           zapcore.LevelEnabler
	split                           levelSplit
	infoBufferBytes, errBufferBytes int
	infoConnections                 int // senders of the info stream (0: one per server, up to conn.spreadMost); the err stream has one
	flushInterval                   time.Duration
	syncTimeout, closeTimeout       time.Duration
	degrade                         DegradeConfig // every field set
	acks                            [numStreams]bool
	onEvent                         eventFunc
	// registerer and constLabels are where and under what the core's metrics are
	// registered: Config's Registerer, else prometheus.DefaultRegisterer, the labels copied;
	// registerer is nil with NoMetrics, both nil when the labels are refused.
	registerer  prometheus.Registerer
	constLabels prometheus.Labels

	conn   connSettings         // every forwarder's
	stream stream.Settings      // both streams'
	spill  stream.SpillSettings // the err stream's policy's
}

// connSettings is what a forwarder needs: the servers, the credentials, the framing and the
// waits of one connection, and its retry schedule.
type connSettings struct {
	clock                                 zapcore.Clock
	endpoints                             []dial.Endpoint   // Addr, or Servers; at least one
	creds                                 *wire.Credentials // nil: no handshake
	addrErr                               error             // a bad Addr or server: every send fails with it
	compression                           string            // "" or wire.Gzip
	requireAck                            bool
	maxInflight                           int // frames in flight per connection, before the stream's bound
	dialTimeout, writeTimeout, ackTimeout time.Duration
	handshakeTimeout                      time.Duration
	retryMin, retryMax                    time.Duration
	resolver                              dial.Resolver // looks the servers' names up
	resolveInterval                       time.Duration // between lookups
	spreadMost                            int           // the most connections a stream opens by default, one per server
	dial                                  dial.Func     // opens a transport: given an address, never a name
}

func orDefault[T int | int64 | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// resolve applies the defaults and checks cfg. It is the one place that does either:
// Validate returns its error, New uses its settings, and the parts that each resolve one
// concern (checkAcks to resolveEncoder below) are called from here alone, in the order their
// problems are listed in the error. A value the error reports is replaced by its default,
// except the address, whose error every send reports, the degrade watermarks and policy,
// which are kept as given, and Metrics.ConstLabels, which leave the metrics unregistered
// (without them, cores told apart by them would share their series).
func resolve(cfg Config) (*settings, error) {
	var errs []error
	s := &settings{
		level:   cfg.Level,
		split:   newLevelSplit(cfg.Err.Level),
		onEvent: cfg.OnEvent,
		spill: stream.SpillSettings{
			Fallback: cmp.Or[io.Writer](cfg.Spill.Fallback, os.Stderr),
		},
	}
	if cfg.OnEvent != nil {
		s.spill.OnSpill = func(kind spill.EventKind, err error) {
			events := [...]EventKind{spill.Full: EventSpillFull, spill.Corrupt: EventSpillCorrupt, spill.Failed: EventSpillFailed}
			s.onEvent.emit(s.clock.Now(), errStream, events[kind], err)
		}
	}
	if s.level == nil {
		s.level = zapcore.InfoLevel
	}
	checkAcks(cfg.Info.Acks, cfg.Err.Acks, &errs)
	s.conn.resolveConnection(cfg, &errs)
	s.acks = resolveAcks(cfg.Info.Acks, cfg.Err.Acks, s.conn.endpoints)
	batch := s.resolveSizes(cfg, &errs)
	s.resolveDurations(cfg, &errs)
	s.conn.resolveResolver(cfg.Transport.Resolver, &errs)
	s.degrade = resolveDegrade(cfg.Degrade, &errs)
	resolveSpill(&s.spill, cfg.Spill.Dir, cfg.Spill.MaxBytes, batch, s.stream.BatchBytes, &errs)
	checkDegrade(cfg.Degrade, s.degrade, &errs)
	s.registerer, s.constLabels = resolveMetrics(cfg.Metrics.Registerer, cfg.Metrics.Disabled, cfg.Metrics.ConstLabels, &errs)
	s.resolveTagSettings(cfg, &errs)
	s.stream.Enc = resolveEncoder(cfg.EncoderConfig)
	s.spill.Enc, s.spill.BatchBytes, s.spill.EntryBytes = s.stream.Enc, s.stream.BatchBytes, s.stream.EntryBytes
	s.setClock(zapcore.DefaultClock)
	return s, errors.Join(errs...)
}

// badf adds a problem to errs, prefixed as every error of the package is.
func badf(errs *[]error, format string, args ...any) {
	*errs = append(*errs, fmt.Errorf("fluentcore: "+format, args...))
}

// checkAcks reports an Acks value of either stream that is none of the three.
func checkAcks(info, err Acks, errs *[]error) {
	for _, a := range []struct {
		name string
		v    Acks
	}{{"Info.Acks", info}, {"Err.Acks", err}} {
		if a.v < AcksDefault || a.v > AcksOff {
			badf(errs, "unknown %s %d", a.name, a.v)
		}
	}
}

// resolveAcks returns whether each stream asks for acks: the info stream with AcksOn only;
// the err stream unless AcksOff, and by default not when every endpoint is a unix socket
// (fluentd's in_unix never acks: there the err stream asks for acks only when Err.Acks
// says so).
func resolveAcks(info, err Acks, endpoints []dial.Endpoint) [numStreams]bool {
	var acks [numStreams]bool
	acks[infoStream] = info == AcksOn
	acks[errStream] = err != AcksOff && (err != AcksDefault || !onlyUnix(endpoints))
	return acks
}

// resolveConnection sets where and how a forwarder connects: the transport's dialer (TCP
// with keepalives), the secrets and TLS files read, the servers parsed, the compression,
// and the handshake's credentials. A problem with the secrets or the servers also becomes
// addrErr (resolveSecrets, resolveServers).
func (c *connSettings) resolveConnection(cfg Config, errs *[]error) {
	c.dial = (&net.Dialer{KeepAlive: 30 * time.Second}).DialContext
	c.resolveSecrets(&cfg, errs)
	for _, f := range []struct {
		name   string
		secret Secret
	}{{"Security.SharedKey", cfg.Security.SharedKey}, {"Security.Password", cfg.Security.Password}} {
		if f.secret.Reveal() == redactedSecret { // set in code, or read from its file
			err := fmt.Errorf("fluentcore: %s: %w", f.name, errRedactedSecret)
			*errs = append(*errs, err)
			c.addrErr = cmp.Or(c.addrErr, err)
		}
	}
	c.resolveServers(cfg, errs)
	switch cfg.Transport.Compression {
	case "":
	case wire.Gzip:
		c.compression = wire.Gzip
	default:
		badf(errs, "Transport.Compression %q: want \"\" or \"gzip\"", cfg.Transport.Compression)
	}
	sec := cfg.Security // its secrets' files read
	if !sec.SharedKey.IsZero() {
		c.creds = &wire.Credentials{SharedKey: sec.SharedKey.Reveal(), SelfHostname: sec.SelfHostname, Username: sec.Username, Password: sec.Password.Reveal()}
		if c.creds.SelfHostname == "" {
			c.creds.SelfHostname = defaultHostname()
		}
	} else if sec.Username != "" || !sec.Password.IsZero() {
		badf(errs, "Security.Username and Security.Password need a Security.SharedKey")
	}
}

// resolveSizes sets the sizes: a stream's batches and entries, the streams' buffer budgets,
// the info stream's connections, the frames in flight per connection. The batch comes first,
// since the others are bounded by it: they are checked against the batch size as configured
// and sized with the one in use (the default, if the configured one is out of range). Each
// is checked on its own, so that every one that is wrong is named. It returns the batch
// size as configured (its default when unset), the bound the other checks report.
func (s *settings) resolveSizes(cfg Config, errs *[]error) (batch int) {
	tr := cfg.Transport
	batch = orDefault(tr.MaxBatchBytes, DefaultMaxBatchBytes)
	b, c := &s.stream, &s.conn
	b.BatchBytes = batch
	if tr.MaxBatchBytes < 0 || (tr.MaxBatchBytes > 0 && tr.MaxBatchBytes < 1024) || tr.MaxBatchBytes > maxBatchLimit {
		badf(errs, "Transport.MaxBatchBytes %d is outside [1024, %d]", tr.MaxBatchBytes, maxBatchLimit)
		b.BatchBytes = DefaultMaxBatchBytes
	}
	if tr.MaxEntryBytes < 0 || tr.MaxEntryBytes > batch {
		badf(errs, "Transport.MaxEntryBytes %d is outside [0, Transport.MaxBatchBytes=%d]", tr.MaxEntryBytes, batch)
	}
	b.EntryBytes = min(orDefault(tr.MaxEntryBytes, min(DefaultMaxEntryBytes, b.BatchBytes)), b.BatchBytes)
	budget := func(name string, v, def int) int {
		if v < 0 || (v > 0 && v < 2*batch) {
			badf(errs, "%s %d is less than 2 × Transport.MaxBatchBytes (%d)", name, v, 2*batch)
		}
		return max(orDefault(v, def), 2*b.BatchBytes)
	}
	s.infoBufferBytes = budget("Info.BufferBytes", cfg.Info.BufferBytes, DefaultInfoBufferBytes)
	s.errBufferBytes = budget("Err.BufferBytes", cfg.Err.BufferBytes, DefaultErrBufferBytes)
	// Each sender holds a batch while it sends: half the batches stay for the writers.
	// 0 stays 0, one connection per server, which newForwarders counts.
	most := max(min(MaxConnections, s.infoBufferBytes/b.BatchBytes/2), 1)
	s.infoConnections, c.spreadMost = max(cfg.Info.Connections, 0), min(most, MaxSpread)
	if cfg.Info.Connections < 0 || s.infoConnections > most {
		badf(errs, "Info.Connections %d is outside [0, %d] (at most MaxConnections and half the stream's batches)", cfg.Info.Connections, most)
		s.infoConnections = min(s.infoConnections, most)
	}
	c.maxInflight = orDefault(tr.MaxInflight, DefaultMaxInflight)
	if tr.MaxInflight < 0 || tr.MaxInflight > MaxInflightLimit {
		badf(errs, "Transport.MaxInflight %d is outside [0, %d]", tr.MaxInflight, MaxInflightLimit)
		c.maxInflight = min(max(c.maxInflight, DefaultMaxInflight), MaxInflightLimit)
	}
	return batch
}

// resolveDurations sets every duration but the degrade policy's: the sink's flush, Sync
// and Close waits, the spill's waits, and a connection's timeouts, retry schedule and
// lookup interval.
func (s *settings) resolveDurations(cfg Config, errs *[]error) {
	c, tr, to := &s.conn, cfg.Transport, cfg.Timeouts
	s.flushInterval = durationSetting(errs, "Transport.FlushInterval", tr.FlushInterval, DefaultFlushInterval, MaxInterval)
	s.stream.FlushInterval = s.flushInterval
	s.spill.MaxWait = durationSetting(errs, "Err.MaxWait", cfg.Err.MaxWait, DefaultErrMaxWait, MaxErrMaxWait)
	s.syncTimeout = durationSetting(errs, "Timeouts.Sync", to.Sync, DefaultSyncTimeout, MaxTimeout)
	s.closeTimeout = durationSetting(errs, "Timeouts.Close", to.Close, DefaultCloseTimeout, MaxTimeout)
	c.dialTimeout = durationSetting(errs, "Timeouts.Dial", to.Dial, DefaultDialTimeout, MaxTimeout)
	c.handshakeTimeout = durationSetting(errs, "Timeouts.Handshake", to.Handshake, c.dialTimeout, MaxTimeout)
	c.writeTimeout = durationSetting(errs, "Timeouts.Write", to.Write, DefaultWriteTimeout, MaxTimeout)
	c.ackTimeout = durationSetting(errs, "Timeouts.Ack", to.Ack, DefaultAckTimeout, MaxTimeout)
	c.retryMin = durationSetting(errs, "Transport.RetryMin", tr.RetryMin, DefaultRetryMin, MaxInterval)
	c.retryMax = max(durationSetting(errs, "Transport.RetryMax", tr.RetryMax, DefaultRetryMax, MaxInterval), c.retryMin)
	if tr.RetryMin > 0 && tr.RetryMax > 0 && tr.RetryMin > tr.RetryMax {
		badf(errs, "Transport.RetryMin %v is above Transport.RetryMax %v", tr.RetryMin, tr.RetryMax)
	}
	s.spill.After = durationSetting(errs, "Spill.After", cfg.Spill.After, DefaultSpillAfter, MaxInterval)
	c.resolveInterval = durationSetting(errs, "Transport.ResolveInterval", tr.ResolveInterval, DefaultResolveInterval, MaxInterval)
}

// durationSetting returns the duration that v, the value of the setting name, stands for:
// v, or def when v is 0. A negative v, or one under MinInterval, is reported and means def;
// one over most (its ceiling, a documented constant) is reported and means most.
func durationSetting(errs *[]error, name string, v, def, most time.Duration) time.Duration {
	switch {
	case v < 0:
		badf(errs, "%s is negative (%v)", name, v)
	case v > 0 && v < MinInterval:
		badf(errs, "%s %v is under the minimum of %v (MinInterval): a duration is written with its unit, such as 500ms", name, v, MinInterval)
	case v > most:
		badf(errs, "%s %v is over its maximum of %v", name, v, most)
		return most
	default:
		return orDefault(v, def)
	}
	return def
}

// resolveResolver sets what the servers' names are looked up with: r, else
// net.DefaultResolver. An srv:// server needs one with LookupSRV; without it, the
// server has no address, which is reported.
func (c *connSettings) resolveResolver(r Resolver, errs *[]error) {
	c.resolver = r
	if c.resolver == nil {
		c.resolver = net.DefaultResolver
	}
	if _, ok := c.resolver.(dial.SRVResolver); !ok {
		for _, ep := range c.endpoints {
			if strings.HasPrefix(ep.Addr, "srv://") {
				badf(errs, "server %s: Transport.Resolver has no LookupSRV, so an srv:// server has no address", ep.Addr)
				break
			}
		}
	}
}

// resolveDegrade returns the degrade policy's settings, every field set, and reports its
// durations (checkDegrade reports the rest).
func resolveDegrade(cfg DegradeConfig, errs *[]error) DegradeConfig {
	dg, def := cfg.withDefaults(), DegradeConfig{}.withDefaults()
	dg.Hold = durationSetting(errs, "Degrade.Hold", cfg.Hold, def.Hold, MaxInterval)
	dg.SampleInterval = durationSetting(errs, "Degrade.SampleInterval", cfg.SampleInterval, def.SampleInterval, MaxInterval)
	dg.DisconnectedAfter = durationSetting(errs, "Degrade.DisconnectedAfter", cfg.DisconnectedAfter, 0, MaxInterval)
	return dg
}

// checkDegrade reports the degrade policy's values that are wrong: a negative one in cfg,
// watermarks of dg (cfg resolved) out of order, an unknown policy.
func checkDegrade(cfg, dg DegradeConfig, errs *[]error) {
	if cfg.SampleFirst < 0 || cfg.SampleThereafter < 0 || cfg.HighWatermark < 0 || cfg.LowWatermark < 0 {
		badf(errs, "Degrade has a negative value (0 means the default): %+v", cfg)
	}
	if dg.HighWatermark > 1 || dg.LowWatermark >= dg.HighWatermark {
		badf(errs, "Degrade watermarks need 0 < low (%v) < high (%v) <= 1", dg.LowWatermark, dg.HighWatermark)
	}
	if p := dg.Policy; p < DegradeAdaptive || p > DegradeOff {
		badf(errs, "unknown Degrade.Policy %d", p)
	}
}

// resolveSpill sets where the err stream spills and how much: dir, reported when it is there
// but is not a directory or cannot be looked at (a missing one is fine: New creates it), and
// maxBytes, at least two batches of batchBytes (the size in use), reported when under two of
// batch (the size as configured).
func resolveSpill(sp *stream.SpillSettings, dir string, maxBytes int64, batch, batchBytes int, errs *[]error) {
	sp.Dir = dir
	sp.MaxBytes = max(orDefault(maxBytes, DefaultSpillMaxBytes), 2*int64(batchBytes))
	if maxBytes < 0 || (maxBytes > 0 && maxBytes < 2*int64(batch)) {
		badf(errs, "Spill.MaxBytes %d is less than 2 × Transport.MaxBatchBytes (%d)", maxBytes, 2*batch)
	}
	if dir != "" {
		if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
			badf(errs, "Spill.Dir %s is not a directory", dir)
		} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
			badf(errs, "Spill.Dir: %w", err)
		}
	}
}

// resolveMetrics returns where and under what labels the core's metrics are registered:
// reg, else prometheus.DefaultRegisterer, and a copy of labels. The registerer is nil when
// disabled (and reg set with it is reported); both are nil when a label is refused
// (checkConstLabels).
func resolveMetrics(reg prometheus.Registerer, disabled bool, labels prometheus.Labels, errs *[]error) (prometheus.Registerer, prometheus.Labels) {
	r, l := reg, maps.Clone(labels)
	if r == nil { // not cmp.Or: a Registerer need not be comparable
		r = prometheus.DefaultRegisterer
	}
	if disabled {
		if reg != nil {
			badf(errs, "set Metrics.Registerer or Metrics.Disabled, not both")
		}
		r = nil
	}
	if lerrs := checkConstLabels(labels); lerrs != nil {
		*errs = append(*errs, lerrs...)
		return nil, nil
	}
	return r, l
}

// resolveTagSettings sets the tags: each stream's (Tag, Info.Tag, Err.Tag, each within
// MaxTagBytes), and the loggers' (Tags.Template parsed, Tags.Max, Tags.FromName, and Tag
// as the template's {tag}).
func (s *settings) resolveTagSettings(cfg Config, errs *[]error) {
	*errs = append(*errs, resolveStreamTags(&cfg)...) // sets cfg.Tag's default
	s.tags = streamTags(&cfg)
	*errs = append(*errs, capStreamTags(&s.tags)...)
	var terrs []error
	s.tagTemplate, s.maxTags, terrs = resolveTags(&cfg)
	*errs = append(*errs, terrs...)
	s.tagBase, s.tagFromName = cfg.Tag, cfg.Tags.FromName
}

// connFor returns the settings of stream id's connections: the shared ones, with the
// stream's acks.
func (s *settings) connFor(id streamID) connSettings {
	c := s.conn
	c.requireAck = s.acks[id]
	return c
}

// setClock makes clock the time of the sink and of every part.
func (s *settings) setClock(clock zapcore.Clock) {
	s.clock, s.conn.clock, s.stream.Clock, s.spill.Clock = clock, clock, clock, clock
}

// resolveSecrets reads Security's SharedKeyFile, PasswordFile and TLSFiles into cfg. A
// problem is added to errs and becomes addrErr: a core that cannot present its credentials
// must not send without them.
func (c *connSettings) resolveSecrets(cfg *Config, errs *[]error) {
	fail := func(err error) {
		*errs = append(*errs, err)
		if c.addrErr == nil {
			c.addrErr = err
		}
	}
	for _, f := range []struct {
		name, file string
		secret     *Secret
	}{{"Security.SharedKey", cfg.Security.SharedKeyFile, &cfg.Security.SharedKey}, {"Security.Password", cfg.Security.PasswordFile, &cfg.Security.Password}} {
		if f.file == "" {
			continue
		}
		if !f.secret.IsZero() {
			fail(fmt.Errorf("fluentcore: set %s or %sFile, not both", f.name, f.name))
			continue
		}
		b, err := os.ReadFile(f.file)
		if err != nil {
			fail(fmt.Errorf("fluentcore: %sFile: %w", f.name, err))
			continue
		}
		*f.secret = NewSecret(secretFromFile(b))
		if f.secret.IsZero() { // an empty key would silently turn the handshake off
			fail(fmt.Errorf("fluentcore: %sFile %s is empty (a byte-order mark and trailing white space are not part of the secret)", f.name, f.file))
		}
	}
	if cfg.Security.TLSFiles != (TLSFiles{}) {
		tc, err := cfg.Security.TLSFiles.apply(cfg.Security.TLS)
		if err != nil {
			fail(err)
			return
		}
		cfg.Security.TLS = tc
	}
}

// secretFromFile is the secret a file holds: its text without a leading UTF-8 byte-order
// mark and without trailing spaces, tabs, CRs and LFs. Editors, echo and Windows tools add
// those unseen, and a key that differs by them fails the handshake with nothing to tell
// why; a secret that really ends in white space has to be set in Security.SharedKey or
// Security.Password.
// Leading spaces are kept: they are in the text, where no tool puts them by itself.
func secretFromFile(b []byte) string {
	return strings.TrimRight(strings.TrimPrefix(string(b), "\ufeff"), " \t\r\n\v\f")
}

// onlyUnix reports whether every endpoint is a unix socket (none is a network address).
func onlyUnix(eps []dial.Endpoint) bool {
	for _, ep := range eps {
		if ep.Network != "unix" {
			return false
		}
	}
	return len(eps) > 0
}

// resolveServers parses Addr or Servers into endpoints. Every problem is added to errs; the
// first is also addrErr, which every send then reports.
func (c *connSettings) resolveServers(cfg Config, errs *[]error) {
	servers := cfg.Servers
	both := len(servers) > 0 && cfg.Addr != ""
	if len(servers) == 0 {
		servers = []Server{{Addr: cmp.Or(cfg.Addr, DefaultAddr)}}
	} else if both {
		c.addrErr = errors.New("fluentcore: set Addr or Servers, not both")
		*errs = append(*errs, c.addrErr)
	}
	tlsSet := cfg.Security.TLS != nil || cfg.Security.TLSFiles != (TLSFiles{})
	anyTLS := false
	var plain []string // with TLS settings: the addresses that would still be sent in plain text
	for _, srv := range servers {
		ep, err := dial.NewEndpoint(srv.Addr, cmp.Or(srv.Weight, DefaultServerWeight), srv.Standby, cfg.Security.TLS)
		anyTLS = anyTLS || ep.TLS != nil
		if tlsSet && err == nil && ep.TLS == nil && ep.Network != "unix" {
			plain = append(plain, srv.Addr)
		}
		if err != nil && c.addrErr == nil {
			c.addrErr = err
		}
		if err != nil && !both { // with both set, that one error says it
			*errs = append(*errs, err)
		}
		c.endpoints = append(c.endpoints, ep)
	}
	c.endpoints = dial.Expand(c.endpoints, MaxNameAddresses)
	var err error
	switch {
	case len(plain) > 0:
		// TLS settings say the user wants TLS; sending these in plain text would be the
		// one outcome they did not ask for. Refused, not upgraded: the address says how.
		err = fmt.Errorf("fluentcore: Security.TLS or Security.TLSFiles is set, but %s is plain TCP: write tls://host:port, or leave both unset", strings.Join(plain, ", "))
	case tlsSet && !anyTLS:
		err = errors.New("fluentcore: Security.TLS or Security.TLSFiles is set but no address is tls://: nothing would use it")
	}
	if err != nil {
		*errs = append(*errs, err)
		if c.addrErr == nil {
			c.addrErr = err
		}
	}
}

// checkConstLabels returns a problem for each label that the metrics cannot carry: a
// name the metrics set themselves (it would clash with theirs), a name outside Prometheus'
// classic rule ([a-zA-Z_][a-zA-Z0-9_]*: client_golang takes any UTF-8 name, but a scraper
// that asks for the classic format gets such a name escaped, under another name than the
// one configured), a name starting with "__" (Prometheus' own), a value that is not UTF-8.
// In the names' order, so the error reads the same each time.
func checkConstLabels(labels prometheus.Labels) []error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(labels)) {
		bad := func(why string) { errs = append(errs, fmt.Errorf("fluentcore: Metrics.ConstLabels %q: %s", name, why)) }
		switch {
		case slices.Contains(metricLabelNames[:], name):
			bad(fmt.Sprintf("the metrics set this label themselves (%s are theirs)", strings.Join(metricLabelNames[:], ", ")))
		case !model.LegacyValidation.IsValidLabelName(name):
			bad("not a Prometheus label name (letters, digits and _, not starting with a digit)")
		case strings.HasPrefix(name, "__"):
			bad(`names starting with "__" are Prometheus' own`)
		case !utf8.ValidString(labels[name]):
			bad("the value is not valid UTF-8")
		}
	}
	return errs
}

// defaultHostname is Security.SelfHostname's default.
func defaultHostname() string {
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return "localhost"
}

// newBackoff returns the retry schedule of one sender or server: exponential with jitter
// from Transport.RetryMin to Transport.RetryMax, never giving up, reset after each
// delivered batch.
func (c *connSettings) newBackoff() backoff.BackOff { return dial.NewBackOff(c.retryMin, c.retryMax) }

// eventFunc is Config.OnEvent; nil when unset.
type eventFunc func(Event)

// emit reports kind on stream id to the user's OnEvent, if set.
func (f eventFunc) emit(now time.Time, id streamID, kind EventKind, err error) {
	if f != nil {
		f(Event{Kind: kind, Stream: id.String(), Time: now, Err: err})
	}
}
