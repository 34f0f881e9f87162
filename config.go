package fluentcore

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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
	DefaultMaxInflight     = 32
	DefaultRetryMin        = 100 * time.Millisecond
	DefaultRetryMax        = 10 * time.Second
	DefaultSpillAfter      = 5 * time.Second
	DefaultSpillMaxBytes   = 256 << 20
	DefaultResolveInterval = 30 * time.Second
)

// MinInterval is the shortest duration a Config takes: every duration field that is set
// (not 0) must be at least 1ms. No flush, wait, timeout or backoff that short is meant; what
// gives one is a number written without its unit (500 read as 500ns), and with it the flush
// ticks or the retries would keep a core busy while nothing is logged. A shorter one is a
// Validate error, and New uses the field's default instead.
const MinInterval = time.Millisecond

// Ceilings of the duration fields: a longer one set in a Config is a Validate error, and
// New uses the ceiling instead.
const (
	// MaxErrMaxWait is the longest Err.MaxWait: a logging call waits at most this for room
	// in the err buffers.
	MaxErrMaxWait = time.Second
	// MaxTimeout is the longest of each of Timeouts: a wait on the receiver or on the core
	// that passes it is a hang, not a wait.
	MaxTimeout = 5 * time.Minute
	// MaxInterval is the longest Transport.FlushInterval, Transport.RetryMin,
	// Transport.RetryMax, Transport.ResolveInterval, Spill.After, Degrade.Hold,
	// Degrade.SampleInterval and Degrade.DisconnectedAfter.
	MaxInterval = time.Hour
)

// maxBatchLimit keeps every frame under fluent-bit's 6144000-byte message limit
// (wire.MaxFrameBytes), with room for the frame's header, option map and gzip's overhead.
const maxBatchLimit = 6_000_000

// Acks says whether a stream asks for acks: AcksDefault, AcksOn or AcksOff. In files and
// the environment it is "", "on" or "off".
type Acks int

const (
	// AcksDefault is on for the err stream (off when every server is a unix:// socket),
	// and off for the info stream.
	AcksDefault Acks = iota
	// AcksOn asks the receiver to acknowledge every frame: at least once, a frame whose ack
	// does not come within Timeouts.Ack sent again (duplicates possible). Against a
	// receiver that never acks (fluentd's in_unix), every frame times out and is resent.
	AcksOn
	// AcksOff asks for no ack: a frame counts as delivered (written) once the connection
	// has taken it, and is lost if the receiver dies before reading it.
	AcksOff
)

var acksNames = [...]string{AcksDefault: "", AcksOn: "on", AcksOff: "off"}

// String returns "", "on" or "off" ("unknown" for another value).
func (a Acks) String() string {
	if a < 0 || int(a) >= len(acksNames) {
		return "unknown"
	}
	return acksNames[a]
}

// UnmarshalText reads "", "on" or "off"; anything else is an error.
func (a *Acks) UnmarshalText(b []byte) error {
	for i, n := range acksNames {
		if n == string(b) {
			*a = Acks(i)
			return nil
		}
	}
	return fmt.Errorf("unknown acks %q (want on or off)", b)
}

// MarshalText writes "", "on" or "off".
func (a Acks) MarshalText() ([]byte, error) { return []byte(a.String()), nil }

// MaxInflightLimit is the most frames one connection keeps in flight
// (Transport.MaxInflight).
const MaxInflightLimit = 64

// MaxConnections is the most connections the info stream sends on (Info.Connections).
const MaxConnections = 16

// MaxSpread is the most connections the info stream opens by default (Info.Connections 0),
// one per server: with more servers than this, each core's connections take MaxSpread of
// them by weight, and different cores mostly different ones.
const MaxSpread = 8

// MaxNameAddresses is the most addresses of one server name that are used at once (see
// Config.Servers): a name with more uses this many of them, keeping those it has.
const MaxNameAddresses = 16

// Resolver looks host names up, for Transport.Resolver: *net.Resolver is one
// (net.DefaultResolver is the default). Every host name of the servers, whatever its count
// of addresses, and every SRV target goes through it: the connections dial the addresses
// it gives, never a name. Implementations must be safe for concurrent use, and must return
// once ctx is done (each lookup has a deadline; Close waits for a lookup under way); an
// error, or no address, leaves the addresses of the name's last lookup in use (a name that
// never answered has none: its connections fail with the error). For srv:// servers it
// must be an SRVResolver; without LookupSRV such a server has no address, and Validate
// says so.
type Resolver interface {
	LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error)
}

