package fluentcore

// A stream is one of the sink's two: its buffers, its senders and its counters, with its
// policy (streamPolicy: the info stream's in degrade.go, the err stream's in err_spill.go).
// Its batches go round its ring (internal/ring.Ring). Its concerns each have a room: the
// write path (stream_write.go), its side of the ring (stream_batches.go: which batch a tag
// may take, what it holds), the flush policy (stream_flush.go: flusher), the senders
// (stream_sender.go: sender, one per connection) and what it cannot carry (stream_spill.go:
// its overflow, the err stream's spill).

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"sync/atomic"
	"time"

	"github.com/fluentcore/fluentcore/internal/forward"
	"github.com/fluentcore/fluentcore/internal/msgpenc"
	"github.com/fluentcore/fluentcore/internal/ring"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zapcore"
)

// streamPolicy is what makes a stream's write path the info stream's or the err stream's:
// the info stream's (infoPolicy, degrade.go) admits and thins under backpressure; the err
// stream's (errPolicy, err_spill.go) keeps every entry whole and has its sender seal every
// entry at once. A policy is told what happened and answers; it never reaches back into
// the stream. What the stream cannot carry is its overflow's (stream_spill.go).
type streamPolicy interface {
	// written is told of each entry put in a batch, and freed of the entries of each batch
	// that leaves the buffer (delivered, spilled or dropped).
	written()
	freed(entries int)
	// roomAdmitted reports whether the entries the stream gets now were admitted against
	// the room it has left: then a writer that finds no free batch waits for the other
	// shards' locks rather than skip them (writeElsewhere).
	roomAdmitted() bool
	// wakes reports whether a batch sealed with this share of the budget queued wakes the
	// policy: the stream then calls wakeWith with the entries it has taken in so far.
	wakes(queuedShare float64) bool
	wakeWith(taken uint64)
	// report adds the policy's own figures to the stream's Stats.
	report(st *StreamStats)
	// reserves reports whether the stream's reserve of free batches (stream.reserve) goes
	// only to entries keepsWhole reports true for (see takeFor): room that a flood the
	// policy thins cannot fill.
	reserves() bool
	keepsWhole(level zapcore.Level, tag uint16, msg string) bool
}

var (
	_ streamPolicy = (*infoPolicy)(nil)
	_ streamPolicy = (*errPolicy)(nil)
)

// stream is one of the two streams: its buffers, its sender and its counters.
type stream struct {
	id     streamID
	tag    string    // the stream's own tag, of its entries without a logger tag
	tags   *tagTable // the logger tags', shared with the other stream
	shards []shard
	// randShards is how many shards, the first ones, writers of the stream's own tag use
	// while the core has no logger tag; once it has one, tagShard: the shards from tagShard
	// on are the logger tags' (homeShard), at least half of them.
	randShards, tagShard int
	// tagBatches counts the batches each tag holds (open, queued, in flight), and
	// lightTags the tags that hold one, by tag index (0 to tags.max). While the
	// core has logger tags, a tag that holds two or more takes none of the last free
	// batches: one per light tag, from nb/8 to nb/4 (mayTake).
	tagBatches []atomic.Int32
	lightTags  atomic.Int32
	nbatchesR  [2]int // nb/8 and nb/4
	// ring holds the stream's batches: free, queued in sealing order, held, finished, and
	// what Sync waits for.
	ring     *ring.Ring
	sealAt   int // a batch this full is sealed right away
	entryCap int // largest encoded entry accepted
	reserve  int // free batches kept for the entries the policy keeps whole, while it reserves

	reservedOpen atomic.Int32  // reserved batches open in a shard now: the reserve less those
	givenBack    atomic.Uint64 // empty reserved batches given back from a shard (usage)
	// firstPass is the budget an entry is encoded within, into its batch: entryCap, or
	// for a stream that cuts oversized entries, what capEntry may cut (msgpenc.FirstPass).
	firstPass msgpenc.Budget
	// weigh weighs an entry before it is encoded, and unweigh gives an entry's weight back
	// to its key (Degrade.WeightKey; nil without).
	weigh   func(level zapcore.Level, tag uint16, msg string) uint32
	unweigh func(level zapcore.Level, tag uint16, msg string, w uint32)
	closed  atomic.Bool
	clock   zapcore.Clock // streamSettings.clock: the time of its attempts, waits and deadlines

	policy streamPolicy
	// over is what the stream does with what it cannot carry: drop it (info) or wait, cut
	// and spill it (err); its senders' route is the same value's.
	over    overflow
	senders senders  // one per connection; the err stream has one
	flusher *flusher // when partly filled batches are sealed
	sends   sendCounts

	delivered, spilled atomic.Uint64
	deliveredBytes     atomic.Uint64 // the encoded entries' bytes of the batches delivered (the degrade policy's entry size)
	waits              atomic.Uint64 // err writes that found no room and waited
	waitsOut           atomic.Uint64 // of those, the ones whose Err.MaxWait ran out
	contended          atomic.Bool   // writers met on shard 0 since the last flush tick

	// What only Stats and the clock read, after the fields of the write path and the
	// senders.
	flushInterval time.Duration // streamSettings.flushInterval
	// recent is the ring of counts KeepRatio and Dropping are read from, which the sink's
	// clock rolls once a second (rollRecent).
	recent recentWindow
}

