package fluentcore

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore/forwardtest"
	"github.com/fluentcore/fluentcore/internal/testkit"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Many goroutines, random levels and sizes, a receiver that stalls and resumes: after Close,
// every entry is accounted for, and the receiver has exactly what was counted delivered.
func TestAccountingIdentityUnderRandomLoad(t *testing.T) {
	r := forwardtest.NewReceiver(t, forwardtest.CountOnly())
	var spilled testkit.Lines
	core := New(fastRetry(Config{
		Addr:      r.Addr(),
		Level:     zapcore.DebugLevel,
		Transport: TransportConfig{MaxBatchBytes: 16 << 10, FlushInterval: 2 * time.Millisecond},
		Info:      InfoConfig{BufferBytes: 128 << 10},
		Err:       ErrConfig{BufferBytes: 64 << 10, MaxWait: 2 * time.Millisecond},
		Timeouts:  TimeoutsConfig{Write: 30 * time.Millisecond},
		Spill:     SpillConfig{Fallback: &spilled},
		Degrade:   DegradeConfig{Hold: 20 * time.Millisecond, DisconnectedAfter: 20 * time.Millisecond},
	}))
	logger := zap.New(core).With(zap.String("svc", "random"))
	sugar := logger.Sugar()
	var logged atomic.Int64
	stop := make(chan struct{})
	var chaos sync.WaitGroup
	chaos.Add(1)
	go func() { // stall and resume as logging crosses thresholds, not on a clock
		defer chaos.Done()
		for _, at := range []int64{20_000, 60_000, 100_000} {
			for logged.Load() < at {
				select {
				case <-stop:
					return
				default:
					runtime.Gosched()
				}
			}
			r.Stall()
			for logged.Load() < at+20_000 {
				select {
				case <-stop:
					r.Resume()
					return
				default:
					runtime.Gosched()
				}
			}
			r.Resume()
		}
	}()
	var wg sync.WaitGroup
	levels := []zapcore.Level{zapcore.DebugLevel, zapcore.InfoLevel, zapcore.WarnLevel, zapcore.ErrorLevel}
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10_000; i++ {
				lvl := levels[rand.IntN(len(levels))]
				if i%2 == 0 {
					logger.Log(lvl, "event", zap.Int("i", i), zap.String("pad", strings.Repeat("x", rand.IntN(300))))
				} else {
					sugar.Logw(lvl, fmt.Sprint("msg-", i%50), "i", i)
				}
				logged.Add(1)
			}
		}()
	}
	wg.Wait()
	close(stop)
	chaos.Wait()
	if err := core.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	st := core.Stats()
	identityHolds(t, st)
	if st.Info.DroppedTotal() == 0 {
		t.Fatalf("the stalls had no effect (drops %v): the test proves nothing", st.Info.Dropped)
	}
	if st.Info.Entries+st.Err.Entries != 16*10_000 {
		t.Fatalf("entries counted %d, logged %d", st.Info.Entries+st.Err.Entries, 16*10_000)
	}
	if int(st.Err.Spilled) != spilled.Records() {
		t.Fatalf("spilled %d, fallback got %d lines", st.Err.Spilled, spilled.Records())
	}
	if err := r.WaitFor(func(s forwardtest.Stats) bool {
		return s.Entries >= int64(st.Info.Delivered+st.Err.Delivered)
	}, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := r.Stats().Entries; got != int64(st.Info.Delivered+st.Err.Delivered) {
		t.Fatalf("receiver has %d entries, core counted %d delivered", got, st.Info.Delivered+st.Err.Delivered)
	}
}