// SRVResolver is a Resolver that also looks DNS SRV records up: Transport.Resolver must be
// one for a server "srv://_service._proto.name". *net.Resolver is one, and so is the
// default, net.DefaultResolver. LookupSRV is called with service and proto "" and the whole
// name, as *net.Resolver's is; each target it returns (regular and standby) is then looked
// up with LookupIPAddr as it is dialed. Implementations must be safe for concurrent use and
// return once ctx is done; an error, or no record, leaves the targets of the name's last
// lookup in use.
type SRVResolver interface {
	Resolver
	LookupSRV(ctx context.Context, service, proto, name string) (cname string, addrs []*net.SRV, err error)
}

// Config configures a Core. The zero value is usable: every field has a documented default,
// and so has every field of its groups, whose zero values are their defaults. The first
// fields are the ones most services set; the groups below them hold the rest, by concern.
// docs/configuration.md tells every field at length, with its file key and environment
// variable. Config is read once by New; changing it afterwards has no effect.
type Config struct {
	// Addr is the receiver: "tcp://host:port", "host:port", "tls://host:port",
	// "unix:///path" or "srv://_service._proto.name"; a host name is each of its addresses
	// (docs/servers.md). Default DefaultAddr, unless Servers is set (then Addr must be
	// empty). A malformed Addr is a Validate error, and every send fails with it.
	Addr string `json:"addr,omitempty" yaml:"addr,omitempty"`
	// Servers, if set, replaces Addr by several receivers: the info stream's connections
	// are shared among them by weight, and a standby takes connections only while every
	// other server is down (docs/servers.md). Default nil: Addr only. A malformed server
	// is a Validate error, and every send fails with it.
	Servers []Server `json:"servers,omitempty" yaml:"servers,omitempty"`
	// Tag is the base tag; the streams' tags default to Tag+".info" and Tag+".err". Default
	// DefaultTag ("app"). A tag holds ASCII letters, digits, '.', '_' and '-', no empty
	// segment ("a..b"), at most MaxTagBytes; otherwise it is a Validate error, and New sends
	// under it with every other byte made '_', empty segments left out, cut to MaxTagBytes.
	Tag string `json:"tag,omitempty" yaml:"tag,omitempty"`
	// Level is the minimum level logged. Default zapcore.InfoLevel (when nil).
	Level zapcore.LevelEnabler `json:"level,omitempty" yaml:"level,omitempty"`
	// Spill says where the err entries that cannot be delivered go: the durable spill
	// (Spill.Dir), else Spill.Fallback. Default: no spill, os.Stderr.
	Spill SpillConfig `json:"spill,omitempty" yaml:"spill,omitempty"`
	// Security configures TLS and the shared-key handshake. Default: neither.
	Security SecurityConfig `json:"security,omitempty" yaml:"security,omitempty"`
	// Metrics configures the Prometheus metrics. Default: the fluentcore_* series in
	// prometheus.DefaultRegisterer.
	Metrics MetricsConfig `json:"metrics,omitempty" yaml:"metrics,omitempty"`
	// Info configures the info stream, of every entry that Err.Level does not take.
	// Default: see InfoConfig.
	Info InfoConfig `json:"info,omitempty" yaml:"info,omitempty"`
	// Err configures the err stream, of the entries of Err.Level, never dropped silently.
	// Default: see ErrConfig.
	Err ErrConfig `json:"err,omitempty" yaml:"err,omitempty"`
	// Tags configures loggers' own tags (the Tag option, Tags.FromName; docs/tags.md).
	// Default: see TagsConfig.
	Tags TagsConfig `json:"tags,omitempty" yaml:"tags,omitempty"`
	// EncoderConfig names the record's keys and encodes levels, callers, durations and time
	// fields, as in zap. Default, and when zero: zap.NewProductionEncoderConfig() without
	// TimeKey, since each entry's time travels as its Forward EventTime.
	EncoderConfig zapcore.EncoderConfig `json:"-" yaml:"-"`
	// OnEvent, if set, is called on each Event (degraded and recovered, spill events, a
	// stream disconnected and connected again), on the goroutine that met the condition
	// (the sink's, or a logging one). It must not block or log through this core. Default nil.
	OnEvent func(Event) `json:"-" yaml:"-"`
	// Timeouts bound Sync, Close and each step of a connection. Default: see
	// TimeoutsConfig.
	Timeouts TimeoutsConfig `json:"timeouts,omitempty" yaml:"timeouts,omitempty"`
	// Transport configures what is sent and how: sizes, flushing, compression, frames in
	// flight, retries, name lookups. Default: see TransportConfig.
	Transport TransportConfig `json:"transport,omitempty" yaml:"transport,omitempty"`
	// Degrade tunes how the info stream sheds entries under backpressure. Default
	// DegradeAdaptive, which needs no setting.
	Degrade DegradeConfig `json:"degrade,omitempty" yaml:"degrade,omitempty"`
}