// newStream makes stream id with budget bytes of batches, sending on fwds: its entries
// without a logger tag go under its own tag in tags (index 0), what it cannot carry to the
// overflow carry builds, and its send times to sendDuration.
func newStream(id streamID, tags *tagTable, budget int, s streamSettings, policy streamPolicy, carry carrier, sendDuration prometheus.Observer, fwds ...*forward.Forwarder) *stream {
	nb := max(budget/s.batchBytes, 2)
	nshards := min(2*runtime.GOMAXPROCS(0), nb/2)
	// Up to tagShards more shards for the logger tags, while open batches stay at most half
	// of them: a shard holds no batch until written to, so they cost nothing unused. Where
	// the budget leaves no room for them (many cores), the stream's own tag gives up half of
	// its shards to the logger tags once there is one.
	rshards := nshards
	nshards = max(nshards, min(nb/2, nshards+tagShards))
	tagShard := min(rshards, nshards-nshards/2)
	st := &stream{
		id:         id,
		tag:        tags.tagOf(0, id),
		tags:       tags,
		tagBatches: make([]atomic.Int32, tags.max+1),
		policy:     policy,
		shards:     make([]shard, nshards),
		randShards: rshards,
		nbatchesR:  [2]int{nb / 8, nb / 4},
		tagShard:   tagShard,
		sealAt:     s.batchBytes - s.batchBytes/16,
		entryCap:   s.entryBytes,
		reserve:    reserveOf(nb),
		clock:      s.clock,

		flushInterval: s.flushInterval,
	}
	st.ring = ring.New(nb, s.batchBytes, len(fwds), ring.Hooks{Finished: st.finished, Merged: st.unclaim})
	st.recent.start(s.clock.Now())
	st.sends.duration, st.sends.clock = sendDuration, s.clock
	over, route := carry(st.ring, st, s.clock)
	st.over = over
	st.firstPass = msgpenc.FirstPass(s.entryBytes, over.cutsOversized())
	st.flusher = newFlusher(st.ring, st, over)
	// The connections hold at most all but randShards of the batches in flight together:
	// that many stay out of flight, for the writers to fill and the senders to take next
	// (the logger tags' shards are not counted: a core without tags keeps its window).
	window := nb - st.randShards
	for _, f := range fwds {
		st.senders = append(st.senders, newSender(f, st.ring, st, route, st.flusher, &st.sends, s.clock, window))
	}
	st.flusher.senders = st.senders
	for i := range st.shards {
		sh := &st.shards[i]
		sh.enc = newMsgpEncoder(s.enc)
	}
	return st
}

// tagShards is how many shards a stream adds for the logger tags, budget permitting: each
// tag writes into one shard (homeShard), so that many tags logging at once rarely share
// one, whose batch would then hold a run at each change of tag (see batch.accepts).
const tagShards = 16

// mayTake reports whether a writer of tag may take a free batch: always, but while the
// core has logger tags, a tag that holds two batches or more takes none of the last few,
// kept for the tags that hold one (a batch each, from nb/8 to nb/4 of them). So a flooding
// tag, whose shard would take every batch the sender frees, leaves those batches to the
// rare tags that fill theirs at the same moment: a rare tag is not left without a batch
// while the sender frees them one by one.
//
// An entry the policy keeps whole passes too, while it reserves: it is no flood, and the
// last batches are kept for such entries whatever their tag (see takeFor).
func (s *stream) mayTake(ent *zapcore.Entry, tag uint16) bool {
	return !s.atTagFloor(tag) || s.policy.reserves() && s.policy.keepsWhole(ent.Level, tag, ent.Message)
}

