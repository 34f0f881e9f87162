package stream

import (
	"bytes"
	"errors"
	"sync"
	"time"

	"github.com/fluentcore/fluentcore/internal/msgpenc"
	"github.com/fluentcore/fluentcore/internal/spill"
	"github.com/fluentcore/fluentcore/internal/zapenc"
	"go.uber.org/zap/zapcore"
)

// ErrPolicy is the err stream's: no entry is lost silently. A writer that finds no free
// batch waits up to Err.MaxWait (while sends fail, only until the sender has moved the queue
// to the spill; and never past Err.MaxWait from the start of an attempt the sender is stuck
// in); an entry over Transport.MaxEntryBytes is truncated; what still cannot be carried is spilled
// (internal/spill: the durable segments of Spill.Dir, else Spill.Fallback) and counted.
// Batches that have failed for Spill.After go to the spill too, in order, and so do those
// pending while the sender has waited Spill.After for an ack, so that in an outage or a
// stall nothing waits in memory for longer than that. Every write wakes the sender, so err
// entries do not wait for Transport.FlushInterval. It is the err stream's Policy, and holds the
// spill; its carrier (Carry) builds errSpill, which moves there what the stream cannot
// carry. Its Admission methods, Report and SpillEntry are safe for concurrent use (the
// stream's writers and Stats call them); Close once the err stream's senders have stopped.
type ErrPolicy struct {
	maxWait    time.Duration      // Err.MaxWait
	spillAfter time.Duration      // Spill.After
	wake       chan struct{}      // an entry is waiting: the sender seals and sends it at once
	evacuate   chan chan struct{} // move everything undelivered to the spill, then close the channel sent
	spillKick  chan struct{}      // a writer found no free batch while sends fail, or spilled
	spill      spill.Spiller      // where entries go that cannot be delivered
	enc        entryEncoder       // encodes the entries that go to the spill directly
	entryCap   int                // Transport.MaxEntryBytes

	// With Spill.Dir: the durable spill the sender moves batches to and replays from.
	disk *spill.Dir
}

// NewErrPolicy builds the err stream's policy. Without Spill.Dir, or when it cannot be used
// (the error says why), entries that cannot be delivered go to Spill.Fallback.
func NewErrPolicy(s SpillSettings) (*ErrPolicy, error) {
	fallback := spill.NewJSONWriter(s.Fallback)
	p := &ErrPolicy{maxWait: s.MaxWait, spillAfter: s.After, wake: make(chan struct{}, 1),
		evacuate: make(chan chan struct{}), spillKick: make(chan struct{}, 1),
		spill: fallback, enc: entryEncoder{enc: zapenc.New(s.Enc)}, entryCap: s.EntryBytes}
	if s.Dir == "" {
		return p, nil
	}
	disk, err := spill.Open(s.Dir, s.MaxBytes, s.BatchBytes, s.OnSpill)
	if err != nil {
		return p, err
	}
	p.disk = disk
	p.spill = spill.Chain{Disk: disk, Fallback: fallback}
	return p, nil
}

// Written tells the sender an entry is waiting; it never blocks. Err entries do not wait
// for Transport.FlushInterval: the sender seals the open batches as soon as it is free, so entries
// written while it sends are batched together and an error under an info flood arrives in
// milliseconds.
func (p *ErrPolicy) Written() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Freed tells nothing: the err stream admits every entry, and a writer waits for a free
// batch instead (roomWait).
func (*ErrPolicy) Freed(int) {}

// RoomAdmitted is false: no entry is admitted against the room left.
func (*ErrPolicy) RoomAdmitted() bool { return false }

// Reserves is false: nothing is thinned, so no batch is kept from a flood.
func (*ErrPolicy) Reserves() bool { return false }

// KeepsWhole is true for every entry.
func (*ErrPolicy) KeepsWhole(zapcore.Level, uint16, string) bool { return true }

// Wakes is false: every write wakes the sender already (Written).
func (*ErrPolicy) Wakes(float64) bool { return false }

// WakeWith does nothing (see Wakes).
func (*ErrPolicy) WakeWith(uint64) {}

// Report adds the durable spill's size and its damaged segments to st.
func (p *ErrPolicy) Report(st *Stats) {
	if p.disk != nil {
		st.SpillBytes = p.disk.Bytes()
		st.SpillCorruptSegments = p.disk.CorruptSegments()
	}
}

// appendBatch hands a sealed batch's entries to the spill; the error is the spill's.
func (p *ErrPolicy) appendBatch(tag string, entries []byte, n int) error {
	return p.spill.Append(tag, entries, n)
}

// Evacuate asks the err sender to move everything undelivered to the spill, closing
// done once it has; false if stop fires before the sender takes the request.
func (p *ErrPolicy) Evacuate(done chan struct{}, stop <-chan time.Time) bool {
	select {
	case p.evacuate <- done:
		return true
	case <-stop:
		return false
	}
}

// Close releases Spill.Dir, if there is one; later err entries go to Spill.Fallback.
// Safe to call once, after the err stream's senders have stopped.
func (p *ErrPolicy) Close() {
	if p.disk != nil {
		p.disk.Close()
	}
}

// Durable reports whether err entries spill to Spill.Dir (else to Spill.Fallback).
func (p *ErrPolicy) Durable() bool { return p.disk != nil }

// replaying reports whether the durable spill holds frames: then it is the stream's queue.
func (p *ErrPolicy) replaying() bool { return p.disk != nil && !p.disk.Empty() }

// entryEncoder encodes single entries for the spill, one at a time. Safe for concurrent use.
type entryEncoder struct {
	mu  sync.Mutex
	enc *zapenc.Encoder
	buf []byte
}

// errEncodePanic is spillEntry's error when a marshaler panicked while the entry was
// encoded for the spill: counted as encode_error.
var errEncodePanic = errors.New("fluentcore: spill: encoding the entry panicked")

// SpillEntry encodes one err entry that could not be buffered, cut down to Transport.MaxEntryBytes as
// the stream cuts it (zapenc.Encoder.EncodeCapped), and hands it to the spill; the error is the spill's
// (nil: spilled) or errEncodePanic, and cut reports whether it was cut. The encoder's lock
// is not held while the spill works: Append fsyncs, writes Spill.Fallback and may call
// OnEvent. The copy that allows it is the one allocation of this path, which only entries
// the buffers could not take follow.
func (p *ErrPolicy) SpillEntry(tag string, ctx *zapenc.Context, ent *zapcore.Entry, fields []zapcore.Field) (cut bool, err error) {
	e := &p.enc
	e.mu.Lock()
	out, cut := e.enc.EncodeCapped(e.buf[:0], ctx, ent, fields, p.entryCap)
	entry := bytes.Clone(out)
	if cap(out) <= msgpenc.KeptScratch {
		e.buf = out[:0]
	} else {
		e.buf = nil // a rare large entry: do not keep its buffer
	}
	e.enc.Trim()
	e.mu.Unlock()
	if out == nil {
		return false, errEncodePanic
	}
	return cut, p.spill.Append(tag, entry, 1)
}

// kickSpill tells the sender that a writer found no free batch while sends fail, or
// spilled: the sender packs the queued batches (compact), and if that frees none, the
// buffers are full and it moves them to the spill now rather than after Spill.After. It
// never blocks.
func (p *ErrPolicy) kickSpill() {
	select {
	case p.spillKick <- struct{}{}:
	default:
	}
}
