package fluentcore

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
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
	// MaxErrMaxWait is the longest ErrMaxWait: a logging call waits at most this for room
	// in the err buffers.
	MaxErrMaxWait = time.Second
	// MaxTimeout is the longest SyncTimeout, CloseTimeout, DialTimeout, HandshakeTimeout,
	// WriteTimeout and AckTimeout: a wait on the receiver or on the core that passes it is
	// a hang, not a wait.
	MaxTimeout = 5 * time.Minute
	// MaxInterval is the longest FlushInterval, RetryMin, RetryMax, SpillAfter,
	// ResolveInterval, Degrade.Hold, Degrade.SampleInterval and Degrade.DisconnectedAfter.
	MaxInterval = time.Hour
)

// maxBatchLimit keeps every frame under fluent-bit's 6144000-byte message limit
// (wire.MaxFrameBytes), with room for the frame's header, option map and gzip's overhead.
const maxBatchLimit = 6_000_000

// StreamConfig configures one stream.
type StreamConfig struct {
	// Tag is the Forward tag of the stream's entries. Default: Config.Tag + ".info" for the
	// info stream, Config.Tag + ".err" for the err stream.
	Tag string `json:"tag,omitempty" yaml:"tag,omitempty"`
	// BufferBytes is the stream's buffer budget: the memory of all its batch buffers,
	// allocated once by New. It is spent on entries, not on batches: during an outage
	// partly filled batches are not sealed but filled, and the ones sealed before are packed
	// together, so info entries are dropped (queue_full) only once at least 90% of it is
	// buffered (a batch is sealed at 15/16 full), and err entries are spilled then or once
	// sends have failed for SpillAfter, whichever comes first. Each batch also keeps, made
	// with it, the index of its logger tags' runs: 12 bytes for every 256 of buffer. Default
	// 8 MiB for info, 4 MiB for err; at least 2 × MaxBatchBytes.
	BufferBytes int `json:"buffer_bytes,omitempty" yaml:"buffer_bytes,omitempty"`
	// Connections is how many connections the stream sends on at once, each with its own
	// sender taking sealed batches as they come: a receiver that serves each connection on
	// one worker (fluentd's `workers N` behind one port) or several servers then take
	// the stream together. Entries keep their order per connection, not across them.
	// Default 0: for the info stream, one connection per server that is not a standby —
	// each address of a name counted, as its first lookup finds them (Config.Servers) —
	// and, when the weights differ, as many per server as its weight over the weights'
	// greatest common divisor if that makes at most MaxSpread (60:30 takes 2 and 1); at
	// most MaxSpread (8) in all, so that several servers take the stream at once, by weight,
	// with no setting (bench/README.md, "Several servers"); with one server, one connection,
	// which keeps each goroutine's entries in order as fluentd's out_forward does with its
	// default of one flush thread (more connections to one server help only against a
	// receiver that is slow per connection). The count is fixed by that lookup: a name
	// that gains addresses later gets no more connections (set Connections for a tier that
	// grows). Against a receiver that is slow per connection, N connections deliver up to
	// N times as much: set it to the receiver's workers (bench/README.md, "Scale-out and
	// acks", has the figures). At most MaxConnections, and at
	// most half the stream's batches (BufferBytes / MaxBatchBytes / 2); more is a Validate
	// error and means the limit. The err stream sends on one connection: its spill replay
	// and its order need one sender — its entries reach the receivers in the order they
	// were logged (by one goroutine; in the order their shards sealed them across
	// goroutines), to whichever server the connection is on — so Err.Connections other
	// than 0 or 1 is a Validate error and means 1.
	Connections int `json:"connections,omitempty" yaml:"connections,omitempty"`
	// Acks says whether the stream's frames ask the receiver to acknowledge them. Default
	// (AcksDefault): the err stream does, so that an err entry counts as delivered only
	// once the receiver has it and is resent otherwise — except when every server is a
	// unix:// socket, since fluentd's in_unix never acks; the info stream does with
	// RequireAck. AcksOn against a receiver that never acks times every frame out and
	// sends it again.
	Acks Acks `json:"acks,omitempty" yaml:"acks,omitempty"`
}

