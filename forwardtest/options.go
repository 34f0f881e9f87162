package forwardtest

import (
	"crypto/tls"
	"time"
)

// Option configures a Receiver; pass options to NewReceiver or Start, which apply them in
// order (a later option overrides an earlier one). With no options a Receiver listens on
// 127.0.0.1 at a free port, decodes and stores every entry, and reports violations.
// Options are plain values, safe to share; a bad option value surfaces as an error from
// Start.
type Option func(*options)

// options are what the Options set; Start fixes them, and nothing changes them after.
type options struct {
	addr            string
	countOnly       bool
	allowViolations bool
	logf            func(format string, args ...any)
	sharedKey       string
	users           map[string]string
	hostname        string
	heloStr         bool
	denyKeepalive   bool
	tlsConfig       *tls.Config
	tls12Only       bool
	readRate        float64
	connReadRate    float64
	ackDelay        time.Duration
	readBuffer      int
}

// handshake reports whether connections start with HELO/PING/PONG.
func (o *options) handshake() bool { return o.sharedKey != "" || len(o.users) > 0 }

// WithAddr sets the address to listen on: "host:port" or "tcp://host:port" for TCP, or
// "unix:///path/to/socket" for a unix socket. The default is "127.0.0.1:0", a free port on
// the loopback interface. An address that cannot be listened on makes Start return an
// error (NewReceiver fails the test).
func WithAddr(addr string) Option {
	return func(o *options) { o.addr = addr }
}

// CountOnly makes the receiver count entries without decoding or storing them: Entries
// returns nil while Len and Stats count as usual. Requests are still framed and checked
// (request shape, tag, options, size limits, the [time, map] shape and time of each
// entry), but records are skipped, not decoded, so violations inside records (non-str
// keys, extension values) go unnoticed. It is the receiver for benchmarks: by default
// (off) every record is decoded into maps.
//
// Its cost per entry is framing, checking and counting it, nearly all of it skipping the
// record (msgp.Skip), and it allocates nothing per entry, nor per request unless the
// request asks for an ack (bench/README.md, "Figures behind the doc comments").
func CountOnly() Option {
	return func(o *options) { o.countOnly = true }
}

// WithReadRate makes the receiver take at most perSecond entries a second, over all its
// connections, as a fluentd whose output is the bottleneck: after each request it waits
// until the request's entries fit the rate before it reads the next one (and acks the
// request before waiting). The client sees the backpressure in its socket buffers. The
// default, 0, is no limit; a negative rate makes Start return an error.
func WithReadRate(perSecond float64) Option {
	return func(o *options) { o.readRate = perSecond }
}

// WithConnReadRate limits each connection on its own to perSecond entries a second, read
// as WithReadRate reads; the two can be combined. It is the shape of fluentd's `workers N`:
// the workers share one port and each connection is served by one of them, so a client
// gets more of the receiver only by opening more connections. The default, 0, is no
// limit; a negative rate makes Start return an error.
func WithConnReadRate(perSecond float64) Option {
	return func(o *options) { o.connReadRate = perSecond }
}

// WithReadBuffer fixes each connection's kernel receive buffer (SO_RCVBUF) at bytes.
// Otherwise the kernel sizes it, and on Linux grows it as the connection goes, by a timing
// that differs from run to run: in front of a slow receiver (WithReadRate) the socket then
// holds anything from a few hundred kilobytes to several megabytes that the receiver has
// not read, and two runs of a client deliver amounts that differ by that much. A benchmark
// that compares two clients against a slow receiver fixes it. The kernel may round the
// size (Linux doubles it for its bookkeeping); one it refuses is logged (WithLogf) and the
// connection served with the kernel's own. The default, 0, leaves it to the kernel; a
// negative size makes Start return an error.
func WithReadBuffer(bytes int) Option {
	return func(o *options) { o.readBuffer = bytes }
}

// WithAckDelay makes the receiver write each ack d after it has read the request, while
// it goes on reading the connection: the round trip to a distant receiver, which a client
// that waits for every ack before its next request pays in full. Acks keep their order.
// The default, 0, acks at once; a negative delay makes Start return an error.
func WithAckDelay(d time.Duration) Option {
	return func(o *options) { o.ackDelay = d }
}

// AllowViolations stops NewReceiver from failing the test with tb.Errorf for each
// protocol violation at cleanup; use it in tests that send bad requests on purpose. The
// default is to report them. Violations are recorded either way (see Violations).
func AllowViolations() Option {
	return func(o *options) { o.allowViolations = true }
}

// WithLogf sets where the receiver logs connection-level events (violations, truncated
// requests, failed acks). The default is tb.Logf for NewReceiver and no logging for Start;
// nil disables logging. logf is called from the receiver's connection goroutines, so it
// must be safe for concurrent use.
func WithLogf(logf func(format string, args ...any)) Option {
	return func(o *options) { o.logf = logf }
}
