package stream

import (
	"testing"

	"github.com/fluentcore/fluentcore/internal/ring"
	"go.uber.org/zap/zapcore"
)

// A tag's batches are counted from its writer's claim to the batch's unclaim, and the tags
// that hold one are light: the floor is one batch per light tag, from nb/8 to nb/4, and
// only a tag that holds two or more is at it once the free batches are down to it.
func TestTagFloorsKeepTheLastBatchesFromHeavyTags(t *testing.T) {
	tags := newTestTags()
	const nb = 32
	r := ring.New(nb, 1<<10, 1, ring.Hooks{})
	f := newTagFloors(tags, r)
	if f.floor() != 0 {
		t.Fatalf("floor %d without logger tags; want 0", f.floor())
	}
	heavy, light := tags.Lookup("heavy").Idx, tags.Lookup("light").Idx
	take := func(tag uint16) *ring.Batch {
		b := r.Take(nil)
		f.claim(b, tag)
		return b
	}
	first := take(heavy)
	take(heavy)
	take(light)
	if n, l := f.held[heavy].Load(), f.light.Load(); n != 2 || l != 1 {
		t.Fatalf("heavy holds %d, %d light tags; want 2 and 1", n, l)
	}
	if f.floor() != nb/8 {
		t.Fatalf("floor %d with one light tag; want nb/8, %d", f.floor(), nb/8)
	}
	for r.Free() > f.floor() {
		if f.at(heavy) || f.at(light) {
			t.Fatalf("a tag at its floor with %d batches free", r.Free())
		}
		take(light) // light becomes heavy too: the floor stays nb/8
	}
	if !f.at(heavy) {
		t.Fatalf("heavy, with two batches, not at the floor with %d free", r.Free())
	}
	f.unclaim(first)
	if f.held[heavy].Load() != 1 || f.at(heavy) {
		t.Fatal("heavy, back to one batch, still at the floor")
	}
	f.claim(first, heavy) // an empty batch claimed again by the same tag counts once
	f.claim(first, heavy)
	if f.held[heavy].Load() != 2 {
		t.Fatalf("heavy holds %d after claiming one batch twice; want 2", f.held[heavy].Load())
	}
}

// The reserve is due once the free batches are down to it, less its batches open; its room
// is counted only while the admission reserves.
func TestReserveIsDueAtTheLastFreeBatch(t *testing.T) {
	r := ring.New(reserveFrom, 1<<10, 1, ring.Hooks{})
	for _, n := range []int{1, 0} {
		rs := newReserve(r, &testPolicy{reserves: n > 0, keepsWhole: notFlood}, 1000)
		if got, want := rs.Room(), int64(n*1000); got != want {
			t.Errorf("reserves %v: room %d; want %d", n > 0, got, want)
		}
	}
	rs := newReserve(r, &testPolicy{reserves: true, keepsWhole: notFlood}, 1000)
	var taken []*ring.Batch
	for r.Free() > 1 {
		if rs.due() {
			t.Fatalf("due with %d batches free", r.Free())
		}
		taken = append(taken, r.Take(nil))
	}
	if !rs.due() {
		t.Fatal("not due at the last free batch")
	}
	b := r.Take(nil)
	rs.hold(b)
	if !b.Reserved || rs.open.Load() != 1 || rs.due() {
		t.Fatalf("held: reserved %v, %d open, due %v; want true, 1, false", b.Reserved, rs.open.Load(), rs.due())
	}
	rs.unreserve(b)
	rs.unreserve(b)
	if b.Reserved || rs.open.Load() != 0 {
		t.Fatalf("unreserved twice: reserved %v, %d open; want false, 0", b.Reserved, rs.open.Load())
	}
	r.Put(b)
	if !rs.due() || len(taken) != reserveFrom-1 {
		t.Fatal("the reserve's batch back: due again")
	}
}

// A tag that holds two batches or more leaves the last free ones to the tags that hold
// one: a flood cannot take the batch a rare tag needs next.
func TestAFloodingTagLeavesTheLastBatchesToTheOthers(t *testing.T) {
	st := newTestStream(testSettings(defaultBatchBytes, defaultEntryBytes), defaultBudget, &testPolicy{}, testForwarders(t, "127.0.0.1:1", 1)[0])
	flood, rare := st.tags.Lookup("flood").Idx, st.tags.Lookup("rare").Idx
	take := func(tag uint16) *ring.Batch {
		if !st.mayTake(&zapcore.Entry{Message: "m"}, tag) {
			return nil
		}
		b := st.Ring.Take(nil)
		if b != nil {
			st.floors.claim(b, tag)
		}
		return b
	}
	if take(rare) == nil {
		t.Fatal("the rare tag's first batch")
	}
	var flooded []*ring.Batch
	for b := take(flood); b != nil; b = take(flood) {
		flooded = append(flooded, b)
	}
	// Two tags hold batches, one of them one: the reserve is nb/8 (4 of 32).
	nb := len(st.Ring.Batches())
	if left := st.Ring.Free(); left != nb/8 || len(flooded) != nb-1-left {
		t.Fatalf("the flood took %d of %d batches and left %d", len(flooded), nb, left)
	}
	if take(rare) == nil {
		t.Fatal("the rare tag found no batch the flood left")
	}
	if take(rare) != nil {
		t.Fatal("the rare tag, now with two batches, took a third from the reserve")
	}
	st.Ring.Finish(flooded[0])
	if st.Ring.Free() != nb/8 || take(flood) != nil {
		t.Fatal("the flood took a batch of the reserve")
	}
	if n := st.floors.held[flood].Load(); n != int32(len(flooded)-1) {
		t.Errorf("the flood holds %d batches, counted %d", len(flooded)-1, n)
	}
}
