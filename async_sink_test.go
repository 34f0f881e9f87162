package fluentcore

import (
	"strings"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore/forwardtest"
	"github.com/fluentcore/fluentcore/internal/testkit"
	"go.uber.org/zap"
)

// After Close, info entries are counted as closed and err entries go to the fallback.
func TestWritesAfterClose(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	var fb testkit.Lines
	core := New(Config{Addr: r.Addr(), Spill: SpillConfig{Fallback: &fb}})
	if err := core.Close(); err != nil {
		t.Fatal(err)
	}
	logger := zap.New(core)
	logger.Info("late")
	logger.Error("late error")
	st := core.Stats()
	if st.Info.Dropped["closed"] != 1 || st.Err.Spilled != 1 || fb.Records() != 1 {
		t.Fatalf("info closed=%d err spilled=%d fallback lines=%d", st.Info.Dropped["closed"], st.Err.Spilled, fb.Records())
	}
	identityHolds(t, st)
}

// The degrade policy's entry size is that of the entries delivered, not of the bytes sent
// over the entries delivered: with acks, frames written and still waiting for theirs
// counted against fewer entries, and an entry looked several times its size (the room and
// the margin, in entries, then looked that much smaller).
func TestObservedEntrySizeIsTheDeliveredEntries(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	core := New(Config{Addr: r.Addr(), Info: InfoConfig{Acks: AcksOn}, Transport: TransportConfig{MaxBatchBytes: 16 << 10, FlushInterval: time.Hour}})
	defer core.Close()
	logger := zap.New(core)
	logger.Info("connected", zap.String("pad", strings.Repeat("p", 200)))
	if err := core.Sync(); err != nil {
		t.Fatal(err)
	}
	r.Stall()
	r.Allow(1) // one more frame acked, the others written and waiting
	st := core.sink.streams[infoStream]
	for i := 0; st.Stats().SentBatches < 5; i++ {
		if i == 100_000 {
			t.Fatalf("%d frames written after %d entries", st.Stats().SentBatches, i)
		}
		logger.Info("sized", zap.String("pad", strings.Repeat("p", 200)))
	}
	waitUntil(t, "a frame delivered", func() bool { return st.Counts.Delivered.Load() > 1 })
	entry := float64(st.Counts.DeliveredBytes.Load()) / float64(st.Counts.Delivered.Load())
	if entry < 200 || entry > 300 {
		t.Fatalf("a delivered entry is %.0f bytes; want about 250", entry)
	}
	if got := core.sink.infoObservation().EntryBytes; got != entry {
		t.Errorf("the observation's entry is %.0f bytes; the entries delivered are %.0f each", got, entry)
	}
	r.Resume()
}
