package forwardtest

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"
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

// Receiver is an in-process Fluent Forward protocol server. It accepts any number of
// connections, decodes requests in all four carrier modes as strictly as fluentd and
// fluent-bit together, stores the entries in arrival order and answers acks. All its
// methods are safe for concurrent use.
type Receiver struct {
	// A Receiver holds nothing that changes but through the parts it is built of, each of
	// which owns its state and its lock: what arrived is its ledger's; whether connections
	// may read is its stall's, and how fast its pacer's; the listener, the connections and
	// every goroutine are its acceptor's, whose close ends them all and closes the done
	// channel every part waits on. Each connection is served by a conn that newConn
	// builds from these parts. opts, addr and logf are fixed by Start.
	opts   options
	addr   string
	logf   func(format string, args ...any) // never nil
	faults faults
	got    *ledger
	stall  *stall
	rate   pacer // WithReadRate, shared by every connection
	acc    *acceptor
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
	if o.readRate < 0 || o.connReadRate < 0 {
		return nil, fmt.Errorf("forwardtest: negative read rate %v", min(o.readRate, o.connReadRate))
	}
	if o.readBuffer < 0 {
		return nil, fmt.Errorf("forwardtest: negative read buffer %d", o.readBuffer)
	}
	if o.ackDelay < 0 {
		return nil, fmt.Errorf("forwardtest: negative ack delay %v", o.ackDelay)
	}
	var tlsConf *tls.Config
	if o.tlsConfig != nil {
		if network == "unix" {
			return nil, errors.New("forwardtest: TLS needs a TCP address")
		}
		tlsConf = o.tlsConfig.Clone()
		if o.tls12Only {
			tlsConf.MinVersion, tlsConf.MaxVersion = tls.VersionTLS12, tls.VersionTLS12
		}
	}
	logf := o.logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	done := make(chan struct{})
	r := &Receiver{opts: o, logf: logf, got: newLedger(done), stall: newStall(done), rate: pacer{rate: o.readRate}}
	r.acc = &acceptor{
		network: network, bound: address, tlsConf: tlsConf, readBuffer: o.readBuffer,
		logf: logf, got: r.got, serve: r.serve, done: done, conns: make(map[net.Conn]struct{}),
	}
	ln, err := r.acc.listen()
	if err != nil {
		return nil, err
	}
	switch {
	case network == "unix":
		r.addr = "unix://" + address
	case tlsConf != nil:
		r.addr = "tls://" + ln.Addr().String()
	default:
		r.addr = "tcp://" + ln.Addr().String()
	}
	r.acc.start(ln)
	return r, nil
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
func (r *Receiver) Close() error { return r.acc.close() }

// Entries returns a copy of the stored entries in arrival order (entries of one request in
// request order; requests ordered by when they were decoded). It returns nil in CountOnly
// mode. It never fails and is safe for concurrent use.
func (r *Receiver) Entries() []Entry { return r.got.entriesNow() }

// TagCounts returns how many entries arrived under each tag since start or the last Reset,
// in CountOnly mode too. It never fails and is safe for concurrent use.
func (r *Receiver) TagCounts() map[string]int64 { return r.got.tagCounts() }

// ByTag returns a copy of the stored entries grouped by their request's tag, each group in
// arrival order (nil in CountOnly mode). It never fails and is safe for concurrent use.
func (r *Receiver) ByTag() map[string][]Entry { return r.got.byTagEntries() }

// Len returns the number of entries received since start or the last Reset, in CountOnly
// mode too. It never fails and is safe for concurrent use.
func (r *Receiver) Len() int { return int(r.got.counters().Entries) }

// WaitForEntries waits until at least n entries have arrived and returns a copy of all
// stored entries (nil in CountOnly mode). It waits on arrivals, without polling. If timeout
// passes first, or the receiver is closed, it returns the entries stored so far and an
// error saying how many of n arrived, with the current Stats. Safe for concurrent use.
func (r *Receiver) WaitForEntries(n int, timeout time.Duration) ([]Entry, error) {
	return r.got.waitForEntries(n, timeout)
}

// WaitFor waits until cond returns true for the receiver's Stats. cond is called without
// the receiver's lock held, once at the start and again after every change, so it may call
// the receiver's methods. If timeout passes first, or the receiver is closed, it returns an
// error with the last Stats seen. Safe for concurrent use.
func (r *Receiver) WaitFor(cond func(Stats) bool, timeout time.Duration) error {
	return r.got.waitFor(cond, timeout)
}

// Stats returns the counters since start or the last Reset. It never fails and is safe
// for concurrent use.
func (r *Receiver) Stats() Stats { return r.got.counters() }

// Violations returns every protocol violation seen since start, oldest first; each error
// names the connection and request and says what fluentd or fluent-bit would do. Reset
// does not forget them. A violating request is not stored and not acked, and its
// connection is closed. It never fails and is safe for concurrent use.
func (r *Receiver) Violations() []error { return r.got.loggedViolations() }

// Stall stops reading from every connection, open and future, until Resume. A request
// whose reading is already under way is finished and stored; no further request is
// decoded, so kernel buffers fill and the client's writes block. Stall returns at once, is
// idempotent, and is safe for concurrent use. Close ends a stall.
func (r *Receiver) Stall() { r.stall.stop() }

// Resume undoes Stall: every connection reads again. It is idempotent (a no-op when not
// stalled) and safe for concurrent use. It forgets what Allow let through and was not read.
func (r *Receiver) Resume() { r.stall.resume() }

// Allow lets a stalled receiver read n more requests (frames, or a handshake's PING),
// whichever connections they arrive on, and stay stalled after them: a test then delivers
// exactly the frames it means to, in order, however fast the client sends. Requests not
// there yet are read when they arrive. On a receiver that is not stalled, or with n < 1,
// it does nothing. It is safe for concurrent use.
func (r *Receiver) Allow(n int) { r.stall.allow(n) }

// Reset forgets the stored entries and zeroes the Stats (connections stay open; a request
// being decoded while Reset runs is stored after it). It does not forget Violations, so
// NewReceiver still reports them. It is safe for concurrent use.
func (r *Receiver) Reset() { r.got.reset() }

// serve serves the connection nc, the id-th, until it ends.
func (r *Receiver) serve(nc net.Conn, id int64) {
	r.newConn(&faultConn{Conn: nc, f: &r.faults}, id, nc.RemoteAddr().String()).serve()
}
