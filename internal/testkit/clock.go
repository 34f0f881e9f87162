package testkit

import (
	"sync"
	"time"
)

// ManualClock is a zapcore.Clock whose time moves only when the test says (Add). Its
// tickers are real ones: a sink Resets them, which only a ticker of time.NewTicker allows.
// Safe for concurrent use.
type ManualClock struct {
	mu  sync.Mutex
	now time.Time
}

// NewManualClock returns a clock at now.
func NewManualClock(now time.Time) *ManualClock { return &ManualClock{now: now} }

// Now returns the clock's time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Add moves the clock by d.
func (c *ManualClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// NewTicker returns a real ticker of period d.
func (c *ManualClock) NewTicker(d time.Duration) *time.Ticker { return time.NewTicker(d) }
