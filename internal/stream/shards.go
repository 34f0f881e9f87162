package stream

// A stream's shards: each one open batch, the encoder that writes into it and its lock, and
// the choice of a shard for a writer (shards.lock).

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/fluentcore/fluentcore/internal/outcome"
	"github.com/fluentcore/fluentcore/internal/ring"
	"github.com/fluentcore/fluentcore/internal/tagtable"
	"github.com/fluentcore/fluentcore/internal/zapenc"
)

// shard is one open batch and the encoder that writes into it, under its lock, with the
// counts of the entries its writers took in (read by Counts, summed over the shards:
// a counter per shard is never shared by the writers of another).
type shard struct {
	mu        sync.Mutex
	enc       *zapenc.Encoder
	cur       *ring.Batch // nil until a writer takes a batch from the free list
	entries   atomic.Uint64
	truncated atomic.Uint64 // err entries delivered cut down to Transport.MaxEntryBytes
	// tagOverflow counts the entries whose logger's tag name was past Tags.Max.
	tagOverflow atomic.Uint64
	sinkHolds   atomic.Int32  // lockForSink callers holding or waiting for mu
	sinkLocks   atomic.Uint32 // lockForSink calls so far
	takes       atomic.Uint64 // batches taken from the free list into the shard (Usage)
	dropped     [outcome.NumReasons]atomic.Uint64
	_           [64]byte // keep neighbouring shards off this cache line
}

// lockForSink locks the shard for the sink's own short work (a flush, a read of the open
// batch's size), marked so that a writer finding the lock taken waits for it rather than
// move to another shard, which would reorder its entries (see shards.lock).
// The mark is set before the lock is taken and cleared after it is released, so that no
// writer ever finds the lock taken by the sink unmarked.
func (sh *shard) lockForSink() {
	sh.sinkHolds.Add(1)
	sh.sinkLocks.Add(1)
	sh.mu.Lock()
}

func (sh *shard) unlockForSink() {
	sh.mu.Unlock()
	sh.sinkHolds.Add(-1)
}

// OverBudget is the shard's answer to its encoder's report (msgpenc.Owner) that the entry
// it is encoding for the shard's writer passed its budget: the shard is released at once.
// The report comes from within the encoder, while the writer's marshalers may still walk
// on, so that the writers behind this one need not wait for that walk, which may be long
// (a marshaler's million fields) and which touches nothing of the shard's.
func (sh *shard) OverBudget() { sh.release() }

// release gives the shard up, unlocked, while its encoder is still in an entry that passed
// its budget (OverBudget, or appendLocked): the shard gets a new encoder, and the old one
// stays with its writer, whose marshalers may go on calling it, and never touches the
// shard or its batch again. What the old encoder kept is let go with it.
func (sh *shard) release() {
	sh.enc = sh.enc.Fork()
	sh.mu.Unlock()
}

// counts reads the shard's entries taken in (every entry its writers counted less those
// Check shed before the write, Counts.Drop) and held (less every drop). The drops are
// read before the entries, each of which is counted before its drop: an entry is never held
// and dropped at once, though taken may read one high.
func (sh *shard) counts() (taken, held uint64) {
	checked := sh.dropped[outcome.Sampled].Load() + sh.dropped[outcome.Degraded].Load()
	var all uint64
	for r := range sh.dropped {
		all += sh.dropped[r].Load()
	}
	n := sh.entries.Load()
	return n - checked, n - all
}

// shards are a stream's shards and which one a writer takes. The first own of them are
// the stream's own tag's: a writer takes shard 0 while the stream is calm, and one of them
// at random once writers have met there (contended), until the next flush tick (calm). A
// logger tag's writers always take its home shard, from tagShard on. The set is made once:
// all never grows, and a shard's batch changes only under its lock.
type shards struct {
	all  []shard
	tags *tagtable.Table // the logger tags: while it has one, the shards from tagShard on are theirs
	// randShards is how many shards, the first ones, writers of the stream's own tag use
	// while the core has no logger tag; once it has one, those before tagShard: the shards
	// from tagShard on are the logger tags' (home), at least half of them.
	randShards, tagShard int
	contended            atomic.Bool // writers met on shard 0 since the last flush tick
	// opened is how many shards hold an open batch (cur not nil): changed with a shard's
	// batch, under its lock, and read without any lock by a writer that found no free
	// batch, which then looks for room in the others' open batches only if there are any.
	opened atomic.Int32
}

// open makes b (not nil) the open batch of sh, which holds none; the caller holds sh's lock.
func (ss *shards) open(sh *shard, b *ring.Batch) {
	sh.cur = b
	ss.opened.Add(1)
}

