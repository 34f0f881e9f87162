package bench

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	lfluent "github.com/lestrrat-go/fluent-client"
)

func init() {
	register(contender{name: "lestrrat-fluent-client", rank: 7, open: openLestrrat})
}

// openLestrrat is github.com/lestrrat-go/fluent-client v1.0.0, buffered (its default: a
// 64-message queue in front of an 8 MiB pending buffer), sub-second timestamps. An entry
// that finds the pending buffer full is discarded without an error unless WithSyncAppend is
// given per Post; we post as most users do, so such entries show up as lost.
func openLestrrat(tb testing.TB, s scenario) *client {
	r := mustStartReceiver(tb, KindForward)
	c, err := lfluent.New(lfluent.WithAddress(strings.TrimPrefix(r.Addr(), "tcp://")), lfluent.WithSubsecond(true))
	if err != nil {
		tb.Fatal(err)
	}
	var refused atomic.Uint64
	post := func(m map[string]any) {
		if err := c.Post(Tag, m); err != nil {
			refused.Add(1)
		}
	}
	return &client{
		log: mapLog(post, s),
		finish: func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			return c.Shutdown(ctx) // flushes the pending buffer, then stops
		},
		refused: refused.Load,
		recv:    r,
		close: func() {
			_ = c.Close()
			_ = r.Close()
		},
	}
}
