package stream

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore/internal/outcome"
	"github.com/fluentcore/fluentcore/internal/tagtable"
	"github.com/fluentcore/fluentcore/internal/testkit"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// usage reads each shard's open batch with its counts, and the free list after the shards,
// so that what it reports while writers go on never promises room that is gone: the degrade
// policy's allowance is the room less the entries taken after the read. Here the reader
// waits for shard 1's lock while one writer appends to shard 0, read before, and another
// takes a free batch into a logger tag's shard, read after. With the free list read first,
// that batch was counted twice; with the counts read after the shards, the entry in shard 0
// was counted as taken but its bytes still as room.
func TestUsageNeverPromisesRoomThatWritersTookWhileItReads(t *testing.T) {
	st := usageStream(t)
	tag := st.tags.Lookup("late")
	if home := st.shards.home(tag.Idx); home < 2 {
		t.Fatalf("the tag's shard is %d, which usage reads before shard 1 is let go", home)
	}
	write := func(tag tagtable.Ref) { // shard 0 while calm, or the tag's own shard
		ent := zapcore.Entry{Level: zapcore.InfoLevel, Message: "m", Time: time.Unix(1, 0)}
		st.Write(nil, tag, &ent, []zapcore.Field{zap.String("pad", strings.Repeat("p", 100))})
	}
	write(tagtable.Ref{}) // shard 0 has an open batch
	u := readUsageWhile(t, st, func() {
		write(tagtable.Ref{}) // into a shard usage has read
		write(tag)            // a free batch into a shard it has not
	})
	after := st.Usage() // nothing moves now
	if after.Held != 3 || after.Buffered%3 != 0 {
		t.Fatalf("after: %d entries held in %d bytes; want 3 of one size", after.Held, after.Buffered)
	}
	entry := after.Buffered / 3
	if promised := u.Room - int64(after.Taken-u.Taken)*entry; promised > after.Room {
		t.Fatalf("usage read %d bytes of room and %d entries taken; with the %d entries taken since, that promises %d bytes, but %d are left",
			u.Room, u.Taken, after.Taken-u.Taken, promised, after.Room)
	}
}

// The same for a batch that goes the other way while usage reads: an empty reserved batch
// given back from shard 0, read before, to the free list, read after, is not counted twice.
func TestUsageNeverCountsAGivenBackBatchTwice(t *testing.T) {
	st := usageStream(t)
	sh := &st.shards.all[0]
	st.shards.open(sh, st.Ring.Take(nil)) // a reserve taken for an entry that was then dropped
	st.Reserve.hold(sh.cur)
	u := readUsageWhile(t, st, func() {
		sh.mu.Lock()
		st.giveBackEmptyReserve(sh)
		sh.mu.Unlock()
	})
	if after := st.Usage(); u.Room > after.Room {
		t.Fatalf("usage read %d bytes of room while the reserve went back; %d are there", u.Room, after.Room)
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
		st.Write(nil, tagtable.Ref{}, &ent, fields) // shard 0, read before, had no batch: it takes a free one
	})
	after := st.Usage() // nothing moves now
	if after.Held != 1 {
		t.Fatalf("after: %d entries held; want 1", after.Held)
	}
	entry := after.Buffered
	if seen := u.Room - int64(after.Taken-u.Taken)*entry; seen < after.Room {
		t.Fatalf("usage read %d bytes of room and %d entries taken; less the %d bytes taken since, that is %d bytes, but %d are left",
			u.Room, u.Taken, int64(after.Taken-u.Taken)*entry, seen, after.Room)
	}
}

// usageStream is an info stream of 16 batches of 4 KiB, with no sender running, for the
// usage tests.
func usageStream(t *testing.T) *Stream {
	st := newTestStream(testSettings(4<<10, defaultEntryBytes), 64<<10, &testPolicy{}, testForwarders(t, "127.0.0.1:24224", 1)[0])
	if len(st.shards.all) < 3 {
		t.Fatalf("%d shards; the usage tests need three", len(st.shards.all))
	}
	return st
}

// readUsageWhile runs usage while shard 1 is held, as a writer holds it, runs move once
// usage has read shard 0 and waits for shard 1, then lets it go on, and returns what it read.
func readUsageWhile(t *testing.T, st *Stream, move func()) Usage {
	held := &st.shards.all[1]
	held.mu.Lock()
	read := make(chan Usage)
	go func() { read <- st.Usage() }()
	testkit.WaitUntil(t, "usage waits for shard 1", func() bool { return held.sinkHolds.Load() > 0 })
	move()
	held.mu.Unlock()
	select {
	case u := <-read:
		return u
	case <-time.After(10 * time.Second):
		t.Fatal("usage did not return")
		return Usage{}
	}
}

