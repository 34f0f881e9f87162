// Package outcome is what became of the entries a stream took in, as its counts see it:
// the closed set of reasons an entry is dropped (Reason), and the recent windows of a
// stream's counts (Window) that the share kept (KeepRatio) and whether it drops for
// backpressure are read from. It knows no stream: the stream counts, the sink's clock
// rolls the window once a second, and Stats reads it.
package outcome

import (
	"math"
	"slices"
	"sync"
	"time"
)

// Reason is the closed set of reasons an entry is dropped. Each is a key of a stream's
// dropped counts in Stats (all of them, on both streams) and a value of the "reason" label
// of the dropped-entries metric (those its stream can have), exported at 0 from the start.
type Reason uint8

// The reasons, each with when it applies.
const (
	Degraded    Reason = iota // info stream degraded, policy dropped it (in Check)
	Sampled                   // info stream degraded, sampler dropped it (in Check)
	QueueFull                 // info buffers all in use
	TooLarge                  // entry larger than Transport.MaxEntryBytes (info)
	Closed                    // logged after Close (info)
	EncodeError               // a panic no field could take (zap.Inline, EncodeLevel) while encoding
	Shutdown                  // accepted, but not delivered before Close's deadline (info)
	SpillFailed               // err entry the spill (or, without Spill.Dir, Spill.Fallback) failed to take
	SpillFull                 // err entry the spill refused: Spill.MaxBytes reached (written to Spill.Fallback)
	NumReasons
)

var dropReasonNames = [NumReasons]string{
	"degraded", "sampled", "queue_full", "too_large", "closed", "encode_error", "shutdown",
	"spill_failed", "spill_full",
}

// Backpressure reports whether r is a drop for backpressure, which Dropping shows: the
// degrade policy shed the entry, the buffer had no room, or the spill was full.
func Backpressure(r Reason) bool {
	return r == Degraded || r == Sampled || r == QueueFull || r == SpillFull
}

// String returns the reason's label value.
func (r Reason) String() string { return dropReasonNames[r] }

// KeepRatio is the share of offered entries not dropped: 1 when none were offered.
func KeepRatio(c Counts) float64 {
	if c.Offered == 0 {
		return 1
	}
	return 1 - min(float64(c.Dropped)/float64(c.Offered), 1)
}

// The windows of KeepRatio and Dropping, on the sink's clock, which counts once a second.
const (
	KeepWindow = 10 * time.Second
	DropWindow = time.Second
	// recentSlots holds a count per second for KeepWindow, the one it reaches back to, and
	// one that the clock may be writing.
	recentSlots = int(KeepWindow/time.Second) + 2
)

// Counts are a stream's cumulative counts that its recent windows are taken from:
// offered (Entries), dropped (all reasons) and pressed (the backpressure reasons of
// Dropping).
type Counts struct{ Offered, Dropped, Pressed uint64 }

// Minus returns c - o, each at least 0 (o is an older count).
func (c Counts) Minus(o Counts) Counts {
	sub := func(a, b uint64) uint64 {
		if a < b {
			return 0
		}
		return a - b
	}
	return Counts{sub(c.Offered, o.Offered), sub(c.Dropped, o.Dropped), sub(c.Pressed, o.Pressed)}
}

// Window is a ring of a stream's counts, one per second of the sink's clock (Roll), that
// Stats reads the windows from (Before). Start, Due and Roll are the clock's goroutine's
// only; Before and Newest are safe for concurrent use. Its zero value holds no count.
type Window struct {
	sec int64 // the unix second of the last count; the clock's goroutine's alone

	mu   sync.Mutex
	at   [recentSlots]int64 // unix nanos of each count; 0: none yet
	c    [recentSlots]Counts
	next int
}

// Start takes the first count, of a stream that has counted nothing yet, at now.
func (w *Window) Start(now time.Time) {
	w.sec = now.Unix()
	w.at[0] = now.UnixNano()
	w.next = 1
}

// Due reports whether the clock should take a count at now: the first of its second.
func (w *Window) Due(now time.Time) bool { return now.Unix() != w.sec }

// Roll takes count c at now.
func (w *Window) Roll(now time.Time, c Counts) {
	w.sec = now.Unix()
	w.mu.Lock()
	w.at[w.next], w.c[w.next] = now.UnixNano(), c
	w.next = (w.next + 1) % recentSlots
	w.mu.Unlock()
}

// Newest returns when the newest count was taken (unix nanos). Safe for concurrent use.
func (w *Window) Newest() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Max(w.at[:])
}

// Before returns the newest count taken at least d before now, or the oldest one if none
// is that old.
func (w *Window) Before(now time.Time, d time.Duration) Counts {
	limit := now.Add(-d).UnixNano()
	w.mu.Lock()
	defer w.mu.Unlock()
	best, bestAt := -1, int64(math.MinInt64)
	oldest, oldestAt := -1, int64(math.MaxInt64)
	for i, at := range w.at {
		if at == 0 {
			continue
		}
		if at <= limit && at > bestAt {
			best, bestAt = i, at
		}
		if at < oldestAt {
			oldest, oldestAt = i, at
		}
	}
	switch {
	case best >= 0:
		return w.c[best]
	case oldest >= 0:
		return w.c[oldest]
	}
	return Counts{}
}