// InfoConfig configures the info stream: entries that cannot be buffered are dropped and
// counted, never waited for. Its zero value gives the defaults.
type InfoConfig struct {
	// Tag is the stream's Forward tag. Default Config.Tag + ".info". Checked as Config.Tag
	// is.
	Tag string `json:"tag,omitempty" yaml:"tag,omitempty"`
	// BufferBytes is the stream's buffer budget, allocated once by New; entries are dropped
	// (queue_full) once about 90% of it is buffered. Default DefaultInfoBufferBytes (8 MiB).
	// Negative, or under 2 × Transport.MaxBatchBytes, is a Validate error and means the
	// default or that much.
	BufferBytes int `json:"buffer_bytes,omitempty" yaml:"buffer_bytes,omitempty"`
	// Connections is how many connections the stream sends on at once; entries keep their
	// order per connection only. Default 0: one per server that is not a standby, by weight,
	// at most MaxSpread (docs/servers.md). Negative is a Validate error and means 0; over
	// MaxConnections or half the stream's batches, a Validate error and means that bound.
	Connections int `json:"connections,omitempty" yaml:"connections,omitempty"`
	// Acks says whether the stream's frames ask the receiver for acks: at least once, a
	// frame whose ack does not come sent again (duplicates possible). Default AcksDefault:
	// off, at most once, as fluentd's out_forward. A value other than the three is a
	// Validate error and means off.
	Acks Acks `json:"acks,omitempty" yaml:"acks,omitempty"`
}

// ErrConfig configures the err stream: its entries are waited for, spilled or written to
// Spill.Fallback, never dropped silently. It sends on one connection, in order. Its zero
// value gives the defaults.
type ErrConfig struct {
	// Level selects the entries sent on the err stream; a zapcore.Level works here.
	// Default zapcore.ErrorLevel (when nil).
	Level zapcore.LevelEnabler `json:"level,omitempty" yaml:"level,omitempty"`
	// Tag is the stream's Forward tag. Default Config.Tag + ".err". Checked as Config.Tag
	// is.
	Tag string `json:"tag,omitempty" yaml:"tag,omitempty"`
	// BufferBytes is the stream's buffer budget, allocated once by New; once it is full,
	// entries go to the spill. Default DefaultErrBufferBytes (4 MiB). Negative, or under
	// 2 × Transport.MaxBatchBytes, is a Validate error and means the default or that much.
	BufferBytes int `json:"buffer_bytes,omitempty" yaml:"buffer_bytes,omitempty"`
	// Acks says whether the stream's frames ask the receiver for acks, an entry counting as
	// delivered once acked and sent again otherwise. Default AcksDefault: on, except when
	// every server is a unix:// socket (fluentd's in_unix never acks). A value other than
	// the three is a Validate error and means on.
	Acks Acks `json:"acks,omitempty" yaml:"acks,omitempty"`
	// MaxWait bounds how long a logging call waits for room in the full err buffers before
	// its entry goes to the spill. Default DefaultErrMaxWait (50ms). Under MinInterval is a
	// Validate error and means the default; over MaxErrMaxWait (1s), a Validate error and
	// means 1s, so that no logging call waits longer.
	MaxWait time.Duration `json:"max_wait,omitempty" yaml:"max_wait,omitempty"`
}