// atTagFloor reports whether tag holds two batches or more while the free ones are down to
// tagFloor: it may take no more, except for entries the policy keeps whole.
func (s *stream) atTagFloor(tag uint16) bool {
	return s.tags.inUse.Load() && s.tagBatches[tag].Load() >= 2 && s.ring.Free() <= s.tagFloor()
}

// tagFloor is how many of the free batches a tag that holds two or more may not take
// (mayTake), while the core has logger tags; 0 otherwise.
func (s *stream) tagFloor() int {
	if !s.tags.inUse.Load() {
		return 0
	}
	return max(s.nbatchesR[0], min(int(s.lightTags.Load()), s.nbatchesR[1]))
}

// tagHeld adds d (1 or -1) to the batches tag holds, and keeps lightTags.
func (s *stream) tagHeld(tag uint16, d int32) {
	switch n := s.tagBatches[tag].Add(d); {
	case n == 1:
		s.lightTags.Add(1) // from 0 or from 2
	case d > 0 && n == 2, d < 0 && n == 0:
		s.lightTags.Add(-1)
	}
}

// claim makes b a batch of tag, counted in tag's batches, if it is empty: a batch counts
// in the batches of the tag whose writer opened it, whatever tags it holds later. The
// caller holds b (its shard's lock).
func (s *stream) claim(b *ring.Batch, tag uint16) {
	if b.Claimed && b.Tag == tag || b.N > 0 {
		return
	}
	s.unclaim(b)
	b.Tag, b.Claimed = tag, true
	s.tagHeld(tag, 1)
}

// unclaim takes b out of its tag's batches: it is finished, or merged into another.
func (s *stream) unclaim(b *ring.Batch) {
	if b.Claimed {
		s.tagHeld(b.Tag, -1)
	}
	b.Claimed = false
}

// ownShards is how many shards writers of the stream's own tag pick from under contention:
// randShards, or while the core has logger tags, those before tagShard.
func (s *stream) ownShards() int {
	if s.tags.inUse.Load() {
		return s.tagShard
	}
	return s.randShards
}

// tagOf returns the Forward tag of a batch with tag index idx.
func (s *stream) tagOf(idx uint16) string {
	if idx == 0 {
		return s.tag
	}
	return s.tags.tagOf(idx, s.id)
}

// homeShard is the one shard the entries of logger tag idx (not 0) are written to: its
// entries stay in order, whatever goroutines write them. Tags share a shard only when
// there are more of them than shards from tagShard on; a stream with fewer than two such
// shards (a budget of a few batches) spreads the tags over all its shards, the stream's
// own tag's too, rather than have them all take turns in one.
func (s *stream) homeShard(idx uint16) int {
	if n := len(s.shards) - s.tagShard; n >= 2 {
		return s.tagShard + int(idx-1)%n
	}
	return int(idx) % len(s.shards)
}

// reserveFrom is the fewest batches a stream must have to keep one of them in reserve (see
// takeFor): then it holds no more than 1/64 of the budget, the margin the adaptive policy
// keeps in its count anyway. A larger reserve is room that the end of every burst leaves
// unused, which the default would then deliver less than DegradeOff.
const reserveFrom = 64

func reserveOf(nbatches int) int {
	if nbatches >= reserveFrom {
		return 1
	}
	return 0
}

// reservedBytes is the room of the batches held in reserve now, which a flood the policy
// thins cannot take; the shedder's margin is this. Not the logger tags' floor (mayTake),
// though a flooding tag cannot take it either: the floor is kept from one tag for the
// others, and counted as margin it would lower the step's budget for every tag, thinning
// the other tags' entries too. The flood's entries past the floor are dropped as
// queue_full instead.
func (s *stream) reservedBytes() int64 {
	if s.reserve == 0 || !s.policy.reserves() {
		return 0
	}
	return int64(s.reserve * s.sealAt)
}

// weighWith has the stream weigh each entry it encodes and its encoders write the weight
// under key (the info stream with Degrade.WeightKey): weigh weighs an entry, unweigh gives
// a weight back.
func (s *stream) weighWith(key []byte, weigh func(zapcore.Level, uint16, string) uint32, unweigh func(zapcore.Level, uint16, string, uint32)) {
	s.weigh, s.unweigh = weigh, unweigh
	for i := range s.shards {
		s.shards[i].enc.weightKey = key
	}
}

