package fluentcore

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/tinylib/msgp/msgp"
	"go.uber.org/zap/zapcore"
)

// spiller takes err entries that cannot be delivered, so they are never lost silently. The
// default writes JSON lines to Config.ErrFallback; a durable on-disk spill with replay can
// take its place behind the same interface.
type spiller interface {
	// spillEntry takes one entry that found no room in the err buffers.
	spillEntry(tag string, ctx *encodedContext, ent zapcore.Entry, fields []zapcore.Field) error
	// spillBatch takes an encoded batch that could not be delivered before Close.
	spillBatch(tag string, entries []byte) error
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
	s.buf = s.enc.appendEntry(s.buf[:0], ctx, ent, fields)
	return s.write(tag, s.buf)
}

func (s *jsonSpiller) spillBatch(tag string, entries []byte) error {
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
		if b, err = msgp.UnmarshalAsJSON(&s.line, b); err != nil {
			return fmt.Errorf("fluentcore: spill: %w", err)
		}
		s.line.WriteString("}\n")
	}
	_, err := s.w.Write(s.line.Bytes())
	return err
}
