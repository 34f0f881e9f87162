package fluentcore

import (
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore/forwardtest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// The buffers are the budget: after any amount of logging, with the receiver stalled and
// resumed, every stream still has exactly its batches, none grown past the batch size.
func TestBatchBuffersNeverGrowOrMultiply(t *testing.T) {
	r := forwardtest.NewReceiver(t, forwardtest.CountOnly())
	core := New(fastRetry(Config{
		Addr:      r.Addr(),
		Level:     zapcore.DebugLevel,
		Transport: TransportConfig{MaxBatchBytes: 8 << 10, MaxEntryBytes: 6 << 10, FlushInterval: 5 * time.Millisecond, RetryMax: 10 * time.Millisecond},
		Info:      InfoConfig{BufferBytes: 64 << 10},
		Err:       ErrConfig{BufferBytes: 64 << 10},
		Timeouts:  TimeoutsConfig{Write: 50 * time.Millisecond, Ack: 50 * time.Millisecond},
		Spill:     SpillConfig{Fallback: io.Discard},
	}))
	logger := zap.New(core)
	for i := 0; i < 20_000; i++ {
		if i == 5000 {
			r.Stall()
		}
		if i == 15_000 {
			r.Resume()
		}
		// Entry sizes from a few bytes to over Transport.MaxEntryBytes, so batches overflow at every
		// boundary and some entries are refused.
		pad := strings.Repeat("p", rand.IntN(7<<10))
		if i%7 == 0 {
			logger.Error("e", zap.String("pad", pad))
		} else {
			logger.Info("i", zap.String("pad", pad))
		}
	}
	if err := core.Close(); err != nil {
		t.Fatal(err)
	}
	const batch = 8 << 10
	for _, st := range sinkOf(core).streams {
		// Every batch is empty, back on the free list or a shard's open batch: the room the
		// stream reads is then every batch's, each counted once.
		nb := len(st.Ring.Batches())
		for _, b := range st.Ring.Batches() {
			if cap(b.Buf) != batch || len(b.Buf) != 0 || b.N != 0 {
				t.Errorf("%s: batch with cap %d len %d n %d, want cap %d and empty", st.ID, cap(b.Buf), len(b.Buf), b.N, batch)
			}
		}
		if u, want := st.Usage(), int64(nb*(batch-batch/16)); u.Buffered != 0 || u.Room != want {
			t.Errorf("%s: %d bytes buffered and room for %d; want none and every batch's, %d", st.ID, u.Buffered, u.Room, want)
		}
	}
	st := core.Stats()
	if st.Info.Dropped["too_large"] == 0 {
		t.Error("no info entry was refused as too large")
	}
	identityHolds(t, st)
}

// BufferedBytes counts what is buffered, open batches included: entries in batches that
// Transport.FlushInterval has not sealed yet are memory in use, and an operator's buffer panel must
// show them.
func TestBufferedBytesCountsOpenBatches(t *testing.T) {
	r := forwardtest.NewReceiver(t, forwardtest.CountOnly())
	core := New(Config{Addr: r.Addr(), Transport: TransportConfig{FlushInterval: time.Hour}})
	defer core.Close()
	logger := zap.New(core)
	pad := strings.Repeat("p", 400)
	for i := range 200 {
		logger.Info("open", zap.Int("i", i), zap.String("pad", pad))
	}
	st := core.Stats().Info
	if st.BufferedBytes < 200*int64(len(pad)) || st.Delivered != 0 {
		t.Fatalf("buffered %d bytes after 200 entries of over %d bytes each (delivered %d)", st.BufferedBytes, len(pad), st.Delivered)
	}
	if err := core.Sync(); err != nil {
		t.Fatal(err)
	}
	if st := core.Stats().Info; st.BufferedBytes != 0 || st.Delivered != 200 {
		t.Fatalf("after Sync: buffered %d, delivered %d", st.BufferedBytes, st.Delivered)
	}
}