// close leaves sh, whose open batch is not nil, without one and returns the batch; the
// caller holds sh's lock.
func (ss *shards) close(sh *shard) *ring.Batch {
	b := sh.cur
	sh.cur = nil
	ss.opened.Add(-1)
	return b
}

// tagShards is how many shards a stream adds for the logger tags, budget permitting: each
// tag writes into one shard (home), so that many tags logging at once rarely share one,
// whose batch would then hold a run at each change of tag (see ring.Batch.Accepts).
const tagShards = 16

// newShards makes the shards of a stream of nb batches, their encoders on enc: two per
// processor for the stream's own tag, and up to tagShards more for the logger tags of
// tags, while open batches stay at most half of the batches. A shard holds no batch until
// written to, so they cost nothing unused. Where the budget leaves no room for them (many
// cores), the stream's own tag gives up half of its shards to the logger tags once there
// is one.
func newShards(nb int, tags *tagtable.Table, enc *zapenc.Config) *shards {
	rshards := min(2*runtime.GOMAXPROCS(0), nb/2)
	n := max(rshards, min(nb/2, rshards+tagShards))
	ss := &shards{all: make([]shard, n), tags: tags, randShards: rshards, tagShard: min(rshards, n-n/2)}
	for i := range ss.all {
		ss.all[i].enc = zapenc.New(enc)
	}
	return ss
}

// lock locks a shard for a writer of tag and returns its index. While the stream is calm,
// shard 0: a writer that is alone (the usual case at a modest rate) always writes there,
// and the entries of one goroutine keep their order in the stream, since batches are
// sealed in order and one shard's batch is in order (a random shard, even uncontended,
// would interleave consecutive calls' entries by a batch). A flush or a scrape holding
// shard 0 (lockForSink) is waited for, for the same reason. The first writer to find
// shard 0 taken by another writer marks the stream contended, and until the next flush
// tick writers pick a shard at random, as many goroutines logging at once need: writers
// that all tried shard 0 first would queue on its lock and keep the sender from a CPU.
// The order of concurrent calls is not defined anyway, though a
// goroutine that moves shards may see its entries reordered within a flush. The entries of
// a logger tag (tag, not 0) always go to the tag's own shard (home), so they keep their
// order whatever the contention, and tags rarely share a batch's runs; the stream's own
// tag picks among its own shards (own).
func (ss *shards) lock(tag uint16) int {
	if tag != 0 {
		i := ss.home(tag)
		ss.all[i].mu.Lock()
		return i
	}
	if !ss.contended.Load() {
		sh := &ss.all[0]
		// Read before the TryLock: if it fails because the sink holds the lock, the sink
		// was holding or waiting already, or has locked since. Looking only after the
		// failure could miss a flush that is over by then.
		locks, holding := sh.sinkLocks.Load(), sh.sinkHolds.Load() > 0
		if sh.mu.TryLock() {
			return 0
		}
		if len(ss.all) == 1 || holding || sh.sinkLocks.Load() != locks {
			sh.mu.Lock()
			return 0
		}
		ss.contended.Store(true)
	}
	i := rand.N(ss.own())
	ss.all[i].mu.Lock()
	return i
}

// calm is the flush tick's: writers take shard 0 again, unless they still meet there.
func (ss *shards) calm() {
	if ss.contended.Load() {
		ss.contended.Store(false)
	}
}

// own is how many shards writers of the stream's own tag pick from under contention:
// randShards, or while the core has logger tags, those before tagShard.
func (ss *shards) own() int {
	if ss.tags.InUse() {
		return ss.tagShard
	}
	return ss.randShards
}

// home is the one shard the entries of logger tag idx (not 0) are written to: its entries
// stay in order, whatever goroutines write them. Tags share a shard only when there are
// more of them than shards from tagShard on; a stream with fewer than two such shards (a
// budget of a few batches) spreads the tags over all its shards, the stream's own tag's
// too, rather than have them all take turns in one.
func (ss *shards) home(idx uint16) int {
	if n := len(ss.all) - ss.tagShard; n >= 2 {
		return ss.tagShard + int(idx-1)%n
	}
	return int(idx) % len(ss.all)
}

// weightKey has every shard's encoder write an entry's sample weight under key.
func (ss *shards) weightKey(key []byte) {
	for i := range ss.all {
		ss.all[i].enc.WeightKey = key
	}
}

// taken is the entries taken in (shard.counts) over every shard, read without the shards'
// locks, for a writer that holds one: good but for the entries being written at the moment.
func (ss *shards) taken() uint64 {
	var n uint64
	for i := range ss.all {
		taken, _ := ss.all[i].counts()
		n += taken
	}
	return n
}
