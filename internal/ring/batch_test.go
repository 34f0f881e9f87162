package ring

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/tinylib/msgp/msgp"
)

// fill writes entries of tags into b as the write path does (added), tags taken in the
// order given, each entry an msgpack string naming its tag and its number within the tag.
func fill(t *testing.T, b *Batch, tags []uint16) {
	t.Helper()
	count := map[uint16]int{}
	for _, tag := range tags {
		if !b.Accepts(tag) {
			t.Fatalf("batch with %d runs of %d tags refused tag %d", len(b.Runs), len(b.TagsIn), tag)
		}
		start := len(b.Buf)
		b.Buf = msgp.AppendString(b.Buf, fmt.Sprintf("%d/%d", tag, count[tag]))
		count[tag]++
		b.Added(tag, start)
	}
}

// framesOf returns each frame of a grouped batch as its tag and its entries' strings.
func framesOf(t *testing.T, b *Batch) []string {
	t.Helper()
	var out []string
	for i := range b.Runs {
		tag, entries, n := b.Frame(i)
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
			b, sp := NewBatch(4096), NewBatch(4096)
			fill(t, b, tags)
			if len(b.Runs) != 9 || !b.Interleaved() || b.N != len(tags) {
				t.Fatalf("%d runs, %d entries, interleaved %v", len(b.Runs), b.N, b.Interleaved())
			}
			size := len(b.Buf)
			if spare {
				b.RegroupInto(sp)
				if len(sp.Buf) != 0 || cap(sp.Buf) != 4096 || cap(b.Buf) != 4096 {
					t.Fatalf("buffers after the swap: batch %d/%d, spare %d/%d", len(b.Buf), cap(b.Buf), len(sp.Buf), cap(sp.Buf))
				}
			} else {
				b.RegroupInPlace()
			}
			b.Group()
			if len(b.Buf) != size {
				t.Fatalf("%d bytes after regrouping, want %d", len(b.Buf), size)
			}
			if got := framesOf(t, b); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("frames %v, want %v", got, want)
			}
			if b.Unsent() != len(tags) {
				t.Errorf("unsent %d, want %d", b.Unsent(), len(tags))
			}
			b.Sent[0], b.Sent[2] = true, true
			if b.Unsent() != 4 || b.AllSent() {
				t.Errorf("two frames sent: unsent %d, all sent %v", b.Unsent(), b.AllSent())
			}
		})
	}
}

// A batch takes at most maxBatchTags tags and its room of runs; past either, the next
// entry of another tag is refused (the shard seals the batch), while the last run's tag
// still goes on.
func TestBatchRefusesTagsAndRunsPastItsRoom(t *testing.T) {
	b := NewBatch(256 << 10)
	var tags []uint16
	for i := range MaxTags {
		tags = append(tags, uint16(i))
	}
	fill(t, b, tags)
	if b.Accepts(MaxTags) {
		t.Errorf("a %dth tag accepted", MaxTags+1)
	}
	if !b.Accepts(MaxTags-1) || !b.Accepts(0) {
		t.Errorf("a tag the batch holds refused")
	}
	b = NewBatch(8 << 10) // room for 32 runs
	var turns []uint16
	for i := range cap(b.Runs) {
		turns = append(turns, uint16(i%2))
	}
	fill(t, b, turns)
	last := turns[len(turns)-1]
	if b.Accepts(1-last) || !b.Accepts(last) {
		t.Errorf("with every run taken: other tag accepted %v, last tag accepted %v", b.Accepts(1-last), b.Accepts(last))
	}
	b.Reset()
	if b.N != 0 || len(b.Runs) != 0 || len(b.TagsIn) != 0 || len(b.Buf) != 0 || b.Grouped {
		t.Errorf("reset left %d entries, %d runs", b.N, len(b.Runs))
	}
}

// A batch written into directly (one tag, no runs) is one frame of that tag; compact's
// merge of two such batches of different tags makes two frames.
func TestBatchWithoutRunsIsOneFrame(t *testing.T) {
	dst, src := NewBatch(4096), NewBatch(4096)
	dst.Tag, src.Tag = 2, 4
	for i := range 3 {
		dst.Buf = msgp.AppendString(dst.Buf, fmt.Sprintf("2/%d", i))
		dst.N++
	}
	src.Buf = msgp.AppendString(src.Buf, "4/0")
	src.N = 1
	if !dst.TakesRuns(src) {
		t.Fatal("no room for one run")
	}
	off := len(dst.Buf)
	dst.AppendBatch(src)
	dst.Group()
	if got, want := fmt.Sprint(framesOf(t, dst)), "[2 [2/0 2/1 2/2] 4 [4/0]]"; got != want {
		t.Errorf("frames %s, want %s", got, want)
	}
	if !bytes.Equal(dst.Buf[:off], msgp.AppendString(msgp.AppendString(msgp.AppendString(nil, "2/0"), "2/1"), "2/2")) {
		t.Error("the first batch's entries moved")
	}
}