// A flood the policy does not keep whole fills the buffer up to the reserved batch, and no
// further: a key kept whole still finds room, however the flood's batches were sealed, and
// the flood is not written into the batch it opened. Without the reserve, the same
// entries are queue_full.
func TestReservedBatchKeepsRoomForWholeKeys(t *testing.T) {
	for _, n := range []int{1, 0} {
		s := testSettings(4<<10, defaultEntryBytes)
		p := &testPolicy{reserves: n > 0, keepsWhole: notFlood, kickAt: adaptiveKickAt}
		st := newTestStream(s, reserveFrom*4<<10, p, testForwarders(t, "127.0.0.1:24224", 1)...)
		queueFull := func() uint64 { return st.Stats().Dropped[outcome.QueueFull.String()] }
		log := func(msg string) {
			ent := zapcore.Entry{Level: zapcore.InfoLevel, Message: msg, Time: time.Unix(1, 0)}
			st.Write(nil, tagtable.Ref{}, &ent, []zapcore.Field{zap.String("pad", strings.Repeat("x", 100))})
		}
		// No sender runs: nothing leaves the buffer. Fill it, sealing some batches partly
		// filled as flush ticks do.
		for i := 0; queueFull() == 0; i++ {
			if i > 10000 {
				t.Fatal("the flood never filled the buffer")
			}
			log("flood")
			if i%7 == 0 {
				st.Flush()
			}
		}
		if !p.woken.Load() {
			t.Fatal("the queue passed the policy's kick share and the policy was not woken")
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
		st.Ring.Finish(<-st.Ring.Queue())
		before, sealed := queueFull(), st.Ring.LastSealed()
		log("flood")
		if queueFull() != before {
			t.Fatalf("reserve %d: the flood's entry was queue_full with a batch free", n)
		}
		if n == 1 && st.Ring.LastSealed() != sealed+1 {
			t.Fatalf("the reserve was not sealed when its shard moved on (%d sealed, was %d)", st.Ring.LastSealed(), sealed)
		}
		st.Senders[0].fwd.Close()
	}
}

// The same with logger tags in use, where a tag that holds several batches may not take the
// last free ones (mayTake): an entry of the flooding tag that the policy keeps whole still
// takes one, reserved, so the flood does not fill it next. And a reserved batch whose entry
// is dropped (too large) goes back to the free list rather than hold the reserve.
func TestReservedBatchesHoldWithLoggerTags(t *testing.T) {
	s := testSettings(4<<10, 1<<10)
	st := newTestStream(s, 64*4<<10, &testPolicy{reserves: true, keepsWhole: notFlood, kickAt: adaptiveKickAt}, testForwarders(t, "127.0.0.1:24224", 1)...)
	st.tags.Lookup("audit") // a logger tag exists: the flood's tag keeps off the last batches
	queueFull := func() uint64 { return st.Stats().Dropped[outcome.QueueFull.String()] }
	log := func(msg string, pad int) {
		ent := zapcore.Entry{Level: zapcore.InfoLevel, Message: msg, Time: time.Unix(1, 0)}
		st.Write(nil, tagtable.Ref{}, &ent, []zapcore.Field{zap.String("pad", strings.Repeat("x", pad))})
	}
	for i := 0; queueFull() == 0; i++ {
		if i > 100000 {
			t.Fatal("the flood never filled the buffer")
		}
		log("flood", 100)
	}
	free := st.Ring.Free()
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
	open, tooLarge := st.Reserve.open.Load(), st.Stats().Dropped[outcome.TooLarge.String()]
	st.Flush() // the rare entries' reserved batch is sealed: the next one takes a new batch
	log("big rare", 4<<10)
	if st.Stats().Dropped[outcome.TooLarge.String()] != tooLarge+1 {
		t.Fatal("the large entry was not dropped as too_large")
	}
	if st.Reserve.open.Load() != 0 || st.Ring.Free() != free-int(open) {
		t.Fatalf("after a too-large entry: %d reserved batches open (was %d), %d free (was %d); want none open, and the batch back", st.Reserve.open.Load(), open, st.Ring.Free(), free)
	}
}

// A flooding tag at its floor (see tagFloors) writes into no batch another tag opened in the
// shard they share: the rare tag's batch stays its own, and its entries are all written.
func TestAFloodingTagLeavesARareTagsBatchInTheirShard(t *testing.T) {
	s := testSettings(4<<10, 1<<10)
	// A policy that reserves nothing: the floor alone decides.
	st := newTestStream(s, 32*4<<10, &testPolicy{keepsWhole: notFlood, kickAt: adaptiveKickAt}, testForwarders(t, "127.0.0.1:24224", 1)...)
	flood := st.tags.Lookup("flood")
	rare := flood
	for i := 0; rare == flood || st.shards.home(rare.Idx) != st.shards.home(flood.Idx); i++ {
		if i > 60 {
			t.Fatal("no tag shares the flood's shard")
		}
		rare = st.tags.Lookup(fmt.Sprint("rare", i))
	}
	dropped := func(tag tagtable.Ref) uint64 { return st.tags.Counters(tag.Idx).Dropped[Info].Load() }
	log := func(tag tagtable.Ref) {
		ent := zapcore.Entry{Level: zapcore.InfoLevel, Message: "m", Time: time.Unix(1, 0)}
		st.Write(nil, tag, &ent, []zapcore.Field{zap.String("pad", strings.Repeat("x", 100))})
	}
	for i := 0; dropped(flood) == 0; i++ {
		if i > 100000 {
			t.Fatal("the flood never filled the buffer")
		}
		log(flood)
	}
	if st.Ring.Free() == 0 {
		t.Fatal("the flood took every batch: no floor to test")
	}
	st.Flush() // the shard's open batch is sealed: the rare tag opens the next
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
