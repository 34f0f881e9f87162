package fluentcore

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tinylib/msgp/msgp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// fill writes entries of tags into b as the write path does (added), tags taken in the
// order given, each entry an msgpack string naming its tag and its number within the tag.
func fill(t *testing.T, b *batch, tags []uint16) {
	t.Helper()
	count := map[uint16]int{}
	for _, tag := range tags {
		if !b.accepts(tag) {
			t.Fatalf("batch with %d runs of %d tags refused tag %d", len(b.runs), len(b.tagsIn), tag)
		}
		start := len(b.buf)
		b.buf = msgp.AppendString(b.buf, fmt.Sprintf("%d/%d", tag, count[tag]))
		count[tag]++
		b.added(tag, start)
	}
}

// framesOf returns each frame of a grouped batch as its tag and its entries' strings.
func framesOf(t *testing.T, b *batch) []string {
	t.Helper()
	var out []string
	for i := range b.runs {
		tag, entries, n := b.frame(i)
		var got []string
		for rest := entries; len(rest) > 0; {
			var s string
			var err error
			if s, rest, err = msgp.ReadStringBytes(rest); err != nil {
				t.Fatal(err)
			}
			got = append(got, s)
		}
		if len(got) != n {
			t.Fatalf("frame %d: %d entries, counted %d", i, len(got), n)
		}
		out = append(out, fmt.Sprint(tag, got))
	}
	return out
}

// A batch holds entries of several tags in runs; before it is sent, each tag's runs become
// one frame of the tag's entries in their order, through a spare buffer or in place alike.
func TestBatchFramesEachTagsEntriesInOrder(t *testing.T) {
	tags := []uint16{3, 3, 5, 0, 5, 3, 7, 0, 0, 5, 3}
	want := []string{
		"3 [3/0 3/1 3/2 3/3]",
		"5 [5/0 5/1 5/2]",
		"0 [0/0 0/1 0/2]",
		"7 [7/0]",
	}
	for _, spare := range []bool{true, false} {
		t.Run(fmt.Sprint("spare=", spare), func(t *testing.T) {
			b, sp := newBatch(4096), newBatch(4096)
			fill(t, b, tags)
			if len(b.runs) != 9 || !b.interleaved() || b.n != len(tags) {
				t.Fatalf("%d runs, %d entries, interleaved %v", len(b.runs), b.n, b.interleaved())
			}
			size := len(b.buf)
			if spare {
				b.regroupInto(sp)
				if len(sp.buf) != 0 || cap(sp.buf) != 4096 || cap(b.buf) != 4096 {
					t.Fatalf("buffers after the swap: batch %d/%d, spare %d/%d", len(b.buf), cap(b.buf), len(sp.buf), cap(sp.buf))
				}
			} else {
				b.regroupInPlace()
			}
			b.group()
			if len(b.buf) != size {
				t.Fatalf("%d bytes after regrouping, want %d", len(b.buf), size)
			}
			if got := framesOf(t, b); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("frames %v, want %v", got, want)
			}
			if b.unsent() != len(tags) {
				t.Errorf("unsent %d, want %d", b.unsent(), len(tags))
			}
			b.sent[0], b.sent[2] = true, true
			if b.unsent() != 4 || b.allSent() {
				t.Errorf("two frames sent: unsent %d, all sent %v", b.unsent(), b.allSent())
			}
		})
	}
}

// A batch takes at most maxBatchTags tags and its room of runs; past either, the next
// entry of another tag is refused (the shard seals the batch), while the last run's tag
// still goes on.
func TestBatchRefusesTagsAndRunsPastItsRoom(t *testing.T) {
	b := newBatch(256 << 10)
	var tags []uint16
	for i := range maxBatchTags {
		tags = append(tags, uint16(i))
	}
	fill(t, b, tags)
	if b.accepts(maxBatchTags) {
		t.Errorf("a %dth tag accepted", maxBatchTags+1)
	}
	if !b.accepts(maxBatchTags-1) || !b.accepts(0) {
		t.Errorf("a tag the batch holds refused")
	}
	b = newBatch(8 << 10) // room for 32 runs
	var turns []uint16
	for i := range cap(b.runs) {
		turns = append(turns, uint16(i%2))
	}
	fill(t, b, turns)
	last := turns[len(turns)-1]
	if b.accepts(1-last) || !b.accepts(last) {
		t.Errorf("with every run taken: other tag accepted %v, last tag accepted %v", b.accepts(1-last), b.accepts(last))
	}
	b.reset()
	if b.n != 0 || len(b.runs) != 0 || len(b.tagsIn) != 0 || len(b.buf) != 0 || b.grouped {
		t.Errorf("reset left %d entries, %d runs", b.n, len(b.runs))
	}
}

// A batch written into directly (one tag, no runs) is one frame of that tag; compact's
// merge of two such batches of different tags makes two frames.
func TestBatchWithoutRunsIsOneFrame(t *testing.T) {
	dst, src := newBatch(4096), newBatch(4096)
	dst.tag, src.tag = 2, 4
	for i := range 3 {
		dst.buf = msgp.AppendString(dst.buf, fmt.Sprintf("2/%d", i))
		dst.n++
	}
	src.buf = msgp.AppendString(src.buf, "4/0")
	src.n = 1
	if !dst.takesRuns(src) {
		t.Fatal("no room for one run")
	}
	off := len(dst.buf)
	dst.appendBatch(src)
	dst.group()
	if got, want := fmt.Sprint(framesOf(t, dst)), "[2 [2/0 2/1 2/2] 4 [4/0]]"; got != want {
		t.Errorf("frames %s, want %s", got, want)
	}
	if !bytes.Equal(dst.buf[:off], msgp.AppendString(msgp.AppendString(msgp.AppendString(nil, "2/0"), "2/1"), "2/2")) {
		t.Error("the first batch's entries moved")
	}
}

// A flooding tag at its floor (see mayTake) writes into no batch another tag opened in the
// shard they share: the rare tag's batch stays its own, and its entries are all written.
func TestAFloodingTagLeavesARareTagsBatchInTheirShard(t *testing.T) {
	s := settingsFor(Config{MaxBatchBytes: 4 << 10, MaxEntryBytes: 1 << 10, Info: StreamConfig{BufferBytes: 32 * 4 << 10}})
	// A policy that keeps no entry whole: the floor alone decides.
	st := newTestStream(s, s.infoBufferBytes, reservingPolicy{newInfoPolicy(s.degrade, s.clock, nil, nil), 0}, newForwarders(s.connFor(infoStream), 1)...)
	defer st.senders[0].fwd.close()
	flood := st.tags.lookup("flood")
	rare := flood
	for i := 0; rare == flood || st.homeShard(rare.idx) != st.homeShard(flood.idx); i++ {
		if i > 60 {
			t.Fatal("no tag shares the flood's shard")
		}
		rare = st.tags.lookup(fmt.Sprint("rare", i))
	}
	dropped := func(tag tagRef) uint64 { return st.tags.counts[tag.idx].dropped[infoStream].Load() }
	log := func(tag tagRef) {
		ent := zapcore.Entry{Level: zapcore.InfoLevel, Message: "m", Time: time.Unix(1, 0)}
		st.write(nil, tag, &ent, []zapcore.Field{zap.String("pad", strings.Repeat("x", 100))})
	}
	for i := 0; dropped(flood) == 0; i++ {
		if i > 100000 {
			t.Fatal("the flood never filled the buffer")
		}
		log(flood)
	}
	if len(st.free) == 0 {
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
