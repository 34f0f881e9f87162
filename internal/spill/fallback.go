package spill

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/fluentcore/fluentcore/internal/wire"
	"github.com/tinylib/msgp/msgp"
)

// Spiller takes encoded err entries that cannot be delivered, so they are never lost
// silently. A nil error means the entries were set aside (the caller counts them as
// spilled); ErrFull and other errors mean they were not (counted as dropped, spill_full or
// spill_failed). Implementations are safe for concurrent use.
type Spiller interface {
	// Append takes n encoded entries: a batch that could not be delivered, or one entry
	// that found no room in the err buffers.
	Append(tag string, entries []byte, n int) error
}

// Chain puts err entries in the durable spill and, when the spill cannot take them, writes
// them to the fallback instead:
//   - the spill is full or failed: the entries still go to the fallback, as the report of
//     what the spill lost (nobody will replay them), and the spill's error is returned, so
//     they are counted as dropped (spill_full, spill_failed) and not as spilled;
//   - the spill is closed (its lock released) or the frame is too large for any receiver:
//     the fallback is where such entries belong, as without a Spill.Dir, and its result is
//     returned (spilled, or spill_failed if the fallback fails too).
type Chain struct {
	Disk     *Dir
	Fallback *JSONWriter
}

// Append implements Spiller.
func (c Chain) Append(tag string, entries []byte, n int) error {
	err := c.Disk.Append(tag, entries, n)
	if err == nil {
		return nil
	}
	ferr := c.Fallback.Append(tag, entries, n)
	if errors.Is(err, ErrClosed) || errors.Is(err, ErrTooLarge) {
		return ferr
	}
	return err
}

// JSONWriter writes one JSON object per entry — {"tag":..,"time":..,"record":{..}} — to a
// writer (Config.Spill.Fallback). Safe for concurrent use; it is the slow path, so one mutex
// is fine. An error is the writer's, or a malformed entry's.
type JSONWriter struct {
	mu   sync.Mutex
	w    io.Writer
	line bytes.Buffer
}

// NewJSONWriter returns a JSONWriter on w.
func NewJSONWriter(w io.Writer) *JSONWriter { return &JSONWriter{w: w} }

// Append implements Spiller: the n entries become n lines, written in one call.
func (s *JSONWriter) Append(tag string, entries []byte, _ int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.write(tag, entries)
}

// write converts concatenated Forward entries to JSON lines and writes them in one call.
func (s *JSONWriter) write(tag string, entries []byte) error {
	s.line.Reset()
	for b := entries; len(b) > 0; {
		var (
			et  wire.EventTime
			err error
		)
		if _, b, err = msgp.ReadArrayHeaderBytes(b); err != nil {
			return fmt.Errorf("fluentcore: spill: %w", err)
		}
		if b, err = msgp.ReadExtensionBytes(b, &et); err != nil {
			return fmt.Errorf("fluentcore: spill: %w", err)
		}
		s.line.WriteString(`{"tag":`)
		s.line.WriteString(strconv.Quote(tag))
		s.line.WriteString(`,"time":"`)
		s.line.WriteString(time.Unix(int64(et.Sec), int64(et.Nsec)).UTC().Format(time.RFC3339Nano))
		s.line.WriteString(`","record":`)
		// UnmarshalAsJSON converts every value in its input, so give it the record alone.
		rest, err := msgp.Skip(b)
		if err != nil {
			return fmt.Errorf("fluentcore: spill: %w", err)
		}
		if _, err = msgp.UnmarshalAsJSON(&s.line, b[:len(b)-len(rest)]); err != nil {
			return fmt.Errorf("fluentcore: spill: %w", err)
		}
		b = rest
		s.line.WriteString("}\n")
	}
	_, err := s.w.Write(s.line.Bytes())
	return err
}
