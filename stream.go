package fluentcore

// A stream is one of the sink's two: its buffers, its senders and its counters, with its
// policy (streamPolicy: the info stream's in degrade.go, the err stream's in err_spill.go).
// Its batches go round its ring (internal/ring.Ring). Its parts are types of their own:
// the shards (stream_shards.go), the tag floors and the reserve (stream_floors.go), the
// counts (stream_counts.go). Its concerns each have a room: the write path
// (stream_write.go), its side of the ring (stream_batches.go: which batch a tag may take,
// what it holds), the flush policy (stream_flush.go: flusher), the senders
// (stream_sender.go: sender, one per connection) and what it cannot carry (stream_spill.go:
// its overflow, the err stream's spill).

import (
	"slices"
	"sync/atomic"
	"time"

	"github.com/fluentcore/fluentcore/internal/forward"
	"github.com/fluentcore/fluentcore/internal/msgpenc"
	"github.com/fluentcore/fluentcore/internal/outcome"
	"github.com/fluentcore/fluentcore/internal/ring"
	"github.com/fluentcore/fluentcore/internal/tagtable"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zapcore"
)

// streamPolicy is what makes a stream's write path the info stream's or the err stream's:
// its admission (stream_floors.go), which the info stream's (infoPolicy, degrade.go) has
// admit and thin under backpressure and the err stream's (errPolicy, err_spill.go) has keep
// every entry whole and wake its sender at each write, and the figures it adds to Stats. A
// policy is told what happened and answers; it never reaches back into the stream. What the
// stream cannot carry is its overflow's (stream_spill.go).
type streamPolicy interface {
	admission
	// report adds the policy's own figures to the stream's Stats.
	report(st *StreamStats)
}

var (
	_ streamPolicy = (*infoPolicy)(nil)
	_ streamPolicy = (*errPolicy)(nil)
)

// stream is one of the two streams: its shards, which batch a writer may take (floors,
// reserve), its ring, its senders, its flush policy, its counts and its policy.
type stream struct {
	id     streamID
	tag    string          // the stream's own tag, of its entries without a logger tag
	tags   *tagtable.Table // the logger tags', shared with the other stream
	shards *shards
	// ring holds the stream's batches: free, queued in sealing order, held, finished, and
	// what Sync waits for.
	ring     *ring.Ring
	floors   *tagFloors // the batches each logger tag holds, and the last free ones kept from a flood
	reserve  *reserve   // the free batches kept for the entries the policy keeps whole
	sealAt   int        // a batch this full is sealed right away
	entryCap int        // largest encoded entry accepted
	// firstPass is the budget an entry is encoded within, into its batch: entryCap, or
	// for a stream that cuts oversized entries, what capEntry may cut (msgpenc.FirstPass).
	firstPass msgpenc.Budget
	weights   weights // the entries' sample weights (Degrade.WeightKey; none without)
	closed    atomic.Bool
	clock     zapcore.Clock // streamSettings.clock: the time of its attempts, waits and deadlines

	policy streamPolicy
	// over is what the stream does with what it cannot carry: drop it (info) or wait, cut
	// and spill it (err); its senders' route is the same value's.
	over    overflow
	senders senders  // one per connection; the err stream has one
	flusher *flusher // when partly filled batches are sealed
	sends   sendCounts
	counts  *streamCounts
}

