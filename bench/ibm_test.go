//go:build ibm

// IBM's client registers msgpack extension 0 with tinylib/msgp at init, as the official
// client does, and the second registration panics: it runs in its own binary, built with
// `-tags ibm` (make bench does).

package bench

import (
	"strings"
	"sync/atomic"
	"testing"

	ibmclient "github.com/IBM/fluent-forward-go/fluent/client"
)

func init() {
	register(contender{name: "ibm-fluent-forward-go", rank: 8, open: openIBM})
}

// openIBM is github.com/IBM/fluent-forward-go v0.4.0: a synchronous client; each entry is one
// MessageExt request (EventTime) written on the caller's goroutine.
func openIBM(tb testing.TB, s scenario) *client {
	r := mustStartReceiver(tb, KindForward)
	c := ibmclient.New(ibmclient.ConnectionOptions{
		Factory: &ibmclient.ConnFactory{Network: "tcp", Address: strings.TrimPrefix(r.Addr(), "tcp://")},
	})
	if err := c.Connect(); err != nil {
		tb.Fatal(err)
	}
	var refused atomic.Uint64
	post := func(m map[string]any) {
		if err := c.SendMessageExt(Tag, m); err != nil {
			refused.Add(1)
		}
	}
	return &client{
		log:     mapLog(post, s),
		finish:  func() error { return nil }, // each send has written its entry
		refused: refused.Load,
		recv:    r,
		close: func() {
			_ = c.Disconnect()
			_ = r.Close()
		},
	}
}
