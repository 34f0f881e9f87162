package fluentcore

import (
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore/forwardtest"
	"github.com/fluentcore/fluentcore/internal/outcome"
	"github.com/fluentcore/fluentcore/internal/ring"
	"github.com/fluentcore/fluentcore/internal/tagtable"
	"github.com/fluentcore/fluentcore/internal/testkit"
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
	for _, st := range sinkOf(core).streams {
		// Every batch is back on the free list or is a shard's (empty) open batch.
		var all []*ring.Batch
		for b := st.ring.Take(nil); b != nil; b = st.ring.Take(nil) {
			all = append(all, b)
		}
		for i := range st.shards.all {
			if b := st.shards.all[i].cur; b != nil {
				all = append(all, b)
			}
		}
		if nb := len(st.ring.Batches()); len(all) != nb {
			t.Errorf("%s: found %d of %d batches", st.id, len(all), nb)
		}
		for _, b := range all {
			if cap(b.Buf) != 8<<10 || len(b.Buf) != 0 || b.N != 0 {
				t.Errorf("%s: batch with cap %d len %d n %d, want cap %d and empty", st.id, cap(b.Buf), len(b.Buf), b.N, 8<<10)
			}
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

// usage reads each shard's open batch with its counts, and the free list after the shards,
// so that what it reports while writers go on never promises room that is gone: the degrade
// policy's allowance is the room less the entries taken after the read. Here the reader
// waits for shard 1's lock while one writer appends to shard 0, read before, and another
// takes a free batch into the last shard, read after. With the free list read first, that
// batch was counted twice; with the counts read after the shards, the entry in shard 0 was
// counted as taken but its bytes still as room.
func TestUsageNeverPromisesRoomThatWritersTookWhileItReads(t *testing.T) {
	st := usageStream(t)
	last := len(st.shards.all) - 1
	writeIn := func(i int) { // as a writer whose shards.lock picked shard i
		ent := zapcore.Entry{Level: zapcore.InfoLevel, Message: "m", Time: time.Unix(1, 0)}
		st.shards.all[i].mu.Lock()
		st.writeIn(i, nil, tagtable.Ref{}, &ent, []zapcore.Field{zap.String("pad", strings.Repeat("p", 100))})
	}
	writeIn(0) // shard 0 has an open batch
	u := readUsageWhile(t, st, func() {
		writeIn(0)    // into a shard usage has read
		writeIn(last) // a free batch into a shard it has not
	})
	after := st.usage() // nothing moves now
	if after.held != 3 || after.buffered%3 != 0 {
		t.Fatalf("after: %d entries held in %d bytes; want 3 of one size", after.held, after.buffered)
	}
	entry := after.buffered / 3
	if promised := u.room - int64(after.taken-u.taken)*entry; promised > after.room {
		t.Fatalf("usage read %d bytes of room and %d entries taken; with the %d entries taken since, that promises %d bytes, but %d are left",
			u.room, u.taken, after.taken-u.taken, promised, after.room)
	}
}

// The same for a batch that goes the other way while usage reads: an empty reserved batch
// given back from shard 0, read before, to the free list, read after, is not counted twice.
func TestUsageNeverCountsAGivenBackBatchTwice(t *testing.T) {
	st := usageStream(t)
	sh := &st.shards.all[0]
	st.shards.open(sh, st.ring.Take(nil)) // a reserve taken for an entry that was then dropped
	st.reserve.hold(sh.cur)
	u := readUsageWhile(t, st, func() {
		sh.mu.Lock()
		st.giveBackEmptyReserve(sh)
		sh.mu.Unlock()
	})
	if after := st.usage(); u.room > after.room {
		t.Fatalf("usage read %d bytes of room while the reserve went back; %d are there", u.room, after.room)
	}
}

// Nor does usage hide room that is there: a batch a writer takes from the free list into a
// shard usage has read already is no longer on the free list when usage reads it, and was
// not in the shard when usage read that. Counted nowhere, its room went missing while the
// entries written into it counted as taken since the read, both at once: the allowance came
// out short by a batch and more.
func TestUsageNeverHidesABatchTakenIntoAShardAlreadyRead(t *testing.T) {
	st := usageStream(t)
	ent := zapcore.Entry{Level: zapcore.InfoLevel, Message: "m", Time: time.Unix(1, 0)}
	fields := []zapcore.Field{zap.String("pad", strings.Repeat("p", 100))}
	u := readUsageWhile(t, st, func() {
		st.shards.all[0].mu.Lock() // shard 0, read before, had no batch: it takes a free one
		st.writeIn(0, nil, tagtable.Ref{}, &ent, fields)
	})
	after := st.usage() // nothing moves now
	if after.held != 1 {
		t.Fatalf("after: %d entries held; want 1", after.held)
	}
	entry := after.buffered
	if seen := u.room - int64(after.taken-u.taken)*entry; seen < after.room {
		t.Fatalf("usage read %d bytes of room and %d entries taken; less the %d bytes taken since, that is %d bytes, but %d are left",
			u.room, u.taken, int64(after.taken-u.taken)*entry, seen, after.room)
	}
}

// usageStream is an info stream of 16 batches of 4 KiB, with no sender running, for the
// usage tests.
func usageStream(t *testing.T) *stream {
	s := settingsFor(Config{Transport: TransportConfig{MaxBatchBytes: 4 << 10}, Info: InfoConfig{BufferBytes: 64 << 10}})
	st := newTestStream(s, s.infoBufferBytes, newInfoPolicy(s.degrade, s.clock, nil, nil), newForwarder(s.connFor(infoStream)))
	t.Cleanup(st.senders[0].fwd.Close)
	if len(st.shards.all) < 3 {
		t.Fatalf("%d shards; the usage tests need three", len(st.shards.all))
	}
	return st
}

// readUsageWhile runs usage while shard 1 is held, as a writer holds it, runs move once
// usage has read shard 0 and waits for shard 1, then lets it go on, and returns what it read.
func readUsageWhile(t *testing.T, st *stream, move func()) streamUsage {
	held := &st.shards.all[1]
	held.mu.Lock()
	read := make(chan streamUsage)
	go func() { read <- st.usage() }()
	testkit.WaitUntil(t, "usage waits for shard 1", func() bool { return held.sinkHolds.Load() > 0 })
	move()
	held.mu.Unlock()
	select {
	case u := <-read:
		return u
	case <-time.After(10 * time.Second):
		t.Fatal("usage did not return")
		return streamUsage{}
	}
}

// reservingPolicy is the info policy reserving as the adaptive shedder does when n > 0, and
// keeping every message but "flood" whole.
type reservingPolicy struct {
	*infoPolicy
	n int
}

func (p reservingPolicy) reserves() bool                                      { return p.n > 0 }
func (reservingPolicy) keepsWhole(_ zapcore.Level, _ uint16, msg string) bool { return msg != "flood" }

// A flood the policy does not keep whole fills the buffer up to the reserved batch, and no
// further: a key kept whole still finds room, however the flood's batches were sealed, and
// the flood is not written into the batch it opened. Without the reserve, the same
// entries are queue_full.
func TestReservedBatchKeepsRoomForWholeKeys(t *testing.T) {
	for _, n := range []int{1, 0} {
		s := settingsFor(Config{Transport: TransportConfig{MaxBatchBytes: 4 << 10}, Info: InfoConfig{BufferBytes: reserveFrom * 4 << 10}})
		st := newTestStream(s, s.infoBufferBytes, reservingPolicy{newInfoPolicy(s.degrade, s.clock, nil, nil), n}, newForwarders(s.connFor(infoStream), 1)...)
		queueFull := func() uint64 { return st.stats().Dropped[outcome.QueueFull.String()] }
		log := func(msg string) {
			ent := zapcore.Entry{Level: zapcore.InfoLevel, Message: msg, Time: time.Unix(1, 0)}
			st.write(nil, tagtable.Ref{}, &ent, []zapcore.Field{zap.String("pad", strings.Repeat("x", 100))})
		}
		// No sender runs: nothing leaves the buffer. Fill it, sealing some batches partly
		// filled as flush ticks do.
		for i := 0; queueFull() == 0; i++ {
			if i > 10000 {
				t.Fatal("the flood never filled the buffer")
			}
			log("flood")
			if i%7 == 0 {
				st.flush()
			}
		}
		before := queueFull()
		for range 5 {
			log("rare")
			log("flood")
		}
		dropped := queueFull() - before
		if n == 1 && dropped != 5 {
			t.Fatalf("with a reserved batch: %d of 5 rare and 5 flood entries queue_full; want the 5 flood ones", dropped)
		}
		if n == 0 && dropped != 10 {
			t.Fatalf("without a reserved batch: %d of 10 entries queue_full; want all of them (the test would not show the reserve)", dropped)
		}
		// The sender frees a batch: the flood is written again, in a batch of its own, and
		// the reserve, which the shard held, is sealed with the rare entries in it.
		st.ring.Finish(<-st.ring.Queue())
		before, sealed := queueFull(), st.ring.LastSealed()
		log("flood")
		if queueFull() != before {
			t.Fatalf("reserve %d: the flood's entry was queue_full with a batch free", n)
		}
		if n == 1 && st.ring.LastSealed() != sealed+1 {
			t.Fatalf("the reserve was not sealed when its shard moved on (%d sealed, was %d)", st.ring.LastSealed(), sealed)
		}
		st.senders[0].fwd.Close()
	}
}

// The same with logger tags in use, where a tag that holds several batches may not take the
// last free ones (mayTake): an entry of the flooding tag that the policy keeps whole still
// takes one, reserved, so the flood does not fill it next. And a reserved batch whose entry
// is dropped (too large) goes back to the free list rather than hold the reserve.
func TestReservedBatchesHoldWithLoggerTags(t *testing.T) {
	s := settingsFor(Config{Transport: TransportConfig{MaxBatchBytes: 4 << 10, MaxEntryBytes: 1 << 10}, Info: InfoConfig{BufferBytes: 64 * 4 << 10}})
	st := newTestStream(s, s.infoBufferBytes, reservingPolicy{newInfoPolicy(s.degrade, s.clock, nil, nil), 1}, newForwarders(s.connFor(infoStream), 1)...)
	defer st.senders[0].fwd.Close()
	st.tags.Lookup("audit") // a logger tag exists: the flood's tag keeps off the last batches
	queueFull := func() uint64 { return st.stats().Dropped[outcome.QueueFull.String()] }
	log := func(msg string, pad int) {
		ent := zapcore.Entry{Level: zapcore.InfoLevel, Message: msg, Time: time.Unix(1, 0)}
		st.write(nil, tagtable.Ref{}, &ent, []zapcore.Field{zap.String("pad", strings.Repeat("x", pad))})
	}
	for i := 0; queueFull() == 0; i++ {
		if i > 100000 {
			t.Fatal("the flood never filled the buffer")
		}
		log("flood", 100)
	}
	free := st.ring.Free()
	if free == 0 {
		t.Fatal("the flood took every batch: no tag floor to test")
	}
	before := queueFull()
	for range 5 {
		log("rare", 100)
		for range 50 {
			log("flood", 100)
		}
	}
	if got := queueFull() - before; got != 250 {
		t.Fatalf("%d of 5 rare and 250 flood entries queue_full; want the 250 flood ones (the rare ones in a reserved batch, which the flood does not fill)", got)
	}
	// A rare entry too large for Transport.MaxEntryBytes is dropped; the batch taken for it is not kept.
	open, tooLarge := st.reserve.open.Load(), st.stats().Dropped[outcome.TooLarge.String()]
	st.flush() // the rare entries' reserved batch is sealed: the next one takes a new batch
	log("big rare", 4<<10)
	if st.stats().Dropped[outcome.TooLarge.String()] != tooLarge+1 {
		t.Fatal("the large entry was not dropped as too_large")
	}
	if st.reserve.open.Load() != 0 || st.ring.Free() != free-int(open) {
		t.Fatalf("after a too-large entry: %d reserved batches open (was %d), %d free (was %d); want none open, and the batch back", st.reserve.open.Load(), open, st.ring.Free(), free)
	}
}

// A flooding tag at its floor (see tagFloors) writes into no batch another tag opened in the
// shard they share: the rare tag's batch stays its own, and its entries are all written.
func TestAFloodingTagLeavesARareTagsBatchInTheirShard(t *testing.T) {
	s := settingsFor(Config{Transport: TransportConfig{MaxBatchBytes: 4 << 10, MaxEntryBytes: 1 << 10}, Info: InfoConfig{BufferBytes: 32 * 4 << 10}})
	// A policy that keeps no entry whole: the floor alone decides.
	st := newTestStream(s, s.infoBufferBytes, reservingPolicy{newInfoPolicy(s.degrade, s.clock, nil, nil), 0}, newForwarders(s.connFor(infoStream), 1)...)
	defer st.senders[0].fwd.Close()
	flood := st.tags.Lookup("flood")
	rare := flood
	for i := 0; rare == flood || st.shards.home(rare.Idx) != st.shards.home(flood.Idx); i++ {
		if i > 60 {
			t.Fatal("no tag shares the flood's shard")
		}
		rare = st.tags.Lookup(fmt.Sprint("rare", i))
	}
	dropped := func(tag tagtable.Ref) uint64 { return st.tags.Counters(tag.Idx).Dropped[infoStream].Load() }
	log := func(tag tagtable.Ref) {
		ent := zapcore.Entry{Level: zapcore.InfoLevel, Message: "m", Time: time.Unix(1, 0)}
		st.write(nil, tag, &ent, []zapcore.Field{zap.String("pad", strings.Repeat("x", 100))})
	}
	for i := 0; dropped(flood) == 0; i++ {
		if i > 100000 {
			t.Fatal("the flood never filled the buffer")
		}
		log(flood)
	}
	if st.ring.Free() == 0 {
		t.Fatal("the flood took every batch: no floor to test")
	}
	st.flush() // the shard's open batch is sealed: the rare tag opens the next
	log(rare)
	before := dropped(flood)
	for range 20 {
		log(flood)
		log(rare)
	}
	if got := dropped(flood) - before; got != 20 {
		t.Errorf("%d of the flood's 20 entries dropped, want 20", got)
	}
	if got := dropped(rare); got != 0 {
		t.Errorf("%d of the rare tag's 21 entries dropped, want 0", got)
	}
}

// queuedBytes is the bytes of the stream's batches sealed and not finished.
func queuedBytes(st *stream) int64 {
	q, _ := st.ring.Bytes()
	return q
}