// weighFor gives enc the weight of the entry of tag it is about to encode. The level and
// message are passed, not the entry: handing its pointer to a function value would move
// every entry to the heap, and a logging call allocates nothing.
func (s *stream) weighFor(enc *msgpEncoder, ent *zapcore.Entry, tag uint16) {
	if s.weigh != nil {
		enc.weight = s.weigh(ent.Level, tag, ent.Message)
	}
}

// discard gives back the weight enc wrote for the entry of tag it just encoded, which the
// stream does not keep after all (it did not fit, or failed to encode): the entries its
// weight stood for besides itself pass back to its key, so that the next kept entry
// carries them and the weights still add up to what was logged.
func (s *stream) discard(enc *msgpEncoder, ent *zapcore.Entry, tag uint16) {
	if enc.weight > 1 {
		s.unweigh(ent.Level, tag, ent.Message, enc.weight-1)
	}
	enc.weight = 0
}

// lost passes an entry of tag Check kept, which the stream then dropped, to its key's next
// weight.
func (s *stream) lost(ent *zapcore.Entry, tag uint16) {
	if s.unweigh != nil {
		s.unweigh(ent.Level, tag, ent.Message, 1)
	}
}

// stats reads the stream's counters and gauges at the sink's clock's now. The outcomes
// (delivered, spilled, dropped) are read before Entries, each of which only grows and
// counts an entry before its outcome, so Pending is never negative.
func (s *stream) stats() StreamStats {
	now := s.clock.Now()
	st := StreamStats{
		Dropped:       make(map[string]uint64, numDropReasons),
		Delivered:     s.delivered.Load(),
		Spilled:       s.spilled.Load(),
		Replayed:      s.sends.replayed.Load(),
		Duplicated:    s.sends.duplicated.Load(),
		BufferedBytes: s.buffered(),
		CapacityBytes: s.capacity(),
		SentBatches:   s.sends.sentBatches.Load(),
		SentBytes:     s.sends.sentBytes.Load(),
		SendErrors:    s.sends.sendErrors.Load(),
		Reconnects:    s.sends.reconnects.Load(),
	}
	var busy int64 // when the oldest send under way began
	for _, snd := range s.senders {
		st.HandshakeFailures += snd.fwd.Status().HandshakeFailures()
		if at := snd.fwd.Status().BusySince(); at != 0 && (busy == 0 || at < busy) {
			busy = at
		}
	}
	if busy != 0 {
		st.SendInProgress = max(now.Sub(time.Unix(0, busy)), 0)
	}
	st.Servers = s.serverStats()
	cur := s.recentCounts()
	var dropped [numDropReasons]uint64
	for i := range s.shards {
		for r := range dropped {
			dropped[r] += s.shards[i].dropped[r].Load()
		}
	}
	for i := range s.shards {
		sh := &s.shards[i]
		st.Entries += sh.entries.Load()
		st.Truncated += sh.truncated.Load()
		st.TagOverflow += sh.tagOverflow.Load()
	}
	var lost uint64 // every outcome but delivery
	for r, v := range dropped {
		st.Dropped[dropReason(r).String()] = v
		lost += v
	}
	lost += st.Spilled
	if st.Entries > st.Delivered+lost {
		st.Pending = st.Entries - st.Delivered - lost
	}
	if at := s.oldestOpened(); at != 0 {
		st.OldestPending = max(now.Sub(time.Unix(0, at)), 0)
	}
	st.recent = cur.minus(s.recent.before(now, keepWindow))
	st.KeepRatio = keepRatio(st.recent)
	// A closed stream drops nothing for backpressure any more, and its clock, which moves
	// the window, has stopped: it reads false rather than its last second for ever.
	st.Dropping = !s.closed.Load() && cur.minus(s.recent.before(now, dropWindow)).pressed > 0
	st.Tags = s.tags.stats(s.id)
	st.AdmitRatio = 1
	s.policy.report(&st)
	if st.Capacity > 0 && s.stalled(now, &st) {
		st.Capacity = 0
	}
	return st
}

