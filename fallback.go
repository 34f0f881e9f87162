package fluentcore

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/tinylib/msgp/msgp"
	"go.uber.org/zap/zapcore"
)

// spiller takes err entries that cannot be delivered, so they are never lost silently.
// Without Config.SpillDir it is a jsonSpiller (JSON lines to Config.ErrFallback); with it, a
// spillChain: the durable segment files of spill.go first, ErrFallback as the last resort.
// A nil error means the entries were set aside (counted as spilled); errSpillFull and
// other errors mean they were not (counted as dropped, spill_full or spill_failed).
type spiller interface {
	// spillEntry takes one entry that found no room in the err buffers (or was too large).
	spillEntry(tag string, ctx *encodedContext, ent zapcore.Entry, fields []zapcore.Field) error
	// spillBatch takes an encoded batch of n entries that could not be delivered.
	spillBatch(tag string, entries []byte, n int) error
}

// spillChain puts err entries in the durable spill and, when the spill cannot take them,
// writes them to ErrFallback instead:
//   - the spill is full or failed: the entries still go to ErrFallback, as the report of
//     what the spill lost (nobody will replay them), and the spill's error is returned, so
//     they are counted as dropped (spill_full, spill_failed) and not as spilled;
//   - the core is closed (its spill released) or the entry is too large for any frame:
//     ErrFallback is where such entries belong, as without a SpillDir, and its result is
//     returned (spilled, or spill_failed if ErrFallback fails too).
type spillChain struct {
	disk     *diskSpill
	fallback *jsonSpiller
}

func (c spillChain) spillEntry(tag string, ctx *encodedContext, ent zapcore.Entry, fields []zapcore.Field) error {
	err := c.disk.spillEntry(tag, ctx, ent, fields)
	if err == nil || errors.Is(err, errEncode) {
		return err
	}
	ferr := c.fallback.spillEntry(tag, ctx, ent, fields)
	if errors.Is(err, errSpillClosed) || errors.Is(err, errSpillTooLarge) {
		return ferr
	}
	return err
}

func (c spillChain) spillBatch(tag string, entries []byte, n int) error {
	err := c.disk.spillBatch(tag, entries, n)
	if err == nil {
		return nil
	}
	ferr := c.fallback.spillBatch(tag, entries, n)
	if errors.Is(err, errSpillClosed) || errors.Is(err, errSpillTooLarge) {
		return ferr
	}
	return err
}

// jsonSpiller writes one JSON object per entry — {"tag":..,"time":..,"record":{..}} — to a
// writer. Safe for concurrent use; it is the slow path, so one mutex is fine.
type jsonSpiller struct {
	mu   sync.Mutex
	w    io.Writer
	enc  *msgpEncoder
	buf  []byte
	line bytes.Buffer
}

func newJSONSpiller(w io.Writer, cfg *encoderConfig) *jsonSpiller {
	return &jsonSpiller{w: w, enc: newMsgpEncoder(cfg)}
}

func (s *jsonSpiller) spillEntry(tag string, ctx *encodedContext, ent zapcore.Entry, fields []zapcore.Field) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	out, ok := encodeSafely(s.enc, s.buf[:0], ctx, ent, fields)
	s.buf = out
	if !ok {
		return errEncode
	}
	return s.write(tag, s.buf)
}

func (s *jsonSpiller) spillBatch(tag string, entries []byte, _ int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.write(tag, entries)
}

// write converts concatenated Forward entries to JSON lines and writes them in one call.
func (s *jsonSpiller) write(tag string, entries []byte) error {
	s.line.Reset()
	for b := entries; len(b) > 0; {
		var (
			et  eventTime
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
