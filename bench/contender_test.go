package bench

import (
	"cmp"
	"flag"
	"slices"
	"testing"

	"go.uber.org/zap"
)

// scenario is one of zap's benchmark scenarios; every contender runs each one it has an API
// for, with the same record.
type scenario int

const (
	addingFields       scenario = iota // 10 fields at the call site
	accumulatedContext                 // the 10 fields added once (With, or a prebuilt map)
	withoutFields                      // message only
	sugar                              // Infow with 10 key-value pairs (zap-based contenders)
)

func (s scenario) String() string {
	return [...]string{"AddingFields", "AccumulatedContext", "WithoutFields", "Sugar"}[s]
}

// client is one contender's client for one benchmark run, started against its own receiver.
type client struct {
	// log makes one log call. It is safe for concurrent use.
	log func()
	// finish flushes or closes the client: once it returns, the client has written (or
	// given up on) every entry it accepted.
	finish func() error
	// sync, if set, flushes without closing (used to connect before an outage).
	sync func() error
	// refused counts the entries the client refused or dropped and said so: an error
	// returned or reported, a counted drop.
	refused func() uint64
	// recv is the receiver; nil when the client writes nowhere (io.Discard).
	recv Counter
	// close releases the client and its receiver.
	close func()
	// extra, if set, reports the client's own metrics of a timed loop of calls log calls.
	extra func(b *testing.B, calls int64)
}

// contender is one logging client in the comparison.
type contender struct {
	name  string
	rank  int  // row order in the tables
	sugar bool // has a sugared API (the Sugar scenario)
	open  func(tb testing.TB, s scenario) *client
}

var contenders []contender

// register adds a contender; each contender's file registers itself in init, so a build tag
// on the file decides whether it runs.
func register(c contender) {
	contenders = append(contenders, c)
	slices.SortFunc(contenders, func(a, b contender) int { return cmp.Compare(a.rank, b.rank) })
}

// reverse runs the contenders bottom to top. run.sh sets it in every other round, so that
// neither side of a comparison always runs first: a shared machine drifts within a run.
var reverse = flag.Bool("bench.reverse", false, "run the contenders in reverse table order")

// lineup is the contenders in the order this run measures them.
func lineup() []contender {
	if !*reverse {
		return contenders
	}
	r := slices.Clone(contenders)
	slices.Reverse(r)
	return r
}

func (c contender) runs(s scenario) bool { return s != sugar || c.sugar }

// zapLog returns the log call of scenario s for a zap logger.
func zapLog(l *zap.Logger, s scenario) func() {
	switch s {
	case addingFields:
		return func() { LogFields(l) }
	case accumulatedContext:
		lc := l.With(ContextFields()...)
		return func() { lc.Info(Message) }
	case withoutFields:
		return func() { l.Info(Message) }
	default:
		sl := l.Sugar()
		return func() { LogSugar(sl) }
	}
}

// mapLog returns the log call of scenario s for a client that posts maps: a new map per call
// for AddingFields and WithoutFields, one shared, read-only map for AccumulatedContext (the
// context is built once, as With does).
func mapLog(post func(map[string]any), s scenario) func() {
	switch s {
	case accumulatedContext:
		m := RecordMap()
		return func() { post(m) }
	case withoutFields:
		return func() { post(BareMap()) }
	default:
		return func() { post(RecordMap()) }
	}
}

// mustStartReceiver starts a receiver of the given kind in its own process.
func mustStartReceiver(tb testing.TB, kind string) Counter {
	tb.Helper()
	r, err := StartRemote(kind)
	if err != nil {
		tb.Fatal(err)
	}
	return r
}
