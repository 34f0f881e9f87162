package fluentcore_test

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore"
	"github.com/fluentcore/fluentcore/forwardtest"
	"github.com/fluentcore/fluentcore/internal/testkit"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// manyFields is an ObjectMarshaler with n int fields, "k0000000" upwards.
type manyFields int

func (n manyFields) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	var key [8]byte
	for i := range int(n) {
		enc.AddInt(fieldKey(&key, i), i)
	}
	return nil
}

// fieldKey writes "k" and i in 7 digits into key and returns it as a string (allocated:
// only the test's huge marshalers use it).
func fieldKey(key *[8]byte, i int) string {
	key[0] = 'k'
	for d := 7; d >= 1; d-- {
		key[d] = byte('0' + i%10)
		i /= 10
	}
	return string(key[:])
}

// countingWriter counts what is written to it and keeps none of it.
type countingWriter struct{ n atomic.Int64 }

func (w *countingWriter) Write(p []byte) (int, error) { w.n.Add(int64(len(p))); return len(p), nil }

// One entry far past Transport.MaxEntryBytes — a million keys, as a reflected map or as an
// ObjectMarshaler's fields — leaves nothing behind: after it, and a collection, the live
// heap is within the core's buffer budget and 1 MiB of what it was before the core. The
// info entry is dropped (too_large); the err entry is delivered cut to Transport.MaxEntryBytes and
// marked, not spilled.
func TestLargeEntryLeavesNoScratchBehind(t *testing.T) {
	const budget = 2 << 20 // info + err
	huge := make(map[string]int, 1_000_000)
	var key [8]byte
	for i := range 1_000_000 {
		huge[fieldKey(&key, i)] = i
	}
	for _, tc := range []struct {
		name  string
		field zap.Field
	}{
		{"reflected map", zap.Any("huge", huge)},
		{"object marshaler", zap.Object("huge", manyFields(1_000_000))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := forwardtest.NewReceiver(t)
			var fallback countingWriter
			before := testkit.LiveHeap()
			core := newTestCore(t, r.Addr(), nil, func(c *fluentcore.Config) {
				c.Info.BufferBytes, c.Err.BufferBytes = budget/2, budget/2
				c.Transport.MaxBatchBytes = 64 << 10
				c.Spill.Fallback = &fallback
			})
			logger := zap.New(core)
			logger.Info("huge info", tc.field)
			logger.Error("huge error", tc.field, zap.String("after", "x"))
			logger.Info("small", zap.Int("n", 1))
			if err := core.Sync(); err != nil {
				t.Fatal(err)
			}
			// The records decoded here are the test's, not the core's: checked in a scope of
			// their own, and the receiver let go of them before the heap is read.
			func() {
				got, err := r.WaitForEntries(2, 5*time.Second)
				if err != nil {
					t.Error(err) // and on, to the heap
				}
				var errRec map[string]any
				for _, e := range got {
					switch e.Record["msg"] {
					case "huge info":
						t.Error("the huge info entry was delivered")
					case "huge error":
						errRec = e.Record
					}
				}
				if errRec == nil {
					t.Errorf("the huge err entry was not delivered (%d bytes to the fallback)", fallback.n.Load())
				} else if errRec["msgTruncated"] != true || errRec["level"] != "error" {
					t.Errorf("err entry not marked as cut: msgTruncated=%v level=%v", errRec["msgTruncated"], errRec["level"])
				}
				if m, ok := errRec["huge"].(map[string]any); ok {
					// What is kept of the map is its first keys, in order.
					for i := range len(m) {
						if m[fieldKey(&key, i)] != int64(i) {
							t.Fatalf("the cut map holds %d keys but not %q", len(m), fieldKey(&key, i))
						}
					}
				}
				if b := r.Stats().Bytes; b > 2*fluentcore.DefaultMaxEntryBytes {
					t.Errorf("receiver got %d bytes; the err entry is at most %d", b, fluentcore.DefaultMaxEntryBytes)
				}
				st := core.Stats()
				if st.Info.Dropped["too_large"] != 1 {
					t.Errorf("info too_large = %d, want 1", st.Info.Dropped["too_large"])
				}
				if st.Err.Truncated != 1 || st.Err.Spilled != 0 || fallback.n.Load() != 0 {
					t.Errorf("err: truncated %d, spilled %d, %d bytes to the fallback; want 1, 0, 0",
						st.Err.Truncated, st.Err.Spilled, fallback.n.Load())
				}
			}()
			r.Reset()
			growth := int64(testkit.LiveHeap()) - int64(before)
			t.Logf("live heap grew by %.2f MiB", float64(growth)/(1<<20))
			if growth > budget+1<<20 {
				t.Errorf("live heap grew by %.2f MiB after one huge entry per stream; budget %d MiB + 1 MiB",
					float64(growth)/(1<<20), budget>>20)
			}
			runtime.KeepAlive(huge)
		})
	}
}

// blockingFields is an ObjectMarshaler with n string fields that, once it has written
// blockAt of them (well past Transport.MaxEntryBytes), says so on passed and waits for release, or
// for a deadline that only a caller held behind it lets pass.
type blockingFields struct {
	n, blockAt int
	once       *sync.Once
	passed     chan struct{}
	release    chan struct{}
	timedOut   *atomic.Bool
}

func (b blockingFields) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	var key [8]byte
	for i := range b.n {
		enc.AddString(fieldKey(&key, i), "v")
		if i == b.blockAt {
			b.once.Do(func() { close(b.passed) })
			select {
			case <-b.release:
			case <-time.After(5 * time.Second):
				b.timedOut.Store(true)
			}
		}
	}
	return nil
}

// While one goroutine's entry is being encoded past Transport.MaxEntryBytes, other goroutines' small
// calls on the same stream go through: the huge entry's marshaler waits until they have
// all returned, and only a deadline would end its wait if they were held behind it.
func TestLargeEntryDoesNotHoldOtherCallsBack(t *testing.T) {
	for _, level := range []zapcore.Level{zapcore.InfoLevel, zapcore.ErrorLevel} {
		t.Run(level.String(), func(t *testing.T) {
			r := forwardtest.NewReceiver(t)
			core := newTestCore(t, r.Addr(), nil, func(c *fluentcore.Config) {
				c.Transport.MaxEntryBytes = 4096
				c.Transport.MaxBatchBytes = 16 << 10
				c.Info.BufferBytes, c.Err.BufferBytes = 1<<20, 1<<20
				c.Spill.Fallback = new(countingWriter)
			})
			logger := zap.New(core)
			m := blockingFields{n: 50_000, blockAt: 20_000, once: new(sync.Once),
				passed: make(chan struct{}), release: make(chan struct{}), timedOut: new(atomic.Bool)}
			done := make(chan struct{})
			go func() {
				defer close(done)
				logger.Log(level, "huge", zap.Object("huge", m))
			}()
			<-m.passed
			const small = 200
			for i := range small {
				logger.Log(level, "small", zap.Int("i", i))
			}
			close(m.release)
			<-done
			if m.timedOut.Load() {
				t.Fatal("small calls were held behind the huge entry until its marshaler gave up waiting")
			}
			if _, err := r.WaitForEntries(small, 5*time.Second); err != nil {
				t.Fatal(err)
			}
		})
	}
}
