package fluentcore

import (
	"context"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore/forwardtest"
	"github.com/fluentcore/fluentcore/internal/testkit"
	"go.uber.org/zap"
)

// The sender allocates nothing per frame once connected. An allocating goroutine is made to
// assist the garbage collector, and under a flood of allocating loggers the sender was parked
// in those assists for most of the time, so delivery collapsed (bench: cmd/throughput -g 1024).
func TestSenderAllocatesNothingPerFrame(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer ln.Close()
	wg.Add(1)
	go func() {
		defer wg.Done()
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = io.Copy(io.Discard, c) // until the client closes
	}()
	s := settingsFor(Config{Addr: ln.Addr().String()})
	// A stream whose sender is this test: deliver is what run calls for the batches it takes.
	st := newTestStream(s, 1<<20, newInfoPolicy(s.degrade, s.clock, nil, nil), newForwarder(s.connFor(infoStream)))
	defer st.senders[0].fwd.Close()
	entry := []byte{0x92, 0xd7, 0x00, 0, 0, 0, 1, 0, 0, 0, 0, 0x81, 0xa1, 'k', 0xa1, 'v'}
	frame := func() {
		b := st.ring.Take(nil)
		b.Buf = append(b.Buf, entry...)
		b.N = 1
		st.ring.Seal(b)
		b = <-st.ring.Queue()
		snd := st.senders[0]
		snd.out = append(snd.out, b)
		if !snd.deliver(context.Background()) {
			t.Fatal("not delivered")
		}
	}
	frame() // connects
	if st.sends.sentBatches.Load() != 1 {
		t.Fatalf("sent %d batches", st.sends.sentBatches.Load())
	}
	if a := steadyAllocs(200, frame); a != 0 {
		t.Fatalf("the sender allocates %.1f times per frame", a)
	}
}

// A receiver down for a while, then back: every err entry logged meanwhile is delivered,
// each once, and none went to the fallback while the budget had room.
func TestOutageThenRecoveryDeliversEverythingOnce(t *testing.T) {
	addr := downAddr(t)
	var fb testkit.Lines
	core := New(fastRetry(Config{
		Addr:      addr,
		Spill:     SpillConfig{Fallback: &fb},
		Transport: TransportConfig{MaxBatchBytes: 16 << 10, FlushInterval: 2 * time.Millisecond},
		Err:       ErrConfig{BufferBytes: 256 << 10},
	}))
	defer core.Close()
	logger := zap.New(core)
	pad := strings.Repeat("x", 600)
	const n = 300 // about 195 KB: room to spare in 256 KiB
	for i := range n {
		logger.Error("outage", zap.Int("i", i), zap.String("pad", pad))
		time.Sleep(200 * time.Microsecond) // flush ticks fall between the entries
	}
	r := forwardtest.NewReceiver(t, forwardtest.WithAddr(addr))
	if err := core.Sync(); err != nil {
		t.Fatal(err)
	}
	got, err := r.WaitForEntries(n, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]int{}
	for _, e := range got {
		seen[e.Record["i"].(int64)]++
	}
	for i := range int64(n) {
		if seen[i] != 1 {
			t.Fatalf("entry %d arrived %d times", i, seen[i])
		}
	}
	if st := core.Stats().Err; fb.Records() != 0 || st.Spilled != 0 || st.Delivered != n {
		t.Fatalf("fallback %d lines, stats %+v", fb.Records(), st)
	}
}

// The err sender reads Spill.After's time from the injected clock (settings.clock), not from
// time.Now: with Spill.After an hour and the receiver down, a failed err batch stays in memory
// however many attempts fail while the clock stands still, and goes to Spill.Fallback (spillDue)
// as soon as the clock is moved past Spill.After, with no hour of real time passing.
func TestSpillAfterIsReadOnTheInjectedClock(t *testing.T) {
	clk := &manualClock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	fb := new(fallbackLog)
	core := NewWithClock(Config{
		Addr:      downAddr(t),
		Spill:     SpillConfig{Fallback: fb, After: time.Hour},
		Timeouts:  TimeoutsConfig{Close: 100 * time.Millisecond},
		Transport: TransportConfig{FlushInterval: 10 * time.Millisecond, RetryMin: time.Millisecond, RetryMax: 5 * time.Millisecond},
	}, clk)
	defer core.Close()
	zap.New(core).Error("down", zap.Int64("id", 1))

	waitUntil(t, "five failed sends", func() bool { return core.Stats().Err.SendErrors >= 5 })
	if st := core.Stats().Err; st.Spilled != 0 || fb.count() != 0 {
		t.Fatalf("spilled %d (Spill.Fallback %d) with the clock still: Spill.After was not read on it", st.Spilled, fb.count())
	}

	clk.add(time.Hour)
	waitUntil(t, "the entry in Spill.Fallback once the clock passed Spill.After", func() bool { return fb.count() == 1 })
	if st := core.Stats().Err; st.Spilled != 1 || st.Delivered != 0 {
		t.Errorf("spilled %d, delivered %d; want 1 and 0", st.Spilled, st.Delivered)
	}
}

// manualClock is a zapcore.Clock whose time moves only when the test says (add). Its tickers
// are real ones: the sink Resets them, which only a ticker of time.NewTicker allows.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func (c *manualClock) NewTicker(d time.Duration) *time.Ticker { return time.NewTicker(d) }
