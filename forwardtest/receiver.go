package forwardtest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tinylib/msgp/msgp"
)

// Mode is the Forward protocol carrier mode a request used. The zero value is not a mode;
// String reports it as "Mode(0)". A Mode is a plain value, safe to use from any goroutine.
type Mode int

const (
	// Message is [tag, time, record] or [tag, time, record, options]: one entry.
	Message Mode = iota + 1
	// Forward is [tag, [[time, record], ...]] with optional options.
	Forward
	// PackedForward is [tag, bin(entries...)] with optional options; str entries are
	// accepted too, as fluentd itself sends them.
	PackedForward
	// CompressedPackedForward is PackedForward whose bin is gzip (options "compressed":"gzip").
	CompressedPackedForward
)

// String returns the mode's name as written in the protocol specification, or "Mode(n)"
// for a value that is not a mode. It never fails and is safe for concurrent use.
func (m Mode) String() string {
	switch m {
	case Message:
		return "Message"
	case Forward:
		return "Forward"
	case PackedForward:
		return "PackedForward"
	case CompressedPackedForward:
		return "CompressedPackedForward"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Entry is one event as the receiver decoded it; the zero value is an empty entry. A
// Receiver hands out copies of its entries, but the Record maps (and any []byte, map or
// slice inside them) are shared by every copy. The receiver never modifies them after
// storing, so reading them from any goroutine is safe; modify one only if no other
// goroutine is reading it, and expect later Entries calls to see the change.
type Entry struct {
	// Tag is the request's tag.
	Tag string
	// Time is the event time in UTC: nanosecond precision for an EventTime, whole
	// seconds for an integer time.
	Time time.Time
	// Record is the decoded record. Values are: str -> string, bin -> []byte,
	// ints -> int64 (uint64 only for values above math.MaxInt64), float32 and float64 as
	// decoded, bool, nil, map -> map[string]any, array -> []any.
	Record map[string]any
	// Mode is the carrier mode of the request the entry arrived in.
	Mode Mode
}

// Stats are the receiver's counters since it started or since the last Reset; the zero
// value means nothing arrived. Stats is a plain value returned by copy, safe to keep and
// share.
type Stats struct {
	// Connections counts accepted connections.
	Connections int64
	// Frames counts accepted requests (one msgpack array each).
	Frames int64
	// Entries counts entries in accepted requests.
	Entries int64
	// Bytes counts the encoded size of accepted requests.
	Bytes int64
	// Acks counts {"ack": chunk} replies written.
	Acks int64
	// Truncated counts connections closed by the client in the middle of a request; it is
	// normal when a client drops a connection, and is not a violation.
	Truncated int64
	// Violations counts requests that fluentd or fluent-bit would reject (see Violations).
	Violations int64
	// Handshakes counts PINGs accepted (right shared key, user and password), whatever a
	// PongFault then made of the PONG.
	Handshakes int64
	// HandshakeFailures counts PINGs rejected: wrong shared key, unknown user or wrong
	// password, or a first message that is not a PING (a client without the shared key).
	HandshakeFailures int64
	// FaultedAcks counts acks withheld, corrupted or doubled by SetAckFault.
	FaultedAcks int64
}

// Option configures a Receiver; pass options to NewReceiver or Start, which apply them in
// order (a later option overrides an earlier one). With no options a Receiver listens on
// 127.0.0.1 at a free port, decodes and stores every entry, and reports violations.
// Options are plain values, safe to share; a bad option value surfaces as an error from
// Start.
type Option func(*options)

type options struct {
	addr            string
	countOnly       bool
	allowViolations bool
	logf            func(format string, args ...any)
	logfSet         bool
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
	return func(o *options) { o.logf = logf; o.logfSet = true }
}

// Receiver is an in-process Fluent Forward protocol server. It accepts any number of
// connections, decodes requests in all four carrier modes as strictly as fluentd and
// fluent-bit together, stores the entries in arrival order and answers acks. All its
// methods are safe for concurrent use.
type Receiver struct {
	opts    options
	network string // "tcp" or "unix"
	bound   string // the address actually listened on, for listening again after SetRefuse
	tlsConf *tls.Config
	addr    string
	faults  faults

	done      chan struct{} // closed by Close
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error

	mu         sync.Mutex
	ln         net.Listener // nil while refusing connections
	closed     bool
	conns      map[net.Conn]struct{}
	nextConnID int64
	entries    []Entry
	stats      Stats
	byTag      map[string]int64 // entries by tag, in CountOnly mode too
	violations []error
	changed    chan struct{} // closed on the next change; nil while nobody waits
	stalled    chan struct{} // non-nil while stalled; closed by Resume, and by Allow to wake the readers
	allowed    int           // requests a stalled receiver may still read (Allow)
	paceAt     time.Time     // WithReadRate: when the entries taken so far fit the rate
}

// NewReceiver starts a Receiver for a test or benchmark and registers a tb.Cleanup that
// closes it and then reports every protocol violation it saw with tb.Errorf (unless
// AllowViolations was given). It logs to tb.Logf unless WithLogf says otherwise. If the
// receiver cannot listen, NewReceiver calls tb.Fatalf. Call it from the test goroutine.
func NewReceiver(tb testing.TB, opts ...Option) *Receiver {
	tb.Helper()
	all := make([]Option, 0, len(opts)+1)
	all = append(all, WithLogf(tb.Logf))
	all = append(all, opts...)
	r, err := Start(all...)
	if err != nil {
		tb.Fatalf("forwardtest: %v", err)
	}
	tb.Cleanup(func() {
		if err := r.Close(); err != nil {
			tb.Errorf("forwardtest: close: %v", err)
		}
		if r.opts.allowViolations {
			return
		}
		for _, v := range r.Violations() {
			tb.Errorf("forwardtest: protocol violation: %v", v)
		}
	})
	return r
}

// Start starts a Receiver without a testing.TB, for demos and benchmarks; the caller must
// Close it. Violations are only recorded (see Violations), never reported. It returns an
// error if the address is malformed or cannot be listened on.
func Start(opts ...Option) (*Receiver, error) {
	o := options{addr: "127.0.0.1:0", hostname: DefaultHostname}
	for _, opt := range opts {
		opt(&o)
	}
	network, address, err := parseAddr(o.addr)
	if err != nil {
		return nil, err
	}
	r := &Receiver{
		opts:    o,
		network: network,
		bound:   address,
		done:    make(chan struct{}),
		conns:   make(map[net.Conn]struct{}),
	}
	if o.readRate < 0 || o.connReadRate < 0 {
		return nil, fmt.Errorf("forwardtest: negative read rate %v", min(o.readRate, o.connReadRate))
	}
	if o.readBuffer < 0 {
		return nil, fmt.Errorf("forwardtest: negative read buffer %d", o.readBuffer)
	}
	if o.ackDelay < 0 {
		return nil, fmt.Errorf("forwardtest: negative ack delay %v", o.ackDelay)
	}
	if o.tlsConfig != nil {
		if network == "unix" {
			return nil, errors.New("forwardtest: TLS needs a TCP address")
		}
		r.tlsConf = o.tlsConfig.Clone()
		if o.tls12Only {
			r.tlsConf.MinVersion, r.tlsConf.MaxVersion = tls.VersionTLS12, tls.VersionTLS12
		}
	}
	ln, err := r.listen()
	if err != nil {
		return nil, err
	}
	switch {
	case network == "unix":
		r.addr = "unix://" + address
	case r.tlsConf != nil:
		r.addr = "tls://" + ln.Addr().String()
	default:
		r.addr = "tcp://" + ln.Addr().String()
	}
	r.bound = ln.Addr().String()
	r.ln = ln
	r.wg.Add(1)
	go r.acceptLoop(ln)
	return r, nil
}

// listen opens the listener at r.bound, with TLS if configured.
func (r *Receiver) listen() (net.Listener, error) {
	ln, err := new(net.ListenConfig).Listen(context.Background(), r.network, r.bound)
	if err != nil {
		return nil, fmt.Errorf("forwardtest: listen: %w", err)
	}
	if r.tlsConf != nil {
		ln = tls.NewListener(ln, r.tlsConf)
	}
	return ln, nil
}

func parseAddr(addr string) (network, address string, err error) {
	switch {
	case strings.HasPrefix(addr, "unix://"):
		network, address = "unix", strings.TrimPrefix(addr, "unix://")
	case strings.HasPrefix(addr, "tcp://"):
		network, address = "tcp", strings.TrimPrefix(addr, "tcp://")
	case strings.Contains(addr, "://"):
		return "", "", fmt.Errorf("forwardtest: address %q: only tcp:// and unix:// are supported", addr)
	default:
		network, address = "tcp", addr
	}
	if address == "" {
		return "", "", fmt.Errorf("forwardtest: address %q has no host:port or path", addr)
	}
	return network, address, nil
}

// Addr returns the address the receiver listens on, in the form a client configuration
// takes: "tcp://127.0.0.1:PORT", "tls://127.0.0.1:PORT" (with WithTLS) or
// "unix:///path". It never fails and is safe for concurrent use, also after Close.
func (r *Receiver) Addr() string { return r.addr }

// Close stops the receiver: it closes the listener and every connection (requests in the
// middle of being read are abandoned, not counted as truncated), and waits for all the
// receiver's goroutines to return. Stored entries, stats and violations stay readable.
// It is idempotent and safe for concurrent use; every call returns the error of closing
// the listener, if any.
func (r *Receiver) Close() error {
	r.closeOnce.Do(func() {
		r.mu.Lock()
		r.closed = true
		ln := r.ln
		r.ln = nil
		conns := make([]net.Conn, 0, len(r.conns))
		for c := range r.conns {
			conns = append(conns, c)
		}
		r.mu.Unlock()
		close(r.done)
		if ln != nil {
			r.closeErr = ln.Close()
		}
		for _, c := range conns {
			_ = c.Close()
		}
		r.wg.Wait()
	})
	return r.closeErr
}

// Entries returns a copy of the stored entries in arrival order (entries of one request in
// request order; requests ordered by when they were decoded). It returns nil in CountOnly
// mode. It never fails and is safe for concurrent use.
func (r *Receiver) Entries() []Entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.entriesLocked()
}

func (r *Receiver) entriesLocked() []Entry {
	if r.entries == nil {
		return nil
	}
	return append([]Entry(nil), r.entries...)
}

// TagCounts returns how many entries arrived under each tag since start or the last Reset,
// in CountOnly mode too. It never fails and is safe for concurrent use.
func (r *Receiver) TagCounts() map[string]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.byTag)
}