// TagsConfig configures loggers' tags: a logger with a tag name (the Tag option in With, or
// its zap name with FromName) sends under a tag of its own, made by Template; a logger
// without one under its stream's tag (docs/tags.md). Its zero value gives the defaults.
type TagsConfig struct {
	// Template makes a logger's tag: {tag} is Config.Tag, {name} the logger's tag name
	// (required), {stream} "info" or "err". Default DefaultTagTemplate. A template without
	// {name}, with other literal bytes than a tag holds, or leaving no room for a name in
	// MaxTagBytes, is a Validate error and means the default.
	Template string `json:"template,omitempty" yaml:"template,omitempty"`
	// FromName makes a logger's zap name (logger.Named) its tag name when it has no Tag
	// option. Default false: zap names are only written in the record, as zap does.
	FromName bool `json:"from_name,omitempty" yaml:"from_name,omitempty"`
	// Max is the most distinct tag names a core sends under; a logger whose name comes past
	// it sends under its stream's tag, the name in the record, counted. Default
	// DefaultMaxTags (64). Negative, or over MaxTagsLimit (1024), is a Validate error and
	// means the default.
	Max int `json:"max,omitempty" yaml:"max,omitempty"`
}

// SpillConfig says where the err entries that cannot be delivered go: the durable spill
// (Dir), else Fallback (docs/configuration.md, "Durable err spill"). Its zero value gives
// the defaults.
type SpillConfig struct {
	// Dir turns the durable err spill on: a directory (created if missing, mode 0700, locked
	// for the life of the core) of segment files, replayed in order once the receiver is
	// back, also after a crash. Default "": off. A path that is no directory is a Validate
	// error; one that cannot be created or locked leaves the core without a spill, which
	// Sync, Close and EventSpillDisabled report.
	Dir string `json:"dir,omitempty" yaml:"dir,omitempty"`
	// After is how long the err stream retries a batch, or waits for an ack, before its
	// pending batches go to the spill (Dir, else Fallback). Default DefaultSpillAfter (5s).
	// Under MinInterval is a Validate error and means the default; over MaxInterval, a
	// Validate error and means MaxInterval.
	After time.Duration `json:"after,omitempty" yaml:"after,omitempty"`
	// MaxBytes bounds the spill's segment files; an entry that does not fit is dropped
	// (spill_full) and written to Fallback. Default DefaultSpillMaxBytes (256 MiB).
	// Negative, or under 2 × Transport.MaxBatchBytes, is a Validate error and means the
	// default or that much.
	MaxBytes int64 `json:"max_bytes,omitempty" yaml:"max_bytes,omitempty"`
	// Fallback receives, as JSON lines {"tag","time","record"}, the err entries that cannot
	// be delivered and that no spill takes (all of them without Dir), and Close's report.
	// Default os.Stderr (when nil). Writes to it are serialised.
	Fallback io.Writer `json:"-" yaml:"-"`
}

// SecurityConfig configures TLS and the shared-key handshake, whose settings are those of
// fluentd's <security> section. Its zero value gives the defaults: no TLS, no handshake. A
// setting that cannot be applied is a Validate error, and every send fails with it: nothing
// goes out without the security configured.
type SecurityConfig struct {
	// TLS configures "tls://" addresses: RootCAs, client Certificates, ServerName, versions.
	// Default: the system roots, TLS 1.2 or later, ServerName the host of each address.
	// With TLS or TLSFiles set, an address other than tls:// or unix:// is a Validate
	// error, and sends to it fail rather than go out in plain text.
	TLS *tls.Config `json:"-" yaml:"-"`
	// TLSFiles configures TLS from PEM files, for files and the environment, applied on top
	// of TLS and read by New. Default: none. A file that cannot be read or parsed is a
	// Validate error, and every send fails with it.
	TLSFiles TLSFiles `json:"tls,omitempty" yaml:"tls,omitempty"`
	// SharedKey, if set, makes every new connection run the shared-key handshake (HELO,
	// PING, PONG) before any data. Default unset: no handshake. A failed handshake is an
	// error wrapping ErrHandshake, counted, and the sender retries with backoff.
	SharedKey Secret `json:"shared_key,omitzero" yaml:"shared_key,omitempty"`
	// SharedKeyFile names a file holding SharedKey, read by New (as Kubernetes mounts
	// secrets), a leading byte-order mark and trailing white space dropped. Default "".
	// Set with SharedKey, or a file that cannot be read or holds nothing, it is a Validate
	// error, and every send fails with it.
	SharedKeyFile string `json:"shared_key_file,omitempty" yaml:"shared_key_file,omitempty"`
	// SelfHostname is the client's name in the handshake; it must differ from the
	// receiver's self_hostname. Default os.Hostname(), or "localhost" if that fails.
	SelfHostname string `json:"self_hostname,omitempty" yaml:"self_hostname,omitempty"`
	// Username answers a receiver that asks for user authentication (fluentd's user_auth,
	// fluent-bit's security.users). Default "". Set without SharedKey, it is a Validate
	// error.
	Username string `json:"username,omitempty" yaml:"username,omitempty"`
	// Password is Username's password. Default unset. Set without SharedKey, it is a
	// Validate error.
	Password Secret `json:"password,omitzero" yaml:"password,omitempty"`
	// PasswordFile names a file holding Password, read as SharedKeyFile is. Default "".
	// Set with Password, or a file that cannot be read or holds nothing, it is a Validate
	// error, and every send fails with it.
	PasswordFile string `json:"password_file,omitempty" yaml:"password_file,omitempty"`
}

