package fluentcore

import (
	"strings"
	"sync"
	"testing"

	"github.com/fluentcore/fluentcore/forwardtest"
	"go.uber.org/zap"
)

// syncCounter counts the JSON lines written to it.
type syncCounter struct {
	mu sync.Mutex
	n  int
}

func (c *syncCounter) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.n += strings.Count(string(p), "\n")
	c.mu.Unlock()
	return len(p), nil
}

func (c *syncCounter) lines() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// After Close, info entries are counted as closed and err entries go to the fallback.
func TestWritesAfterClose(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	var fb syncCounter
	core := New(Config{Addr: r.Addr(), ErrFallback: &fb})
	if err := core.Close(); err != nil {
		t.Fatal(err)
	}
	logger := zap.New(core)
	logger.Info("late")
	logger.Error("late error")
	st := core.Stats()
	if st.Info.Dropped["closed"] != 1 || st.Err.Spilled != 1 || fb.lines() != 1 {
		t.Fatalf("info closed=%d err spilled=%d fallback lines=%d", st.Info.Dropped["closed"], st.Err.Spilled, fb.lines())
	}
	identityHolds(t, st)
}
