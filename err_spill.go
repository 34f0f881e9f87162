package fluentcore

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/fluentcore/fluentcore/internal/spill"
	"go.uber.org/zap/zapcore"
)

// errPolicy is the err stream's: no entry is lost silently. A writer that finds no free
// batch waits up to ErrMaxWait, an entry over MaxEntryBytes is truncated, and what still
// cannot be carried is spilled (internal/spill: the durable segments of SpillDir, else
// ErrFallback) and counted. Every write wakes the sender, so err entries do not wait for
// FlushInterval.
type errPolicy struct {
	maxWait time.Duration // ErrMaxWait
	wake    chan struct{} // an entry is waiting: the sender seals and sends it at once
	spill   spill.Spiller // where entries go that cannot be delivered
	enc     entryEncoder  // encodes the entries that go to the spill directly

	// With SpillDir: the durable spill the sender moves batches to and replays from.
	disk       *spill.Dir
	spillKick  chan struct{} // a writer spilled: the buffers are full (nil without disk)
	spillAfter time.Duration
}

// newErrPolicy builds the err stream's policy. Without SpillDir, or when it cannot be used
// (the error says why), entries that cannot be delivered go to ErrFallback.
func newErrPolicy(s *settings) (*errPolicy, error) {
	fallback := spill.NewJSONWriter(s.errFallback)
	p := &errPolicy{maxWait: s.errMaxWait, wake: make(chan struct{}, 1), spill: fallback, enc: entryEncoder{enc: newMsgpEncoder(s.enc)}}
	if s.spillDir == "" {
		return p, nil
	}
	var report spill.Reporter
	if s.onEvent != nil {
		report = func(kind spill.EventKind, err error) {
			s.event(time.Now(), [...]EventKind{spill.Full: EventSpillFull, spill.Corrupt: EventSpillCorrupt, spill.Failed: EventSpillFailed}[kind], err)
		}
	}
	disk, err := spill.Open(s.spillDir, s.spillMaxBytes, s.batchBytes, report)
	if err != nil {
		return p, err
	}
	p.disk, p.spillKick, p.spillAfter = disk, make(chan struct{}, 1), s.spillAfter
	p.spill = spill.Chain{Disk: disk, Fallback: fallback}
	return p, nil
}

// wakeSender tells the sender an entry is waiting; it never blocks.
func (p *errPolicy) wakeSender() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// replaying reports whether the durable spill holds frames: then it is the stream's queue.
func (p *errPolicy) replaying() bool { return p.disk != nil && !p.disk.Empty() }

// spillNow reports whether a batch whose sends have failed since failingSince goes to the
// durable spill: after SpillAfter, or at once when the spill is already the queue.
func (p *errPolicy) spillNow(failingSince time.Time) bool {
	return p.disk != nil && (time.Since(failingSince) >= p.spillAfter || !p.disk.Empty())
}

// entryEncoder encodes single entries for the spill, one at a time. Safe for concurrent use.
type entryEncoder struct {
	mu  sync.Mutex
	enc *msgpEncoder
	buf []byte
}

// spillEntry spills one err entry that could not be buffered and counts it. With a durable
// spill it also wakes the sender: full buffers are a reason to move the queued batches to
// the spill now.
func (s *stream) spillEntry(ctx *encodedContext, ent zapcore.Entry, fields []zapcore.Field) {
	e := &s.err.enc
	e.mu.Lock()
	out, ok := encodeSafely(e.enc, e.buf[:0], ctx, ent, fields)
	if ok {
		s.countSpill(s.err.spill.Append(s.tag, out, 1), 1)
	} else {
		s.shards[0].dropped[dropEncodeError].Add(1)
	}
	if cap(out) <= 64<<10 {
		e.buf = out[:0]
	} else {
		e.buf = nil // a rare huge entry: do not keep its buffer
	}
	e.mu.Unlock()
	if s.err.spillKick != nil {
		select {
		case s.err.spillKick <- struct{}{}:
		default:
		}
	}
}

// spillSealed hands a sealed err batch to the spill and frees it.
func (s *stream) spillSealed(b *batch) {
	s.countSpill(s.err.spill.Append(s.tag, b.buf, b.n), b.n)
	s.finish(b)
}

// countSpill counts n entries by what the spill said: spilled, or dropped with the reason
// (the spill chain has written them to ErrFallback where it could): never silently.
func (s *stream) countSpill(err error, n int) {
	switch {
	case err == nil:
		s.spilled.Add(uint64(n))
	case errors.Is(err, spill.ErrFull):
		s.shards[0].dropped[dropSpillFull].Add(uint64(n))
	default:
		s.shards[0].dropped[dropSpillFailed].Add(uint64(n))
	}
}

// replay is the err sender while the durable spill holds frames. The spill is then the
// queue: every sealed batch is appended to its tail (which frees the batch for writers at
// once) and frames are sent from its head, oldest first, so spilled entries arrive before
// newer ones, and newer ones wait behind them, never forever. A segment is deleted once all
// its frames are delivered (acknowledged, with RequireAck: send waits for the ack). A
// segment that cannot be read is retried like a failed send. It returns true once the spill
// is empty, false when ctx is cancelled.
func (s *stream) replay(ctx context.Context, bo backoff.BackOff) bool {
	bo.Reset()
	for {
		s.drainToSpill()
		fr, ok, err := s.err.disk.Head()
		if err == nil && !ok {
			return true
		}
		if err == nil && s.sendFrame(ctx, fr.Tag, fr.Entries, fr.N) {
			s.replayed.Add(uint64(fr.N))
			s.err.disk.Pop()
			bo.Reset()
			continue
		}
		wait := bo.NextBackOff()
		if wait == backoff.Stop {
			wait = time.Second
		}
		if !s.spillWhileWaiting(ctx, wait) {
			return false
		}
	}
}

// spillWhileWaiting waits d (false if ctx is cancelled first), moving batches to the spill
// as they are sealed.
func (s *stream) spillWhileWaiting(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case b := <-s.queue:
			s.spillSealed(b)
		case <-s.err.spillKick:
		case <-t.C:
			return true
		case <-ctx.Done():
			return false
		}
	}
}

// drainToSpill moves every queued batch to the spill, without waiting.
func (s *stream) drainToSpill() {
	for {
		select {
		case b := <-s.queue:
			s.spillSealed(b)
		default:
			return
		}
	}
}