// ByTag returns a copy of the stored entries grouped by their request's tag, each group in
// arrival order (nil in CountOnly mode). It never fails and is safe for concurrent use.
func (r *Receiver) ByTag() map[string][]Entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.entries == nil {
		return nil
	}
	m := map[string][]Entry{}
	for _, e := range r.entries {
		m[e.Tag] = append(m[e.Tag], e)
	}
	return m
}

// Len returns the number of entries received since start or the last Reset, in CountOnly
// mode too. It never fails and is safe for concurrent use.
func (r *Receiver) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return int(r.stats.Entries)
}

// WaitForEntries waits until at least n entries have arrived and returns a copy of all
// stored entries (nil in CountOnly mode). It waits on arrivals, without polling. If timeout
// passes first, or the receiver is closed, it returns the entries stored so far and an
// error saying how many of n arrived, with the current Stats. Safe for concurrent use.
func (r *Receiver) WaitForEntries(n int, timeout time.Duration) ([]Entry, error) {
	var got []Entry
	var s Stats
	err := r.wait(timeout, func() bool {
		s = r.stats
		if s.Entries >= int64(n) {
			got = r.entriesLocked()
			return true
		}
		return false
	})
	if err != nil {
		r.mu.Lock()
		got, s = r.entriesLocked(), r.stats
		r.mu.Unlock()
		return got, fmt.Errorf("forwardtest: %d of %d entries arrived: %w (stats %+v)", s.Entries, n, err, s)
	}
	return got, nil
}

