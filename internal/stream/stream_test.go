package stream

import (
	"testing"
	"time"

	"github.com/fluentcore/fluentcore/internal/testkit"
)

// The degrade policy's observation is timed after the stream's counts are read: a read that
// waits for a shard's lock (its writer off the CPU) counts what was written meanwhile, and
// the step's length must cover it, or a burst that fits is taken for a flood.
func TestObservationIsTimedAfterItsCounts(t *testing.T) {
	clk := testkit.NewManualClock(time.Unix(1_000, 0))
	s := testSettings(defaultBatchBytes, defaultEntryBytes)
	s.Clock = clk
	st := newTestStream(s, defaultBudget, &testPolicy{}, testForwarders(t, "127.0.0.1:1", 1)[0])
	sh := &st.shards.all[0]
	sh.lockForSink() // as a writer holds it
	got := make(chan time.Time)
	go func() { got <- st.Observe().Now }()
	testkit.WaitUntil(t, "the observation waiting for the shard", func() bool { return sh.sinkHolds.Load() == 2 })
	clk.Add(time.Second) // while the observation waits for the lock
	sh.unlockForSink()
	if now := <-got; !now.Equal(time.Unix(1_001, 0)) {
		t.Fatalf("observed at %v; want the time after its counts were read, %v", now, time.Unix(1_001, 0))
	}
}