// MetricsConfig configures the core's Prometheus metrics (docs/operations.md). Its zero
// value gives the defaults: the fluentcore_* series in prometheus.DefaultRegisterer.
type MetricsConfig struct {
	// Registerer receives the metrics. Default prometheus.DefaultRegisterer, which
	// promhttp.Handler() serves. Cores on one Registerer with equal ConstLabels share their
	// series (docs/configuration.md, "Metrics"). If it refuses them, the core runs without
	// metrics, and Sync and Close report it.
	Registerer prometheus.Registerer `json:"-" yaml:"-"`
	// Disabled registers the metrics nowhere; Core.Stats still reports them. Default false.
	// Set with Registerer, it is a Validate error, and Disabled wins.
	Disabled bool `json:"disabled,omitempty" yaml:"disabled,omitempty"`
	// ConstLabels are added to every metric, so that cores on one Registerer are told
	// apart. Default nil. A name that is no classic Prometheus label name, or that the
	// metrics use (stream, reason, server, tag, le), or a value that is not UTF-8, is a
	// Validate error, and New registers no metrics.
	ConstLabels prometheus.Labels `json:"const_labels,omitempty" yaml:"const_labels,omitempty"`
}

// TimeoutsConfig bounds the waits of the core and of its connections. Its zero value gives
// the defaults. Each that is set is at least MinInterval and at most MaxTimeout (5m): a
// shorter one is a Validate error and means the default, a longer one a Validate error and
// means MaxTimeout.
type TimeoutsConfig struct {
	// Sync bounds Sync and the flush after a DPanic, Panic or Fatal entry. Default
	// DefaultSyncTimeout (5s); outside [MinInterval, MaxTimeout], see TimeoutsConfig.
	Sync time.Duration `json:"sync,omitempty" yaml:"sync,omitempty"`
	// Close bounds how long Close tries to deliver what was logged. Default
	// DefaultCloseTimeout (10s); outside [MinInterval, MaxTimeout], see TimeoutsConfig.
	Close time.Duration `json:"close,omitempty" yaml:"close,omitempty"`
	// Dial bounds connecting, TLS handshake included. Default DefaultDialTimeout (5s);
	// outside [MinInterval, MaxTimeout], see TimeoutsConfig.
	Dial time.Duration `json:"dial,omitempty" yaml:"dial,omitempty"`
	// Handshake bounds the shared-key handshake of a new connection. Default: Dial;
	// outside [MinInterval, MaxTimeout], see TimeoutsConfig.
	Handshake time.Duration `json:"handshake,omitempty" yaml:"handshake,omitempty"`
	// Write bounds writing one frame. Default DefaultWriteTimeout (10s); outside
	// [MinInterval, MaxTimeout], see TimeoutsConfig.
	Write time.Duration `json:"write,omitempty" yaml:"write,omitempty"`
	// Ack bounds the wait for one frame's ack, from its write, on a stream with acks.
	// Default DefaultAckTimeout (30s); outside [MinInterval, MaxTimeout], see
	// TimeoutsConfig.
	Ack time.Duration `json:"ack,omitempty" yaml:"ack,omitempty"`
}

