package fluentcore

// A stream is one of the sink's two: its buffers, its senders and its counters, with its
// policy (streamPolicy: the info stream's in degrade.go, the err stream's in err_spill.go).
// Its batches go round its ring (internal/ring.Ring). Its parts are types of their own:
// the shards (stream_shards.go), the tag floors and the reserve (stream_floors.go), the
// counts (stream_counts.go). Its concerns each have a room: the write path
// (stream_write.go), its side of the ring (stream_batches.go: which batch a tag may take,
// what it holds), the flush policy (stream_flush.go), the senders (stream_sender.go) and
// the spill (stream_spill.go).

import (
	"slices"
	"sync/atomic"
	"time"

	"github.com/fluentcore/fluentcore/internal/forward"
	"github.com/fluentcore/fluentcore/internal/msgpenc"
	"github.com/fluentcore/fluentcore/internal/ring"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zapcore"
)

// streamPolicy is what makes a stream the info stream or the err stream: its admission, and
// what becomes of what it cannot carry. The info stream's (infoPolicy, degrade.go) drops
// what it cannot carry, counted by reason; the err stream's (errPolicy, err_spill.go) waits,
// cuts and spills instead, and has its sender seal every entry at once. A policy is told
// what happened and answers; it never reaches back into the stream. The err stream also
// holds its policy as errSpill, for the spill and replay paths the policy opens.
type streamPolicy interface {
	admission
	// roomWait is how long a writer that finds no free batch may wait for one; 0: not at
	// all, the entry is lost (losesToSpill says where) at once.
	roomWait() time.Duration
	// noRoom is told that a writer found no free batch while every connection fails: the
	// policy's sender may make room at once rather than wait out its backoff.
	noRoom()
	// cutsOversized reports whether an entry over MaxEntryBytes is cut down to fit rather
	// than dropped (too_large).
	cutsOversized() bool
	// losesToSpill reports whether entries the stream cannot carry go to the spill rather
	// than being dropped and counted by reason.
	losesToSpill() bool
	// sealsWhileFailing reports whether the clock seals partly filled batches while sends
	// have failed for failingFor: when sealed batches leave at once, to the spill.
	sealsWhileFailing(failingFor time.Duration) bool
	// spillDue reports whether batches whose sends have failed since failingSince go to
	// the spill at now and, if not, the longest the sender may wait for its next attempt.
	spillDue(failingSince, now time.Time) (due bool, within time.Duration)
	// replaying reports whether the durable spill holds frames: then it is the queue.
	replaying() bool
	// signals are what the stream's senders listen to besides their queue and their acks
	// (see errPolicy); nil channels, never ready, for a policy without them.
	signals() (wake, spillKick <-chan struct{}, evacuate <-chan chan struct{})
	// report adds the policy's own figures to the stream's Stats.
	report(st *StreamStats)
}

var (
	_ streamPolicy = (*infoPolicy)(nil)
	_ streamPolicy = (*errPolicy)(nil)
)

// stream is one of the two streams: its shards, which batch a writer may take (floors,
// reserve), its ring, its senders, its counts and its policy.
type stream struct {
	id     streamID
	tag    string    // the stream's own tag, of its entries without a logger tag
	tags   *tagTable // the logger tags', shared with the other stream
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
	senders   []*sender     // one per connection; the err stream has one
	clock     zapcore.Clock // streamSettings.clock: the time of its attempts, waits and deadlines

	policy streamPolicy
	admit  admission // policy's, as the write path asks it
	// errSpill is the err policy's spill, which only the paths its policy opens reach
	// (losesToSpill, spillDue, replaying, signals); nil on the info stream.
	errSpill *errPolicy

	counts                                         *streamCounts
	busy                                           atomic.Int32  // senders holding a batch (deliver)
	flushOwed                                      atomic.Bool   // a flush tick found the sender busy
	replayed                                       atomic.Uint64 // delivered from the durable spill
	duplicated                                     atomic.Uint64 // acked after their batch was spilled (stuckSpill)
	sentBatches, sentBytes, sendErrors, reconnects atomic.Uint64
	sendDuration                                   prometheus.Observer // this stream's histogram
}