// WaitFor waits until cond returns true for the receiver's Stats. cond is called without
// the receiver's lock held, once at the start and again after every change, so it may call
// the receiver's methods. If timeout passes first, or the receiver is closed, it returns an
// error with the last Stats seen. Safe for concurrent use.
func (r *Receiver) WaitFor(cond func(Stats) bool, timeout time.Duration) error {
	var s Stats
	err := r.wait(timeout, func() bool { s = r.stats; return false }, func() bool { return cond(s) })
	if err != nil {
		return fmt.Errorf("forwardtest: condition not met: %w (stats %+v)", err, s)
	}
	return nil
}

// wait runs locked (with r.mu held) and then unlocked (without) until one of them reports
// true, re-running both after every change of the receiver's state.
func (r *Receiver) wait(timeout time.Duration, locked func() bool, unlocked ...func() bool) error {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		r.mu.Lock()
		ok := locked()
		closed := r.closed
		if r.changed == nil {
			r.changed = make(chan struct{})
		}
		ch := r.changed
		r.mu.Unlock()
		for _, f := range unlocked {
			ok = ok || f()
		}
		if ok {
			return nil
		}
		if closed {
			return errors.New("receiver closed")
		}
		select {
		case <-ch:
		case <-r.done:
		case <-timer.C:
			return fmt.Errorf("timed out after %v", timeout)
		}
	}
}