// Acks says whether a stream asks for acks: AcksDefault, AcksOn or AcksOff. In files and
// the environment it is "", "on" or "off".
type Acks int

const (
	// AcksDefault is on for the err stream (off when every server is a unix:// socket),
	// and RequireAck's value for the info stream.
	AcksDefault Acks = iota
	// AcksOn asks the receiver to acknowledge every frame (at least once, duplicates
	// possible; see RequireAck).
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

// MaxInflightLimit is the most frames one connection keeps in flight (Config.MaxInflight).
const MaxInflightLimit = 64

// MaxConnections is the most connections one stream sends on (StreamConfig.Connections).
const MaxConnections = 16

// MaxSpread is the most connections the info stream opens by default (Info.Connections 0),
// one per server: with more servers than this, each core's connections take MaxSpread of
// them by weight, and different cores mostly different ones.
const MaxSpread = 8

// MaxNameAddresses is the most addresses of one server name that are used at once (see
// Config.Servers): a name with more uses this many of them, keeping those it has.
const MaxNameAddresses = 16

// Resolver looks host names up, for Config.Resolver: *net.Resolver is one
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

// SRVResolver is a Resolver that also looks DNS SRV records up: Config.Resolver must be
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

// Config configures a Core. The zero value is usable: every field has a documented default.
// Config is read once by New; changing it afterwards has no effect.
type Config struct {
	// Addr is the receiver: "tcp://host:port", "host:port", "tls://host:port",
	// "unix:///path" or "srv://_service._proto.name" (see Servers). Default DefaultAddr, unless Servers is set (then Addr must be empty).
	// A host name is every address Resolver gives for it, each a server (see Servers).
	Addr string `json:"addr,omitempty" yaml:"addr,omitempty"`
	// Tag is the base tag; the streams' tags default to Tag+".info" and Tag+".err".
	// Default DefaultTag ("app"). It, Info.Tag and Err.Tag hold only ASCII letters, digits,
	// '.', '_' and '-', have no empty segment ("a..b", ".a") and are at most MaxTagBytes
	// long; otherwise Validate reports it and New sends under it with every other byte
	// made '_', empty segments left out and cut to MaxTagBytes.
	Tag string `json:"tag,omitempty" yaml:"tag,omitempty"`
	// TagTemplate is the Forward tag of the entries of a logger that has a tag name — set by
	// the Tag option in With, or its zap name (logger.Named) with TagFromName: {tag} is Tag,
	// {name} the logger's tag name, {stream} "info" or "err"; {name} is required, the
	// literal text may hold only ASCII letters, digits, '.', '_' and '-', and the tags it
	// makes may have no empty segment and must leave room for a name in MaxTagBytes (else
	// a Validate error, and the default is used). Entries of a logger without a tag name keep their
	// stream's tag (Info.Tag, Err.Tag), so a Config that sets no Tag option and no
	// TagFromName sends every entry under those two tags. Default DefaultTagTemplate
	// ("{tag}.{name}.{stream}": logger "audit" of Tag "shop" sends under "shop.audit.info"
	// and "shop.audit.err"). See docs/tags.md.
	TagTemplate string `json:"tag_template,omitempty" yaml:"tag_template,omitempty"`
	// TagFromName makes a logger's zap name (logger.Named("audit"); zap joins names with
	// dots, as fluentd joins tags) its tag name when it has no Tag option. Default false:
	// names are only written in the record (EncoderConfig.NameKey), as zap does. With it,
	// each entry of a named logger looks its name up in a lock-free table: a few tens of
	// nanoseconds.
	TagFromName bool `json:"tag_from_name,omitempty" yaml:"tag_from_name,omitempty"`
	// MaxTags is the most distinct tag names (Tag options and, with TagFromName, zap names)
	// a core sends under; its memory and its metrics' series are bounded by it. A logger
	// whose name comes past it sends under its stream's tag, with the name in the record
	// under TagOverflowKey (a zap name also under EncoderConfig.NameKey, when set), and each
	// such entry is counted (StreamStats.TagOverflow, fluentcore_tag_overflow_total): never lost,
	// never silent. Default DefaultMaxTags (64); at most MaxTagsLimit (1024), a larger or
	// negative value is a Validate error and means the default.
	MaxTags int `json:"max_tags,omitempty" yaml:"max_tags,omitempty"`
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
	// MaxEntryBytes is the largest encoded entry. Encoding stops where an entry passes it, so
	// a larger entry costs the walk of its fields but not its size in memory, and holds no
	// other caller back. A larger info entry is dropped (too_large); a larger err entry is
	// delivered with its largest string and binary values truncated, each ending in
	// "…(truncated N bytes)", and "<MessageKey>Truncated": true in its record. When that
	// cannot make it fit (too many values), or the entry is over 4 × MaxEntryBytes even with
	// its long values truncated, it is cut short instead, marked the same way: encoded a
	// second time (its marshalers run again), its values kept in order while they fit, each
	// string or binary value cut to MaxEntryBytes/16 bytes, the stacktrace kept, the rest
	// left out. Default DefaultMaxEntryBytes (64 KiB); at most MaxBatchBytes.
	MaxEntryBytes int `json:"max_entry_bytes,omitempty" yaml:"max_entry_bytes,omitempty"`
	// FlushInterval is the longest an info entry waits in a batch that is not full while
	// the receiver takes what is sent; while sending fails, batches are sealed only when
	// full, so that an outage spends the budget on entries (the err stream keeps sealing
	// once its batches go to the spill: with SpillDir at once, else after SpillAfter). Err
	// entries do not wait for it: the err sender
	// seals and sends them as soon as it is free (entries logged while it sends share the
	// next frame). Default DefaultFlushInterval (500ms); at least MinInterval, at most
	// MaxInterval (1h).
	FlushInterval time.Duration `json:"flush_interval,omitempty" yaml:"flush_interval,omitempty"`
	// ErrMaxWait bounds how long an err entry waits for room when the err buffers are full;
	// after it the entry goes to the spill (SpillDir) or ErrFallback. While every connection
	// of the err stream fails, the entry waits only until the sender has moved the queued
	// batches to the spill (at once, SpillAfter or not), and not at all while the sender is
	// stuck in an attempt that has already lasted ErrMaxWait. Default DefaultErrMaxWait
	// (50ms); at least MinInterval, at most MaxErrMaxWait (1s): a longer one is a Validate
	// error and means 1s, so that no logging call waits longer.
	ErrMaxWait time.Duration `json:"err_max_wait,omitempty" yaml:"err_max_wait,omitempty"`
	// ErrFallback receives err entries that cannot be delivered — failed for SpillAfter,
	// buffers full, too large even cut short, logged after Close, or undelivered when Close
	// gives up — as JSON lines {"tag","time","record"}. Default os.Stderr. Writes to it are
	// serialised. With SpillDir those entries go to the spill instead, and ErrFallback only
	// gets what the spill cannot take: entries refused because the spill is full
	// (counted as dropped, spill_full) or because writing it failed (spill_failed), entries
	// logged after Close, and entries too large for any frame (over 6,144,000 bytes).
	ErrFallback io.Writer `json:"-" yaml:"-"`
	// SpillDir turns on the durable err spill: a directory (created if missing, mode 0700)
	// where err batches that cannot be delivered are appended to segment files in Forward
	// wire format, fsynced, and replayed in order — before newer err entries — once the
	// receiver is back, also by the next process after a crash. See docs/configuration.md,
	// "Durable err spill". Default "": off, err entries that cannot be delivered go to ErrFallback.
	// The directory is locked (flock) for the life of the core; if it cannot be created or
	// locked (another core uses it), the core runs without a spill and New reports the
	// problem through Sync, Close and OnEvent (EventSpillDisabled).
	SpillDir string `json:"spill_dir,omitempty" yaml:"spill_dir,omitempty"`
	// SpillAfter is how long the err stream keeps retrying a batch in memory before it
	// moves its batches, in order, to the spill (SpillDir, else ErrFallback); after that,
	// while sends still fail, what is sealed goes there every FlushInterval and a batch is
	// sent again at each backoff step, so no err entry sits unseen in memory through a
	// long outage. The err buffers filling up while sends fail moves them at once. A stall
	// counts as well: once the err sender has waited SpillAfter for an ack (none since the
	// oldest frame waiting was written), the pending batches, those of the frames waiting
	// included, go to the spill, and what is sealed while it lasts follows them; an ack
	// that comes later counts its entries in StreamStats.Duplicated. Default
	// DefaultSpillAfter (5s): longer than a receiver's restart takes (bench/README.md,
	// "Err in an outage"); at least MinInterval, at most MaxInterval (1h).
	SpillAfter time.Duration `json:"spill_after,omitempty" yaml:"spill_after,omitempty"`
	// SpillMaxBytes bounds the spill's segment files; an err entry that does not fit is
	// counted as dropped (spill_full) and written to ErrFallback. Default
	// DefaultSpillMaxBytes (256 MiB); at least 2 × MaxBatchBytes. Only with SpillDir.
	SpillMaxBytes int64 `json:"spill_max_bytes,omitempty" yaml:"spill_max_bytes,omitempty"`
	// SyncTimeout bounds Sync and the flush after a DPanic, Panic or Fatal entry (which, if
	// delivery fails, moves the undelivered err entries to the spill within this bound).
	// Default DefaultSyncTimeout (5s); at least MinInterval, at most MaxTimeout (5m).
	SyncTimeout time.Duration `json:"sync_timeout,omitempty" yaml:"sync_timeout,omitempty"`
	// CloseTimeout bounds how long Close tries to deliver what was logged.
	// Default DefaultCloseTimeout (10s); at least MinInterval, at most MaxTimeout (5m).
	CloseTimeout time.Duration `json:"close_timeout,omitempty" yaml:"close_timeout,omitempty"`
	// DialTimeout bounds connecting, TLS handshake included. Default 5s; at least
	// MinInterval, at most MaxTimeout (5m).
	DialTimeout time.Duration `json:"dial_timeout,omitempty" yaml:"dial_timeout,omitempty"`
	// HandshakeTimeout bounds the shared-key handshake (HELO, PING, PONG) of a new
	// connection. Default: DialTimeout; at least MinInterval, at most MaxTimeout (5m).
	HandshakeTimeout time.Duration `json:"handshake_timeout,omitempty" yaml:"handshake_timeout,omitempty"`
	// WriteTimeout bounds writing one frame. Default 10s; at least MinInterval, at most
	// MaxTimeout (5m).
	WriteTimeout time.Duration `json:"write_timeout,omitempty" yaml:"write_timeout,omitempty"`
	// RequireAck asks the receiver to acknowledge every frame of the info stream too
	// (at-least-once delivery: a frame whose ack is lost is sent again, so duplicates are
	// possible). The err stream asks for acks whatever it says, unless Err.Acks is AcksOff
	// (see StreamConfig.Acks); Info.Acks overrides it for the info stream. Default false:
	// info entries at most once, like fluentd's out_forward. Not for fluentd's unix socket
	// input (in_unix): it never acks, so every frame would time out and be resent; the send
	// error says so, and Err.Acks = AcksOff is the setting for it.
	RequireAck bool `json:"require_ack,omitempty" yaml:"require_ack,omitempty"`
	// AckTimeout bounds the wait for one frame's ack, from its write. Default 30s; at least
	// MinInterval, at most MaxTimeout (5m).
	AckTimeout time.Duration `json:"ack_timeout,omitempty" yaml:"ack_timeout,omitempty"`
	// MaxInflight is how many frames one connection sends ahead, with RequireAck, while their
	// acks are on the way: an acked stream then moves MaxInflight batches per round trip,
	// not one. Acks are matched to their frames by chunk id, in whatever order they come.
	// When the connection fails or an ack is overdue, every frame not acked on it is sent
	// again, oldest first (the at-least-once promise: some may arrive twice). An ack that
	// matches no frame in flight ends the connection with an error and the same resend.
	// Default DefaultMaxInflight (32): the window has to cover the time an ack takes to
	// reach a client whose cores are busy logging, not only the receiver's round trip, for
	// a stream with acks to deliver as much as one without under a logging flood
	// (bench/README.md, "Scale-out and acks", has the figures). At most MaxInflightLimit; a
	// stream's connections together keep at most all its batches but one per shard in
	// flight, so that that many stay for the writers to fill and the senders to take next:
	// (BufferBytes/MaxBatchBytes − shards) / Connections each, at least 1, where shards
	// is 2 × GOMAXPROCS and at most half the batches. With the default sizes that is 28
	// for info and 12 for err on 2 cores, and 16 and 8 on 8 cores or more; a larger
	// MaxInflight is held to that. Negative or above
	// MaxInflightLimit is a Validate error and means the default or the limit.
	// Without RequireAck nothing waits for an ack, and it has no effect.
	MaxInflight int `json:"max_inflight,omitempty" yaml:"max_inflight,omitempty"`
	// RetryMin and RetryMax bound the exponential backoff (with jitter) between attempts to
	// send a frame. Defaults 100ms and 10s; each at least MinInterval and at most
	// MaxInterval (1h), and RetryMin at most RetryMax (else a Validate error, and RetryMax
	// is taken as RetryMin). RetryMax is a bound
	// on each wait: the jitter spreads the waits below it, so after an outage ends the next
	// attempt comes within RetryMax (plus that attempt's dial).
	RetryMin time.Duration `json:"retry_min,omitempty" yaml:"retry_min,omitempty"`
	RetryMax time.Duration `json:"retry_max,omitempty" yaml:"retry_max,omitempty"`
	// TLS configures "tls://" addresses: RootCAs, client Certificates for mutual TLS,
	// ServerName, versions. Default: system roots, TLS 1.2 or later. A config without
	// ServerName gets the host of each address. The receiver's certificate is verified
	// unless InsecureSkipVerify is set. With TLS or TLSFiles set, every address but unix://
	// must be tls://: a plain one (host:port, tcp://) is an error from Validate, and every
	// send to it fails with that error rather than going out in plain text.
	TLS *tls.Config `json:"-" yaml:"-"`
	// TLSFiles configures TLS from files, for configuration files and the environment
	// (FLUENT_TLS_CA_FILE, ...): it is applied on top of TLS (or of the defaults). Read by
	// New; a file that cannot be read or parsed is a Validate error and makes every send
	// fail with it. Default: none.
	TLSFiles TLSFiles `json:"tls,omitempty" yaml:"tls,omitempty"`
	// Compression is "" (the default: PackedForward, entries as bin) or "gzip"
	// (CompressedPackedForward: each batch is one gzip member, options say
	// "compressed":"gzip"). Anything else is a Validate error and means "".
	Compression string `json:"compression,omitempty" yaml:"compression,omitempty"`
	// SharedKey, if set, makes every new connection run the shared_key handshake
	// (HELO/PING/PONG) before any data is sent: NewSecret("key"), or "shared_key" in a file,
	// FLUENT_SHARED_KEY. Default unset (no handshake). A failed
	// handshake is an error wrapping ErrHandshake (never containing the key or the
	// password), counted in fluentcore_handshake_failures_total; the sender keeps retrying
	// with backoff.
	SharedKey Secret `json:"shared_key,omitzero" yaml:"shared_key,omitempty"`
	// SharedKeyFile and PasswordFile name files holding SharedKey and Password, read by New
	// (as Kubernetes mounts secrets), so the secrets stay out of configuration files and the
	// environment. A leading UTF-8 byte-order mark and every trailing space, tab, CR and LF
	// are dropped (what editors and echo add); spaces before or inside the secret are kept.
	// Set a secret or its file, not both. A file that cannot be read, or that holds nothing
	// else, is a Validate error and makes every send fail with it. Default "" (none).
	SharedKeyFile string `json:"shared_key_file,omitempty" yaml:"shared_key_file,omitempty"`
	PasswordFile  string `json:"password_file,omitempty" yaml:"password_file,omitempty"`
	// SelfHostname is the client's name in the handshake. It must differ from the
	// receiver's self_hostname (fluentd's rule: otherwise the receiver's proof would be our
	// own). Default os.Hostname(), or "localhost" if that fails.
	SelfHostname string `json:"self_hostname,omitempty" yaml:"self_hostname,omitempty"`
	// Username and Password answer a receiver that asks for user authentication in its
	// HELO (fluentd's user_auth, fluent-bit's security.users). They need SharedKey.
	// Default "" (none).
	Username string `json:"username,omitempty" yaml:"username,omitempty"`
	Password Secret `json:"password,omitzero" yaml:"password,omitempty"`
	// Servers, if set, replaces Addr by several receivers: the info stream opens one
	// connection per server that is not a standby (Info.Connections, default 0), each new
	// connection going to the server that has the fewest for its weight, so that all the
	// servers take the stream at once, by weight; a connection whose server fails moves to
	// another, and moves back, one at a time, once the server takes connections again.
	// Standbys take connections only while every other server is down. A server that fails
	// is left alone by all of the stream's connections for its own backoff (RetryMin to
	// RetryMax, with jitter) before it is tried again. The err stream's one connection
	// goes to one server at a time, by the same rules.
	//
	// A server (or Addr) whose host is a DNS name, not an IP address, is every address the
	// name has: each is a server of its own, with the name's weight and standby flag, up to
	// MaxNameAddresses. New never waits on a lookup: the name is looked up in the
	// background, each lookup bounded by a second (or DialTimeout if shorter); the info
	// stream's connections (unless Info.Connections is 1) wait for the first one, to be
	// counted and placed over its addresses, and a stream's one connection looks the name
	// up as it dials until then; what is logged meanwhile waits in the buffers. They look
	// it up again every ResolveInterval and, at most every second, after a connection to one of its addresses failed: an address that
	// appears takes connections that are missing elsewhere, one that is gone has its
	// connections moved, in good order, once their frames in flight are acked. IPv4
	// addresses are used if the name has any, else IPv6 ones; a name with one address is
	// that one server, followed as any other. Every lookup goes through Resolver, and the
	// connections dial the addresses it gives, never the name. A failed lookup keeps the
	// addresses of the last one. TLS verifies the name as configured, whichever address is
	// dialed.
	//
	// A server "srv://_service._proto.name" (DNS SRV discovery, as fluentd's srv service
	// discovery) is the name's SRV targets, each at its port, its name looked up through
	// Resolver as it is dialed, up to MaxNameAddresses, looked up as above (and every
	// second until a lookup answers: there is no server before that): the records of the lowest priority are regular servers,
	// the others standbys; a target's weight is its record's (0 counts as 1) times the
	// srv:// server's Weight, so the info stream's connections follow the records' weights
	// (20:10:10 gives 2, 1 and 1). Plain TCP only (with TLS set it is refused as any plain
	// address is), and Resolver must be an SRVResolver (net.Resolver is). Default nil: Addr
	// only.
	Servers []Server `json:"servers,omitempty" yaml:"servers,omitempty"`
	// ResolveInterval is how often the servers' host names are looked up again while the
	// core sends (see Servers). Default DefaultResolveInterval (30s); at least MinInterval,
	// at most MaxInterval (1h).
	ResolveInterval time.Duration `json:"resolve_interval,omitempty" yaml:"resolve_interval,omitempty"`
	// Resolver looks the servers' host names up. Default net.DefaultResolver; a test, or a
	// service with its own DNS client, passes another.
	Resolver Resolver `json:"-" yaml:"-"`
	// Degrade tunes the info stream's degrade state machine.
	Degrade DegradeConfig `json:"degrade,omitempty" yaml:"degrade,omitempty"`
	// Registerer receives the core's Prometheus metrics. Default prometheus.DefaultRegisterer,
	// the registry promhttp.Handler() serves, so that the usual /metrics endpoint shows the
	// fluentcore_* series (the dropped-entries counters above all) with no setting; pass
	// another Registerer to keep them apart, or set NoMetrics to register none. Cores on
	// one Registerer with equal ConstLabels share
	// one set of series, so that a config reload may make the new core before it closes the
	// old one, without an error and without a gap in the series: each counter is the sum
	// over the cores that have shared it (a closed core's included, with what it counts
	// after its Close), so it never goes backwards; each gauge is the sum over the live
	// cores, except degraded and dropping (1 if any is), the ages (the largest),
	// degrade_admit_ratio (the lowest), keep_ratio (of the live cores' recent counts
	// summed) and the last-success timestamps (the latest of any core). So several cores
	// in one process with the default config share the default registry's series, and
	// their numbers add up. A set of series is exported while one of its cores is open; a
	// core made later with the same ConstLabels continues its counters, as long as some
	// core on the Registerer stayed open; once the last core on the Registerer is closed,
	// every set is dropped, and a core made after that starts from zero, as a new process
	// would. Cores meant to be told apart need ConstLabels of their own; cores whose
	// ConstLabels have different names (none, {core}, {core, team}) export side by side:
	// the series are collected by a collector registered unchecked (client_golang's term),
	// with a checked one that describes each metric name, so that the Registerer still
	// keeps the names from any other collector. If it refuses them (another collector has
	// one of the names), the core works without metrics, and Sync and Close report it.
	Registerer prometheus.Registerer `json:"-" yaml:"-"`
	// NoMetrics registers the core's metrics nowhere (Core.Stats still reports them): the
	// opt-out from the default registry. Default false. Setting it with Registerer is a
	// Validate error, and NoMetrics wins.
	NoMetrics bool `json:"no_metrics,omitempty" yaml:"no_metrics,omitempty"`
	// ConstLabels are added to every metric, so that several cores can share a Registerer.
	// Default nil. A name must be a classic Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*,
	// not starting with "__") other than the metrics' own stream, reason, server, tag and
	// le, and a value valid UTF-8; otherwise Validate says which label is wrong, and New
	// registers no metrics (Sync and Close report the same error). A label with an empty
	// value is left out, as Prometheus reads it: {core: ""} shares the series of no label.
	ConstLabels prometheus.Labels `json:"const_labels,omitempty" yaml:"const_labels,omitempty"`
	// OnEvent, if set, is called when the info stream enters or leaves the degraded state
	// and on spill events: EventSpillDisabled, EventSpillFull, EventSpillCorrupt,
	// EventSpillFailed. It is called on the goroutine that met the condition: the sink's
	// own, or a logging one (DegradeAdaptive enters the degraded state on the call whose
	// entry it sheds first, before that entry is counted). It must not block or log
	// through this core.
	OnEvent func(Event) `json:"-" yaml:"-"`
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
	// CAFile holds the CA certificates that verify the receiver. Default: Config.TLS's
	// RootCAs, else the system roots.
	CAFile string `json:"ca_file,omitempty" yaml:"ca_file,omitempty"`
	// CertFile and KeyFile hold the client certificate and its key, for mutual TLS; both
	// or neither. Default: none.
	CertFile string `json:"cert_file,omitempty" yaml:"cert_file,omitempty"`
	KeyFile  string `json:"key_file,omitempty" yaml:"key_file,omitempty"`
	// ServerName is the name the receiver's certificate must carry. Default: the host of
	// each address.
	ServerName string `json:"server_name,omitempty" yaml:"server_name,omitempty"`
	// InsecureSkipVerify accepts any certificate: for tests only. Default false.
	InsecureSkipVerify bool `json:"insecure_skip_verify,omitempty" yaml:"insecure_skip_verify,omitempty"`
}

// Secret holds a shared key or a password (Config.SharedKey, Config.Password) so that no
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
