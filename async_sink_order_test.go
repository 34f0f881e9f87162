package fluentcore

import (
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/fluentcore/fluentcore/forwardtest"
)

// One goroutine's entries reach the receiver in the order they were logged, across many
// batches and flushes, on a stream with several shards (with 4 KiB batches the default
// budget makes at least two, whatever GOMAXPROCS).
func TestOneGoroutineEntriesArriveInOrder(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	core := New(Config{Addr: r.Addr(), Transport: TransportConfig{MaxBatchBytes: 4 << 10, FlushInterval: time.Millisecond}})
	defer core.Close()
	logger := zap.New(core)
	const n = 3000
	for i := range n {
		if i%100 == 0 {
			time.Sleep(time.Millisecond) // let flush ticks seal batches part full too
		}
		logger.Info("in order", zap.Int("i", i))
	}
	if err := core.Sync(); err != nil {
		t.Fatal(err)
	}
	got, err := r.WaitForEntries(n, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for k, e := range got {
		if i, _ := e.Record["i"].(int64); i != int64(k) {
			t.Fatalf("entry %d of the receiver is entry %d of the logger", k, i)
		}
	}
}