// notifyLocked wakes every waiter. r.mu must be held.
func (r *Receiver) notifyLocked() {
	if r.changed != nil {
		close(r.changed)
		r.changed = nil
	}
}

// Stats returns the counters since start or the last Reset. It never fails and is safe
// for concurrent use.
func (r *Receiver) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats
}

// Violations returns every protocol violation seen since start, oldest first; each error
// names the connection and request and says what fluentd or fluent-bit would do. Reset
// does not forget them. A violating request is not stored and not acked, and its
// connection is closed. It never fails and is safe for concurrent use.
func (r *Receiver) Violations() []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]error(nil), r.violations...)
}

// Stall stops reading from every connection, open and future, until Resume. A request
// whose reading is already under way is finished and stored; no further request is
// decoded, so kernel buffers fill and the client's writes block. Stall returns at once, is
// idempotent, and is safe for concurrent use. Close ends a stall.
func (r *Receiver) Stall() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stalled == nil {
		r.stalled = make(chan struct{})
	}
}

// Resume undoes Stall: every connection reads again. It is idempotent (a no-op when not
// stalled) and safe for concurrent use. It forgets what Allow let through and was not read.
func (r *Receiver) Resume() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stalled != nil {
		close(r.stalled)
		r.stalled = nil
	}
	r.allowed = 0
}

// Allow lets a stalled receiver read n more requests (frames, or a handshake's PING),
// whichever connections they arrive on, and stay stalled after them: a test then delivers
// exactly the frames it means to, in order, however fast the client sends. Requests not
// there yet are read when they arrive. On a receiver that is not stalled, or with n < 1,
// it does nothing. It is safe for concurrent use.
func (r *Receiver) Allow(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stalled == nil || n < 1 {
		return
	}
	r.allowed += n
	close(r.stalled) // wakes the readers waiting in gate; the receiver stays stalled
	r.stalled = make(chan struct{})
}

// Reset forgets the stored entries and zeroes the Stats (connections stay open; a request
// being decoded while Reset runs is stored after it). It does not forget Violations, so
// NewReceiver still reports them. It is safe for concurrent use.
func (r *Receiver) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.entries)
	r.entries = r.entries[:0]
	r.stats = Stats{}
	clear(r.byTag)
	r.notifyLocked()
}

// gate blocks while the receiver is stalled and nothing is allowed (Allow); take, for a
// request about to be read, uses up one allowed. It reports false once the receiver is
// closed.
func (r *Receiver) gate(take bool) bool {
	for {
		r.mu.Lock()
		ch, closed := r.stalled, r.closed
		if ch != nil && r.allowed > 0 {
			if take {
				r.allowed--
			}
			ch = nil
		}
		r.mu.Unlock()
		if closed {
			return false
		}
		if ch == nil {
			return true
		}
		select {
		case <-ch:
		case <-r.done:
			return false
		}
	}
}

func (r *Receiver) isClosed() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

func (r *Receiver) logf(format string, args ...any) {
	if r.opts.logf != nil {
		r.opts.logf(format, args...)
	}
}

// acceptLoop accepts connections on ln until ln is closed by Close or SetRefuse.
func (r *Receiver) acceptLoop(ln net.Listener) {
	defer r.wg.Done()
	var delay time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			r.mu.Lock()
			gone := r.ln != ln
			r.mu.Unlock()
			if r.isClosed() || gone {
				return
			}
			// A transient failure (for example EMFILE): back off and try again.
			delay = min(max(2*delay, 5*time.Millisecond), 200*time.Millisecond)
			r.logf("forwardtest: accept: %v; retrying in %v", err, delay)
			select {
			case <-r.done:
				return
			case <-time.After(delay):
			}
			continue
		}
		delay = 0
		if r.opts.readBuffer > 0 {
			r.fixReadBuffer(nc)
		}
		r.mu.Lock()
		if r.closed || r.ln != ln {
			// Closed, or refusing (SetRefuse) since the kernel accepted it: the connection
			// is refused like those that came after, not kept. Registering it would let it
			// slip past a CloseConnections that ran in between and serve on through the
			// fault.
			r.mu.Unlock()
			_ = nc.Close()
			return
		}
		r.nextConnID++
		id := r.nextConnID
		r.conns[nc] = struct{}{}
		r.stats.Connections++
		r.notifyLocked()
		r.wg.Add(1)
		r.mu.Unlock()
		go r.serve(nc, id)
	}
}