// newStream makes stream id with budget bytes of batches, sending on fwds: its entries
// without a logger tag go under its own tag in tags (index 0), what it cannot carry to the
// overflow carry builds, and its send times to sendDuration.
func newStream(id streamID, tags *tagtable.Table, budget int, s streamSettings, policy streamPolicy, carry carrier, sendDuration prometheus.Observer, fwds ...*forward.Forwarder) *stream {
	nb := max(budget/s.batchBytes, 2)
	st := &stream{
		id:       id,
		tag:      tags.TagOf(0, int(id)),
		tags:     tags,
		policy:   policy,
		shards:   newShards(nb, tags, s.enc),
		sealAt:   s.batchBytes - s.batchBytes/16,
		entryCap: s.entryBytes,
		clock:    s.clock,
	}
	st.ring = ring.New(nb, s.batchBytes, len(fwds), ring.Hooks{Finished: st.finished, Merged: func(b *ring.Batch) { st.floors.unclaim(b) }})
	st.floors = newTagFloors(tags, st.ring)
	st.reserve = newReserve(st.ring, policy, st.sealAt)
	st.counts = newStreamCounts(id, tags, st.shards, s.flushInterval, s.clock.Now())
	st.sends.duration, st.sends.clock = sendDuration, s.clock
	over, route := carry(st.ring, st, s.clock)
	st.over = over
	st.firstPass = msgpenc.FirstPass(s.entryBytes, over.cutsOversized())
	st.flusher = newFlusher(st.ring, st, over)
	// The connections hold at most all but randShards of the batches in flight together:
	// that many stay out of flight, for the writers to fill and the senders to take next
	// (the logger tags' shards are not counted: a core without tags keeps its window).
	window := nb - st.shards.randShards
	for _, f := range fwds {
		st.senders = append(st.senders, newSender(f, st.ring, st, route, st.flusher, &st.sends, s.clock, window))
	}
	st.flusher.senders = st.senders
	return st
}

// mayTake reports whether a writer of tag may take a free batch: always, but for a tag at
// its floor (tagFloors.at). An entry the policy keeps whole passes too, while it reserves:
// it is no flood, and the last batches are kept for such entries whatever their tag (see
// takeFor).
func (s *stream) mayTake(ent *zapcore.Entry, tag uint16) bool {
	return !s.floors.at(tag) || s.policy.reserves() && s.policy.keepsWhole(ent.Level, tag, ent.Message)
}

// tagOf returns the Forward tag of a batch with tag index idx.
func (s *stream) tagOf(idx uint16) string {
	if idx == 0 {
		return s.tag
	}
	return s.tags.TagOf(idx, int(s.id))
}

// weighWith has the stream weigh each entry it encodes and its encoders write the weight
// under key (the info stream with Degrade.WeightKey): weigh weighs an entry, unweigh gives
// a weight back.
func (s *stream) weighWith(key []byte, weigh func(zapcore.Level, uint16, string) uint32, unweigh func(zapcore.Level, uint16, string, uint32)) {
	s.weights = weights{weigh: weigh, unweigh: unweigh}
	s.shards.weightKey(key)
}

// stats reads the stream's counters and gauges at the sink's clock's now. The outcomes
// (delivered, spilled, dropped) are read before Entries (streamCounts.read).
func (s *stream) stats() StreamStats {
	now := s.clock.Now()
	st := StreamStats{
		Dropped:       make(map[string]uint64, outcome.NumReasons),
		Delivered:     s.counts.delivered.Load(),
		Spilled:       s.counts.spilled.Load(),
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
	s.counts.read(&st, now, s.closed.Load())
	if at := oldestOpened(s.ring); at != 0 {
		st.OldestPending = max(now.Sub(time.Unix(0, at)), 0)
	}
	st.AdmitRatio = 1
	s.policy.report(&st)
	if st.Capacity > 0 && s.counts.stalled(now, &st) {
		st.Capacity = 0
	}
	return st
}

// oldestOpened returns when the oldest batch of r holding entries was opened (unix nanos),
// 0 if none holds any.
func oldestOpened(r *ring.Ring) int64 {
	var oldest int64
	for _, b := range r.Batches() {
		if at := b.Opened.Load(); at != 0 && (oldest == 0 || at < oldest) {
			oldest = at
		}
	}
	return oldest
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

// countDelivered counts a frame delivered (streamCounts.frameDelivered), for the senders.
func (s *stream) countDelivered(tag uint16, entries []byte, n int) {
	s.counts.frameDelivered(tag, entries, n)
}
