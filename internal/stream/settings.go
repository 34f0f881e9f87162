package stream

import (
	"io"
	"time"

	"github.com/fluentcore/fluentcore/internal/spill"
	"github.com/fluentcore/fluentcore/internal/zapenc"
	"go.uber.org/zap/zapcore"
)

// Settings is what a stream needs besides its tag, budget, policy and forwarders: the
// size of its batches and entries, and how entries are encoded.
type Settings struct {
	Clock                  zapcore.Clock
	Enc                    *zapenc.Config
	BatchBytes, EntryBytes int
	FlushInterval          time.Duration // Transport.FlushInterval: how long an entry may wait in a batch, for Stats
}

// SpillSettings is what the err stream's policy needs: how long a writer waits for room,
// when and where failed batches spill, and whom to tell.
type SpillSettings struct {
	Clock      zapcore.Clock
	Enc        *zapenc.Config // the spill's writers encode entries directly
	BatchBytes int            // the spill's frames are batches
	EntryBytes int            // Transport.MaxEntryBytes: what it takes of an entry is cut as the stream cuts it
	MaxWait    time.Duration  // Err.MaxWait
	After      time.Duration  // Spill.After
	Dir        string         // Spill.Dir; "" for none
	MaxBytes   int64          // Spill.MaxBytes
	Fallback   io.Writer
	OnSpill    spill.Reporter // told of the durable spill's troubles; nil for none
}
