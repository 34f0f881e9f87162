package forward

import (
	"context"
	"crypto/tls"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/fluentcore/fluentcore/forwardtest"
	"github.com/fluentcore/fluentcore/internal/dial"
	"go.uber.org/zap/zapcore"
)

// settingsFor returns the Settings a core resolves for servers addrs (each of the default
// weight, none a standby, TLS from tlsBase for a tls:// one) with every other setting at
// its default.
func settingsFor(t *testing.T, tlsBase *tls.Config, addrs ...string) Settings {
	t.Helper()
	var eps []dial.Endpoint
	for _, a := range addrs {
		ep, err := dial.NewEndpoint(a, 60, false, tlsBase)
		if err != nil {
			t.Fatal(err)
		}
		eps = append(eps, ep)
	}
	return Settings{
		Clock:            zapcore.DefaultClock,
		Endpoints:        dial.Expand(eps, 16),
		MaxInflight:      32,
		DialTimeout:      5 * time.Second,
		HandshakeTimeout: 5 * time.Second,
		WriteTimeout:     10 * time.Second,
		AckTimeout:       30 * time.Second,
		NewBackoff:       func() backoff.BackOff { return dial.NewBackOff(100*time.Millisecond, 10*time.Second) },
		Resolver:         net.DefaultResolver,
		ResolveInterval:  30 * time.Second,
		SpreadMost:       8,
		Dial:             (&net.Dialer{KeepAlive: 30 * time.Second}).DialContext,
	}
}

// newOne returns the forwarder of a stream's only connection on s, closed when the test
// ends.
func newOne(t *testing.T, s Settings) *Forwarder {
	t.Helper()
	f := New(s, 1)[0]
	t.Cleanup(f.Close)
	return f
}

// onDial has d call seen with each address it dials, before dialing it.
func onDial(d dial.Func, seen func(address string)) dial.Func {
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		seen(address)
		return d(ctx, network, address)
	}
}

// steppedClock is a zapcore.Clock whose time moves only when the test moves it (add), and
// whose tickers tick each time it does, never on their own: a wait on one ends when the
// clock moves, whatever its period. They are real tickers with their channel replaced, so
// that Stop and Reset work (and change nothing: the code that reads them checks the time
// at each tick).
type steppedClock struct {
	mu    sync.Mutex
	now   time.Time
	ticks []chan time.Time
}

func (c *steppedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *steppedClock) NewTicker(d time.Duration) *time.Ticker {
	ch := make(chan time.Time, 1)
	t := time.NewTicker(d)
	t.C = ch
	c.mu.Lock()
	c.ticks = append(c.ticks, ch)
	c.mu.Unlock()
	return t
}

func (c *steppedClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	for _, ch := range c.ticks {
		select {
		case ch <- c.now:
		default:
		}
	}
}

// hostPort returns r's address without its scheme.
func hostPort(r *forwardtest.Receiver) string {
	return strings.TrimPrefix(strings.TrimPrefix(r.Addr(), "tcp://"), "tls://")
}
