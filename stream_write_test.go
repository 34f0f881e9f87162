package fluentcore

import (
	"io"
	"reflect"
	"strconv"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/fluentcore/fluentcore/forwardtest"
	"github.com/fluentcore/fluentcore/internal/msgpenc"
	"github.com/fluentcore/fluentcore/internal/zapenc"
)

// One goroutine's entries reach the receiver in the order they were logged, across many
// batches and flushes, on a stream with several shards.
func TestOneGoroutineEntriesArriveInOrder(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	core := New(Config{Addr: r.Addr(), Transport: TransportConfig{MaxBatchBytes: 4 << 10, FlushInterval: time.Millisecond}})
	defer core.Close()
	if n := len(sinkOf(core).streams[infoStream].shards.all); n < 2 {
		t.Skipf("the info stream has %d shard; the test needs several", n)
	}
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

// scratchBytes is the capacity, in bytes, of each slice an encoder keeps between entries,
// by field path: every slice among its fields, those of the msgpenc types it holds
// included (pointers and interfaces not followed), so that a scratch buffer added to any of
// them is checked too.
func scratchBytes(e *zapenc.Encoder) map[string]int {
	held := map[string]int{}
	var walk func(v reflect.Value, path string)
	walk = func(v reflect.Value, path string) {
		switch v.Kind() {
		case reflect.Struct:
			for i := range v.NumField() {
				walk(v.Field(i), path+"."+v.Type().Field(i).Name)
			}
		case reflect.Slice:
			held[path] = v.Cap() * int(v.Type().Elem().Size())
		}
	}
	walk(reflect.ValueOf(e).Elem(), "msgpEncoder")
	return held
}

// An entry within Transport.MaxEntryBytes can still grow an encoder's scratch far past its own size
// (sorting a reflected map's keys takes tens of bytes per key); once it is written, no
// shard's encoder keeps more than msgpenc.KeptScratch in any scratch buffer.
func TestShardEncodersKeepBoundedScratch(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	core := New(Config{Addr: r.Addr(), Transport: TransportConfig{MaxBatchBytes: 1 << 20, MaxEntryBytes: 1 << 20}, Spill: SpillConfig{Fallback: io.Discard}})
	defer core.Close()
	ints, anys, strs := map[string]int{}, map[string]any{}, map[string]string{}
	for i := range 5000 {
		k := "k" + strconv.Itoa(i)
		ints[k], anys[k], strs[k] = i, i, k
	}
	logger := zap.New(core)
	for _, f := range []zap.Field{zap.Any("ints", ints), zap.Any("anys", anys), zap.Any("strs", strs)} {
		logger.Info("maps", f)
		logger.Error("maps", f)
	}
	if err := core.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.WaitForEntries(6, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	for _, st := range sinkOf(core).streams {
		for i := range st.shards.all {
			sh := &st.shards.all[i]
			sh.lockForSink()
			for name, n := range scratchBytes(sh.enc) {
				if n > msgpenc.KeptScratch {
					t.Errorf("%s stream, shard %d: %s keeps %d bytes, more than %d", st.id, i, name, n, msgpenc.KeptScratch)
				}
			}
			sh.unlockForSink()
		}
	}
}
