//go:build !ibm

// The official client registers msgpack extension 0 with tinylib/msgp at init, as IBM's
// client does; a second registration panics, so the two never share a binary (see ibm_test.go).

package bench

import (
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	fluentlogger "github.com/fluent/fluent-logger-golang/fluent"
)

func init() {
	register(contender{name: "fluent-logger-async", rank: 4, open: func(tb testing.TB, s scenario) *client {
		return openFluentLogger(tb, s, true, false)
	}})
	register(contender{name: "fluent-logger-sync", rank: 5, open: func(tb testing.TB, s scenario) *client {
		return openFluentLogger(tb, s, false, false)
	}})
	register(contender{name: "fluent-logger-async-ack", rank: 6, open: func(tb testing.TB, s scenario) *client {
		return openFluentLogger(tb, s, true, true)
	}})
}

// hostPort splits a receiver's "tcp://host:port" address.
func hostPort(tb testing.TB, addr string) (string, int) {
	tb.Helper()
	host, p, err := net.SplitHostPort(strings.TrimPrefix(addr, "tcp://"))
	if err != nil {
		tb.Fatal(err)
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		tb.Fatal(err)
	}
	return host, port
}

// openFluentLogger is github.com/fluent/fluent-logger-golang with its defaults (async buffer
// of 8192 messages, no write timeout), sub-second timestamps (EventTime, like every other
// contender) and Post with a map. Entries go out one Message-mode request each.
func openFluentLogger(tb testing.TB, s scenario, async, ack bool) *client {
	r := mustStartReceiver(tb, KindForward)
	host, port := hostPort(tb, r.Addr())
	var refused atomic.Uint64
	f, err := fluentlogger.New(fluentlogger.Config{
		FluentHost:         host,
		FluentPort:         port,
		Async:              async,
		RequestAck:         ack,
		SubSecondPrecision: true,
		// Called for each message the async writer gave up on after its retries.
		AsyncResultCallback: func(_ []byte, err error) {
			if err != nil {
				refused.Add(1)
			}
		},
	})
	if err != nil {
		tb.Fatal(err)
	}
	post := func(m map[string]any) {
		if err := f.Post(Tag, m); err != nil {
			refused.Add(1) // async: "Buffer full"; sync: the write failed
		}
	}
	finish := func() error { return nil } // sync: Post has written the entry
	if async {
		finish = f.Close // the only flush the async client has: it drains the buffer
	}
	return &client{
		log:     mapLog(post, s),
		finish:  finish,
		refused: refused.Load,
		recv:    r,
		close: func() {
			_ = f.Close()
			_ = r.Close()
		},
	}
}