// stallAfter is how long a stream that holds entries may deliver nothing before Stats
// reports its Capacity as 0: more than the gaps between a healthy sender's frames, less than
// a scrape interval.
const stallAfter = time.Second

// stalled reports whether the stream delivers nothing at now, by st: an entry has waited
// longer than Transport.FlushInterval and stallAfter, and no server has taken a frame for stallAfter.
func (s *stream) stalled(now time.Time, st *StreamStats) bool {
	if st.Pending == 0 || st.OldestPending <= s.flushInterval+stallAfter {
		return false
	}
	for _, sv := range st.Servers {
		if now.Sub(sv.LastDelivery) <= stallAfter {
			return false
		}
	}
	return true
}

// oldestOpened returns when the oldest batch holding entries was opened (unix nanos), 0 if
// none holds any.
func (s *stream) oldestOpened() int64 {
	var oldest int64
	for _, b := range s.ring.Batches() {
		if at := b.Opened.Load(); at != 0 && (oldest == 0 || at < oldest) {
			oldest = at
		}
	}
	return oldest
}

// recentCounts returns the stream's cumulative counts for its recent windows; the drops are
// read before the entries, which count each entry first.
func (s *stream) recentCounts() recentCounts {
	var c recentCounts
	for i := range s.shards {
		sh := &s.shards[i]
		for r := range sh.dropped {
			v := sh.dropped[r].Load()
			c.dropped += v
			if backpressure(dropReason(r)) {
				c.pressed += v
			}
		}
	}
	for i := range s.shards {
		c.offered += s.shards[i].entries.Load()
	}
	return c
}

// rollRecent is the sink's clock's: once a second of the clock it takes the stream's counts
// for KeepRatio and Dropping. Only the clock's goroutine calls it.
func (s *stream) rollRecent(now time.Time) {
	if s.recent.due(now) {
		s.recent.roll(now, s.recentCounts())
	}
}

// serverStats sums the senders' connections, frames in flight and deliveries by server.
func (s *stream) serverStats() []ServerStats {
	eps := s.senders[0].fwd.Servers()
	rows := make([]ServerStats, 0, len(eps))
	row := make([]int, len(eps)) // endpoint -> its address's row
	for i, ep := range eps {
		r := slices.IndexFunc(rows, func(st ServerStats) bool { return st.Addr == ep.Addr })
		if r < 0 {
			r = len(rows)
			rows = append(rows, ServerStats{Addr: ep.Addr})
		}
		row[i] = r
	}
	for _, snd := range s.senders {
		fs := snd.fwd.Status()
		if i := fs.Server(); i >= 0 {
			rows[row[i]].Connections++
			rows[row[i]].FramesInFlight += fs.FramesInFlight()
		}
		for i := range eps {
			rows[row[i]].Delivered += fs.Delivered(i)
			if at := fs.LastTaken(i); at != 0 {
				if t := time.Unix(0, at); t.After(rows[row[i]].LastDelivery) {
					rows[row[i]].LastDelivery = t
				}
			}
		}
	}
	return rows
}

// countDrop counts an entry of tag dropped before it reached a shard (in Check).
func (s *stream) countDrop(r dropReason, tag tagRef) {
	sh := &s.shards[rand.N(len(s.shards))]
	sh.entries.Add(1)
	sh.dropped[r].Add(1)
	if tag.over {
		sh.tagOverflow.Add(1)
	}
	if c := s.tagCounts(tag.idx); c != nil {
		c.entries[s.id].Add(1)
		c.dropped[s.id].Add(1)
	}
}

// tagCounts returns the counters of logger tag idx, nil for the stream's own tag.
func (s *stream) tagCounts(idx uint16) *tagCounts {
	if idx == 0 {
		return nil
	}
	return &s.tags.counts[idx]
}

// droppedTag counts n entries of tag idx dropped (besides the stream's count by reason).
func (s *stream) droppedTag(idx uint16, n int) {
	if c := s.tagCounts(idx); c != nil {
		c.dropped[s.id].Add(uint64(n))
	}
}

// countDelivered counts a frame delivered: its n entries of tag and their bytes, for the
// stream and for its tag.
func (s *stream) countDelivered(tag uint16, entries []byte, n int) {
	s.deliveredBytes.Add(uint64(len(entries)))
	s.delivered.Add(uint64(n))
	if c := s.tagCounts(tag); c != nil {
		c.delivered[s.id].Add(uint64(n))
	}
}