// newStream makes stream id with budget bytes of batches, sending on fwds: its entries
// without a logger tag go under its own tag in tags (index 0), and its send times to
// sendDuration.
func newStream(id streamID, tags *tagTable, budget int, s streamSettings, policy streamPolicy, sendDuration prometheus.Observer, fwds ...*forward.Forwarder) *stream {
	nb := max(budget/s.batchBytes, 2)
	st := &stream{
		id:        id,
		tag:       tags.tagOf(0, id),
		tags:      tags,
		policy:    policy,
		admit:     policy,
		shards:    newShards(nb, tags, s.enc),
		sealAt:    s.batchBytes - s.batchBytes/16,
		entryCap:  s.entryBytes,
		firstPass: msgpenc.FirstPass(s.entryBytes, policy.cutsOversized()),
		clock:     s.clock,

		sendDuration: sendDuration,
	}
	st.ring = ring.New(nb, s.batchBytes, len(fwds), ring.Hooks{Finished: st.finished, Merged: func(b *ring.Batch) { st.floors.unclaim(b) }})
	st.floors = newTagFloors(tags, st.ring)
	st.reserve = newReserve(st.ring, policy, st.sealAt)
	st.counts = newStreamCounts(id, tags, st.shards, s.flushInterval, s.clock.Now())
	for _, f := range fwds {
		st.senders = append(st.senders, &sender{fwd: f, bo: f.NewBackoff(), out: make([]*ring.Batch, 0, nb), spare: make([]*ring.Batch, 0, nb)})
	}
	return st
}

// mayTake reports whether a writer of tag may take a free batch: always, but for a tag at
// its floor (tagFloors.at). An entry the policy keeps whole passes too, while it reserves:
// it is no flood, and the last batches are kept for such entries whatever their tag (see
// takeFor).
func (s *stream) mayTake(ent *zapcore.Entry, tag uint16) bool {
	return !s.floors.at(tag) || s.admit.reserves() && s.admit.keepsWhole(ent.Level, tag, ent.Message)
}

// tagOf returns the Forward tag of a batch with tag index idx.
func (s *stream) tagOf(idx uint16) string {
	if idx == 0 {
		return s.tag
	}
	return s.tags.tagOf(idx, s.id)
}

// weighWith has the stream weigh each entry it encodes and its encoders write the weight
// under key (the info stream with Degrade.WeightKey): weigh weighs an entry, unweigh gives
// a weight back.
func (s *stream) weighWith(key []byte, weigh func(zapcore.Level, uint16, string) uint32, unweigh func(zapcore.Level, uint16, string, uint32)) {
	s.weights = weights{weigh: weigh, unweigh: unweigh}
	s.shards.weightKey(key)
}

// sending returns the senders that send: the first forward.Forwarder.Sending of them (the
// others never start, and hold nothing).
func (s *stream) sending() []*sender { return s.senders[:s.senders[0].fwd.Sending()] }

// failing reports whether every connection of the stream is failing: nothing drains.
func (s *stream) failing() bool {
	for _, snd := range s.sending() {
		if !snd.fwd.Status().Failing() {
			return false
		}
	}
	return true
}

// disconnectedFor is how long the stream has had no working connection at now; 0 if it has
// one.
func (s *stream) disconnectedFor(now time.Time) time.Duration {
	d := s.senders[0].fwd.Status().DisconnectedFor(now)
	for _, snd := range s.sending()[1:] {
		d = min(d, snd.fwd.Status().DisconnectedFor(now))
	}
	return d
}

// lastError is the last send error of a connection, if one has one.
func (s *stream) lastError() error {
	for _, snd := range s.senders {
		if err := snd.fwd.Status().LastError(); err != nil {
			return err
		}
	}
	return nil
}

// stats reads the stream's counters and gauges at the sink's clock's now. The outcomes
// (delivered, spilled, dropped) are read before Entries (streamCounts.read).
func (s *stream) stats() StreamStats {
	now := s.clock.Now()
	st := StreamStats{
		Dropped:       make(map[string]uint64, numDropReasons),
		Delivered:     s.counts.delivered.Load(),
		Spilled:       s.counts.spilled.Load(),
		Replayed:      s.replayed.Load(),
		Duplicated:    s.duplicated.Load(),
		BufferedBytes: s.buffered(),
		CapacityBytes: s.capacity(),
		SentBatches:   s.sentBatches.Load(),
		SentBytes:     s.sentBytes.Load(),
		SendErrors:    s.sendErrors.Load(),
		Reconnects:    s.reconnects.Load(),
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
