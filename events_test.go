package fluentcore_test

import (
	"sync"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore"
	"github.com/fluentcore/fluentcore/forwardtest"
	"go.uber.org/zap"
)

// OnEvent hears a stream lose its last connection, with the send error, and deliver again.
func TestOnEventReportsDisconnectedAndConnected(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	var mu sync.Mutex
	var events []fluentcore.Event
	seen := func(kind fluentcore.EventKind) *fluentcore.Event {
		mu.Lock()
		defer mu.Unlock()
		for i := range events {
			if events[i].Kind == kind && events[i].Stream == "info" {
				return &events[i]
			}
		}
		return nil
	}
	core := newTestCore(t, r.Addr(), nil, func(c *fluentcore.Config) {
		c.OnEvent = func(e fluentcore.Event) { mu.Lock(); events = append(events, e); mu.Unlock() }
		c.Transport.RetryMin, c.Transport.RetryMax = 10*time.Millisecond, 50*time.Millisecond
	})
	logger := zap.New(core)
	logger.Info("up")
	if err := core.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := r.SetRefuse(true); err != nil { // down: new connections refused
		t.Fatal(err)
	}
	r.CloseConnections() // and the open one closed
	deadline := time.Now().Add(10 * time.Second)
	for seen(fluentcore.EventDisconnected) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("no EventDisconnected while the receiver refuses: %v (stats %+v)", events, core.Stats().Info)
		}
		logger.Info("while down")
		time.Sleep(5 * time.Millisecond) // pace the calls, not a wait for a result
	}
	if e := seen(fluentcore.EventDisconnected); e.Err == nil || seen(fluentcore.EventConnected) != nil {
		t.Fatalf("disconnected without its error, or connected before it: %v", events)
	}
	if err := r.SetRefuse(false); err != nil {
		t.Fatal(err)
	}
	for seen(fluentcore.EventConnected) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("no EventConnected once the receiver is back: %v", events)
		}
		logger.Info("back")
		time.Sleep(5 * time.Millisecond)
	}
}
