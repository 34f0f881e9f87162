package stream

import (
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore/internal/outcome"
	"github.com/fluentcore/fluentcore/internal/tagtable"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// The tags' shards: each logger tag writes into a shard of its own while there are enough,
// at least half the shards once the core has a tag, never one the stream's own tag picks
// then; open batches stay at most half the batches, and a core without tags shards as
// before.
func TestLoggerTagsHaveShardsOfTheirOwn(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, procs := range []int{1, 2, 8, 64} {
		runtime.GOMAXPROCS(procs)
		for _, budget := range []int{8 << 20, 4 << 20, 1 << 20, 512 << 10} {
			s := testSettings(defaultBatchBytes, defaultEntryBytes)
			tags := newTestTags()
			nb := max(budget/s.BatchBytes, 2)
			st := newShards(nb, tags, s.Enc)
			n := len(st.all)
			if st.randShards != min(2*procs, nb/2) || n > max(st.randShards, nb/2) {
				t.Errorf("procs %d budget %d: %d shards, %d own, for %d batches", procs, budget, n, st.randShards, nb)
			}
			if st.own() != st.randShards {
				t.Errorf("procs %d budget %d: without tags, writers pick among %d shards, not %d", procs, budget, st.own(), st.randShards)
			}
			tags.Lookup("audit")
			own, tagged := st.own(), n-st.tagShard
			if n > 1 && (own < 1 || tagged < n/2 || own > st.tagShard) {
				t.Errorf("procs %d budget %d: with tags, %d own shards and %d of %d the tags'", procs, budget, own, tagged, n)
			}
			seen := map[int]uint16{}
			for idx := uint16(1); idx <= 200; idx++ {
				h := st.home(idx)
				if h < st.tagShard && tagged >= 2 || h >= n {
					t.Fatalf("home %d of tag %d; the tags have %d to %d", h, idx, st.tagShard, n-1)
				}
				if o, ok := seen[h]; ok && (int(idx) <= tagged && tagged >= 2 || int(idx) <= n && tagged < 2) {
					t.Errorf("procs %d budget %d: tags %d and %d share shard %d", procs, budget, o, idx, h)
				}
				seen[h] = idx
			}
		}
	}
}

// A full stream whose batches are all queued (a receiver gone) holds no open batch, and a
// writer that finds no free batch then drops its entry without touching another shard,
// even one whose lock is held and a policy that owes its entries the others' room:
// shards.opened, which every change of a shard's batch keeps, says there is none to try.
func TestAFullStreamTouchesNoOtherShard(t *testing.T) {
	s := testSettings(4<<10, defaultEntryBytes)
	// Every entry admitted against the room left, as the adaptive shedder's are while it
	// counts keys: a writer that finds no free batch owes it the other shards' open batches.
	st := newTestStream(s, 64<<10, &testPolicy{roomAdmitted: true}, testForwarders(t, "127.0.0.1:24224", 1)[0])
	t.Cleanup(st.Senders[0].fwd.Close)
	if len(st.shards.all) < 2 {
		t.Fatalf("%d shards; the test needs two", len(st.shards.all))
	}
	queueFull := func() uint64 { return st.Stats().Dropped[outcome.QueueFull.String()] }
	log := func() {
		ent := zapcore.Entry{Level: zapcore.InfoLevel, Message: "flood", Time: time.Unix(1, 0)}
		st.Write(nil, tagtable.Ref{}, &ent, []zapcore.Field{zap.String("pad", strings.Repeat("x", 100))})
	}
	openBatches := func() (n int32) {
		for i := range st.shards.all {
			sh := &st.shards.all[i]
			sh.mu.Lock()
			if sh.cur != nil {
				n++
			}
			sh.mu.Unlock()
		}
		return n
	}
	// No sender runs: nothing leaves the buffer. Writers from several goroutines spread
	// over the shards until the buffer is full.
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for i := 0; queueFull() == 0 && i < 100000; i++ {
				log()
			}
		})
	}
	wg.Wait()
	if queueFull() == 0 {
		t.Fatal("the flood never filled the buffer")
	}
	if got, want := st.shards.opened.Load(), openBatches(); got != want {
		t.Fatalf("shards.opened %d, but %d shards hold an open batch", got, want)
	}
	st.Flush()
	if got := st.shards.opened.Load(); got != 0 || openBatches() != 0 {
		t.Fatalf("after a flush of a full stream, shards.opened %d and %d open batches; want none", got, openBatches())
	}
	before := queueFull() // stats reads every shard: not while the test holds them
	st.shards.calm()      // the writer takes shard 0, free
	for i := 1; i < len(st.shards.all); i++ {
		st.shards.all[i].mu.Lock()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		log()
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Error("a writer to a full stream waited for another shard's lock")
	}
	for i := 1; i < len(st.shards.all); i++ {
		st.shards.all[i].mu.Unlock()
	}
	<-done
	if got := queueFull() - before; got != 1 {
		t.Errorf("%d entries queue_full, want the 1 written to the full stream", got)
	}
}
