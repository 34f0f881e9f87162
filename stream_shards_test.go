package fluentcore

import (
	"runtime"
	"testing"
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
			s, _ := resolve(Config{Info: InfoConfig{BufferBytes: budget}})
			tags := newTagTable(s.tagBase, s.tags, s.tagTemplate, s.maxTags)
			nb := max(budget/s.stream.batchBytes, 2)
			st := newShards(nb, tags, s.stream.enc)
			n := len(st.all)
			if st.randShards != min(2*procs, nb/2) || n > max(st.randShards, nb/2) {
				t.Errorf("procs %d budget %d: %d shards, %d own, for %d batches", procs, budget, n, st.randShards, nb)
			}
			if st.own() != st.randShards {
				t.Errorf("procs %d budget %d: without tags, writers pick among %d shards, not %d", procs, budget, st.own(), st.randShards)
			}
			tags.lookup("audit")
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