// fixReadBuffer sets an accepted connection's kernel receive buffer (WithReadBuffer).
func (r *Receiver) fixReadBuffer(nc net.Conn) {
	c := nc
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	sb, ok := c.(interface{ SetReadBuffer(int) error })
	if !ok {
		r.logf("forwardtest: %T has no read buffer to set", c)
		return
	}
	if err := sb.SetReadBuffer(r.opts.readBuffer); err != nil {
		r.logf("forwardtest: read buffer: %v", err)
	}
}

// readBufferSize is the per-connection read buffer.
const readBufferSize = 32 << 10

func (r *Receiver) serve(nc net.Conn, id int64) {
	defer r.wg.Done()
	defer func() {
		_ = nc.Close()
		r.mu.Lock()
		delete(r.conns, nc)
		r.mu.Unlock()
	}()
	c := r.newConn(&faultConn{Conn: nc, f: &r.faults}, id, nc.RemoteAddr().String())
	defer c.endAcks() // runs before the close above
	if r.opts.handshake() && !c.handshake() {
		return
	}
	for {
		// Check the gate before waiting for a request and again once its first byte is
		// there, so that a request arriving after Stall returned is never decoded.
		if !r.gate(false) {
			return
		}
		if _, err := c.rd.R.PeekByte(); err != nil {
			return // closed between requests: normal
		}
		if !r.gate(true) {
			return
		}
		if !c.step() || r.opts.denyKeepalive {
			return // deny_keepalive: one request per connection, as fluentd
		}
		if r.opts.readRate > 0 && !r.pace(&r.paceAt, &r.mu, r.opts.readRate, c.lastN) {
			return
		}
		if r.opts.connReadRate > 0 && !r.pace(&c.paceAt, nil, r.opts.connReadRate, c.lastN) {
			return
		}
	}
}

// pace waits until n more entries fit rate, the entries so far fitting by *next (guarded
// by mu, if shared between connections); false if the receiver closed meanwhile.
func (r *Receiver) pace(next *time.Time, mu *sync.Mutex, rate float64, n int) bool {
	if mu != nil {
		mu.Lock()
	}
	now := time.Now()
	at := *next
	if at.Before(now) {
		at = now
	}
	*next = at.Add(time.Duration(float64(n) / rate * float64(time.Second)))
	if mu != nil {
		mu.Unlock()
	}
	t := time.NewTimer(time.Until(at))
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.done:
		return false
	}
}

func (r *Receiver) newConn(nc net.Conn, id int64, peer string) *conn {
	c := &conn{r: r, id: id, peer: peer, countOnly: r.opts.countOnly}
	if nc != nil {
		c.w = nc
		c.rd = msgp.NewReaderSize(nc, readBufferSize)
	}
	return c
}