// TransportConfig configures what is sent and how: the sizes of batches and entries, when
// a batch is sent, compression, the frames in flight, the backoff between attempts and the
// servers' name lookups. Its zero value gives the defaults.
type TransportConfig struct {
	// MaxBatchBytes is the size of one batch buffer, the largest frame payload sent.
	// Default DefaultMaxBatchBytes (256 KiB). Outside [1024, 6000000] (fluent-bit's limit)
	// it is a Validate error and means the default.
	MaxBatchBytes int `json:"max_batch_bytes,omitempty" yaml:"max_batch_bytes,omitempty"`
	// MaxEntryBytes is the largest encoded entry: a larger info entry is dropped
	// (too_large), a larger err entry delivered with its longest values truncated, or cut
	// short, and marked (docs/configuration.md). Default DefaultMaxEntryBytes (64 KiB).
	// Negative, or over MaxBatchBytes, is a Validate error and means the default or that.
	MaxEntryBytes int `json:"max_entry_bytes,omitempty" yaml:"max_entry_bytes,omitempty"`
	// FlushInterval is the longest an info entry waits in a batch that is not full; err
	// entries go as soon as the err sender is free. Default DefaultFlushInterval (500ms).
	// Under MinInterval is a Validate error and means the default; over MaxInterval, a
	// Validate error and means MaxInterval.
	FlushInterval time.Duration `json:"flush_interval,omitempty" yaml:"flush_interval,omitempty"`
	// Compression is "" (PackedForward) or "gzip" (CompressedPackedForward, a gzip member
	// per batch). Default "". Anything else is a Validate error and means "".
	Compression string `json:"compression,omitempty" yaml:"compression,omitempty"`
	// MaxInflight is how many frames one connection of a stream with acks sends ahead while
	// their acks come back, held to what the stream's batches allow (docs/configuration.md).
	// Default DefaultMaxInflight (32). Negative, or over MaxInflightLimit, is a Validate
	// error and means the default or the limit.
	MaxInflight int `json:"max_inflight,omitempty" yaml:"max_inflight,omitempty"`
	// RetryMin is the first wait of the exponential backoff, with jitter, between attempts
	// to send, and of a failed server. Default DefaultRetryMin (100ms). Under MinInterval
	// is a Validate error and means the default; over MaxInterval or RetryMax, a Validate
	// error (RetryMax is then taken as RetryMin).
	RetryMin time.Duration `json:"retry_min,omitempty" yaml:"retry_min,omitempty"`
	// RetryMax bounds each wait of that backoff, so that an attempt comes within RetryMax
	// of an outage's end. Default DefaultRetryMax (10s). Under MinInterval is a Validate
	// error and means the default; over MaxInterval, a Validate error and means that.
	RetryMax time.Duration `json:"retry_max,omitempty" yaml:"retry_max,omitempty"`
	// Resolver looks the servers' host names up, in the background: New never waits on a
	// lookup. Default net.DefaultResolver (when nil). For an srv:// server it must be an
	// SRVResolver; without LookupSRV, such a server is a Validate error.
	Resolver Resolver `json:"-" yaml:"-"`
	// ResolveInterval is how often the servers' host names are looked up again while the
	// core sends. Default DefaultResolveInterval (30s). Under MinInterval is a Validate
	// error and means the default; over MaxInterval, a Validate error and means that.
	ResolveInterval time.Duration `json:"resolve_interval,omitempty" yaml:"resolve_interval,omitempty"`
}

// DefaultServerWeight is a Server's weight when Weight is 0, as in fluentd's out_forward.
const DefaultServerWeight = 60

// Server is one receiver of Config.Servers. It is a plain value, safe to copy and share.
type Server struct {
	// Addr is the receiver, in the forms Config.Addr takes ("tcp://host:port", "host:port",
	// "tls://host:port", "unix:///path"), or "srv://_service._proto.name" (see
	// Config.Servers). Required: an empty or malformed Addr is a Validate
	// error, and makes every send fail.
	Addr string `json:"addr,omitempty" yaml:"addr,omitempty"`
	// Weight is the server's share of new connections among the servers in use: with weights
	// 60 and 30, two connections in three go to the first. Default DefaultServerWeight (60)
	// when 0; negative is a Validate error.
	Weight int `json:"weight,omitempty" yaml:"weight,omitempty"`
	// Standby servers take connections only while every server that is not a standby is
	// down; once one of those is due to be tried again, the next send moves back to it.
	// Default false.
	Standby bool `json:"standby,omitempty" yaml:"standby,omitempty"`
}