// step reads, decodes, stores and acks one request. It reports whether the connection
// should go on.
func (c *conn) step() bool {
	r := c.r
	c.frames++
	if err := c.readFrame(); err != nil {
		if r.isClosed() {
			return false
		}
		var v violationError
		if errors.As(err, &v) {
			r.violation(fmt.Errorf("conn %d (%s) request %d: %w", c.id, c.peer, c.frames, v.err))
			return false
		}
		r.mu.Lock()
		r.stats.Truncated++
		r.notifyLocked()
		r.mu.Unlock()
		r.logf("forwardtest: conn %d (%s): closed after %d bytes of request %d: %v", c.id, c.peer, len(c.frame), c.frames, err)
		return false
	}
	res, err := c.decodeFrame(c.frame)
	if err != nil {
		where := ""
		switch {
		case res.tag != "":
			where = fmt.Sprintf(" (%v, tag %q)", res.mode, res.tag)
		case res.mode != 0:
			where = fmt.Sprintf(" (%v)", res.mode)
		}
		r.violation(fmt.Errorf("conn %d (%s) request %d%s: %w", c.id, c.peer, c.frames, where, err))
		clear(c.batch)
		c.batch = c.batch[:0]
		return false
	}
	r.mu.Lock()
	if !c.countOnly {
		r.entries = append(r.entries, c.batch...)
	}
	r.stats.Frames++
	r.stats.Entries += int64(res.n)
	if r.byTag == nil {
		r.byTag = map[string]int64{}
	}
	r.byTag[string(res.tagZC)] += int64(res.n)
	c.lastN = res.n
	r.stats.Bytes += int64(len(c.frame))
	r.notifyLocked()
	r.mu.Unlock()
	clear(c.batch)
	c.batch = c.batch[:0]
	if res.hasChunk {
		fault := AckFault(r.faults.ack.Load())
		if fault == AckWithhold {
			r.countFaultedAck()
			return true
		}
		token := res.chunk
		if fault == AckWrongToken {
			token = wrongToken
		}
		c.ack = msgp.AppendMapHeader(c.ack[:0], 1)
		c.ack = msgp.AppendString(c.ack, "ack")
		c.ack = msgp.AppendString(c.ack, token)
		switch fault {
		case AckMalformed:
			c.ack = append(c.ack[:0], malformedAck...)
		case AckTwice:
			c.ack = append(c.ack, c.ack...)
		}
		if c.w == nil {
			return true
		}
		if r.opts.ackDelay > 0 {
			return c.ackLater(fault)
		}
		return c.writeAck(c.ack, fault, c.frames)
	}
	return true
}

// writeAck writes the ack of request number frame; false if the connection failed.
func (c *conn) writeAck(ack []byte, fault AckFault, frame int64) bool {
	r := c.r
	if _, err := c.w.Write(ack); err != nil {
		if !r.isClosed() {
			r.logf("forwardtest: conn %d (%s): writing ack for request %d: %v", c.id, c.peer, frame, err)
		}
		return false
	}
	if fault != AckOK {
		r.countFaultedAck()
		return true
	}
	r.mu.Lock()
	r.stats.Acks++
	r.notifyLocked()
	r.mu.Unlock()
	return true
}

// delayedAck is an ack WithAckDelay holds back until at.
type delayedAck struct {
	at    time.Time
	ack   []byte
	fault AckFault
	frame int64
}

// ackLater queues the ack in c.ack for WithAckDelay's writer, starting it on first use;
// false if the receiver closed or the writer failed, which ends the connection.
func (c *conn) ackLater(fault AckFault) bool {
	if c.delayed == nil {
		c.delayed, c.ackerDone, c.ackerFailed = make(chan delayedAck, 1024), make(chan struct{}), make(chan struct{})
		go c.writeDelayedAcks()
	}
	a := delayedAck{at: time.Now().Add(c.r.opts.ackDelay), ack: slices.Clone(c.ack), fault: fault, frame: c.frames}
	select {
	case c.delayed <- a:
		return true
	case <-c.ackerFailed:
		return false
	case <-c.r.done:
		return false
	}
}

// writeDelayedAcks writes the queued acks in order, each at its time, until the queue is
// closed (endAcks) or a write fails.
func (c *conn) writeDelayedAcks() {
	defer close(c.ackerDone)
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for a := range c.delayed {
		if d := time.Until(a.at); d > 0 {
			t.Reset(d)
			select {
			case <-t.C:
			case <-c.r.done:
				return
			}
		}
		if !c.writeAck(a.ack, a.fault, a.frame) {
			close(c.ackerFailed)
			return
		}
	}
}

// endAcks lets WithAckDelay's writer send what it holds, and waits for it, before the
// connection is closed: a receiver that closes after a request (DenyKeepalive) acks first.
func (c *conn) endAcks() {
	if c.delayed == nil {
		return
	}
	close(c.delayed)
	select {
	case <-c.ackerDone:
	case <-c.r.done:
	}
}

func (r *Receiver) countFaultedAck() {
	r.mu.Lock()
	r.stats.FaultedAcks++
	r.notifyLocked()
	r.mu.Unlock()
}

func (r *Receiver) violation(err error) {
	r.mu.Lock()
	r.violations = append(r.violations, err)
	r.stats.Violations++
	r.notifyLocked()
	r.mu.Unlock()
	r.logf("forwardtest: protocol violation, closing the connection: %v", err)
}