// TLSFiles is TLS from PEM files, the form configuration files and the environment can
// give. A plain value, safe to copy and share.
type TLSFiles struct {
	// CAFile holds the CA certificates that verify the receiver. Default: Security.TLS's
	// RootCAs, else the system roots. A file that cannot be read, or holds no PEM
	// certificate, is a Validate error.
	CAFile string `json:"ca_file,omitempty" yaml:"ca_file,omitempty"`
	// CertFile holds the client certificate, for mutual TLS, with KeyFile: both or neither
	// (else a Validate error). Default: none.
	CertFile string `json:"cert_file,omitempty" yaml:"cert_file,omitempty"`
	// KeyFile holds CertFile's private key. Default: none. A pair that cannot be loaded is
	// a Validate error.
	KeyFile string `json:"key_file,omitempty" yaml:"key_file,omitempty"`
	// ServerName is the name the receiver's certificate must carry. Default: the host of
	// each address.
	ServerName string `json:"server_name,omitempty" yaml:"server_name,omitempty"`
	// InsecureSkipVerify accepts any certificate: for tests only. Default false.
	InsecureSkipVerify bool `json:"insecure_skip_verify,omitempty" yaml:"insecure_skip_verify,omitempty"`
}

// Secret holds a shared key or a password (Security.SharedKey, Security.Password) so that no
// printer shows it: fmt's verbs, JSON, YAML, text and slog print "[redacted]" (or nothing,
// for the zero Secret), and a printer that walks structs by reflection, which calls no
// method of a value held in an unexported field (%+v of a struct holding a Config), finds
// only a function, not the text. NewSecret makes one; files and the environment set it
// through UnmarshalText. The zero Secret is unset. Safe for concurrent use.
type Secret struct {
	text func() string // a closure: reflection can print its address, never what it holds
}

// redactedSecret is what every rendering of a Secret, and so of a Config, shows instead of
// its text.
const redactedSecret = "[redacted]"

// NewSecret returns a Secret holding s; the empty string gives the zero (unset) Secret.
func NewSecret(s string) Secret {
	if s == "" {
		return Secret{}
	}
	return Secret{text: func() string { return s }}
}

// Reveal returns the secret's text ("" if unset), for the code that must send it.
func (s Secret) Reveal() string {
	if s.text == nil {
		return ""
	}
	return s.text()
}

// IsZero reports whether the Secret is unset.
func (s Secret) IsZero() bool { return s.text == nil }

// String returns "[redacted]", or "" if the Secret is unset.
func (s Secret) String() string {
	if s.IsZero() {
		return ""
	}
	return redactedSecret
}

// GoString is String, quoted, for %#v.
func (s Secret) GoString() string { return `"` + s.String() + `"` }

// Format writes String with every verb (GoString with %#v), so that no verb reaches the
// Secret's fields.
func (s Secret) Format(f fmt.State, verb rune) {
	if verb == 'v' && f.Flag('#') {
		_, _ = io.WriteString(f, s.GoString())
		return
	}
	_, _ = io.WriteString(f, s.String())
}

// MarshalText writes String: "[redacted]", never the text. Reading it back does not give
// the secret.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText sets the Secret to b's text, for configuration files and the environment.
// The text "[redacted]", which every rendering writes in place of a secret, is an error
// (errRedactedSecret), and the Secret is left as it was: a rendered Config read back would
// otherwise send that placeholder as its key.
func (s *Secret) UnmarshalText(b []byte) error {
	if string(b) == redactedSecret {
		return errRedactedSecret
	}
	*s = NewSecret(string(b))
	return nil
}

// errRedactedSecret is the error for a secret that holds the placeholder every rendering
// writes in its place, not a secret.
var errRedactedSecret = errors.New(`"[redacted]" is the placeholder written in place of a secret, not a secret: set the secret itself, or its file`)

// LogValue is String, for log/slog.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// apply returns base (nil: the defaults) with the files' settings on top, in a new config.
// The error names the file that could not be read or parsed.
func (f TLSFiles) apply(base *tls.Config) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if base != nil {
		tc = base.Clone()
	}
	if f.CAFile != "" {
		pem, err := os.ReadFile(f.CAFile)
		if err != nil {
			return nil, fmt.Errorf("fluentcore: Security.TLSFiles.CAFile: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("fluentcore: Security.TLSFiles.CAFile %s: no PEM certificate in it", f.CAFile)
		}
		tc.RootCAs = pool
	}
	if (f.CertFile == "") != (f.KeyFile == "") {
		return nil, errors.New("fluentcore: Security.TLSFiles: set CertFile and KeyFile, or neither")
	}
	if f.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("fluentcore: Security.TLSFiles.CertFile/KeyFile: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	if f.ServerName != "" {
		tc.ServerName = f.ServerName
	}
	tc.InsecureSkipVerify = tc.InsecureSkipVerify || f.InsecureSkipVerify
	return tc, nil
}
