package stream

import (
	"slices"
	"sync/atomic"
	"time"

	"github.com/fluentcore/fluentcore/internal/degrade"
	"github.com/fluentcore/fluentcore/internal/forward"
	"github.com/fluentcore/fluentcore/internal/msgpenc"
	"github.com/fluentcore/fluentcore/internal/outcome"
	"github.com/fluentcore/fluentcore/internal/ring"
	"github.com/fluentcore/fluentcore/internal/tagtable"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zapcore"
)

// Policy is what makes a stream's write path the info stream's or the err stream's:
// its admission (floors.go), which the info stream's (the root's infoPolicy, degrade.go) has
// admit and thin under backpressure and the err stream's (ErrPolicy, err_policy.go) has keep
// every entry whole and wake its sender at each write, and the figures it adds to Stats. A
// policy is told what happened and answers; it never reaches back into the stream. What the
// stream cannot carry is its overflow's (spill.go).
type Policy interface {
	Admission
	// Report adds the policy's own figures to the stream's Stats.
	Report(st *Stats)
}

var _ Policy = (*ErrPolicy)(nil)

// Stream is one of the two streams: its shards, which batch a writer may take (floors,
// reserve), its ring, its senders, its flush policy, its counts and its policy. Write,
// Stats, Flush, FlushTick, Observe and Usage are safe for concurrent use (none of them
// from a marshaler running inside Write: it holds a shard's lock); WeighWith is called
// before the first Write, Abandon once the senders have stopped.
type Stream struct {
	ID     ID
	Tag    string          // the stream's own tag, of its entries without a logger tag
	tags   *tagtable.Table // the logger tags', shared with the other stream
	shards *shards
	// Ring holds the stream's batches: free, queued in sealing order, held, finished, and
	// what Sync waits for.
	Ring     *ring.Ring
	floors   *tagFloors // the batches each logger tag holds, and the last free ones kept from a flood
	Reserve  *reserve   // the free batches kept for the entries the policy keeps whole
	sealAt   int        // a batch this full is sealed right away
	entryCap int        // largest encoded entry accepted
	// firstPass is the budget an entry is encoded within, into its batch: entryCap, or
	// for a stream that cuts oversized entries, what Cap may cut (msgpenc.FirstPass).
	firstPass msgpenc.Budget
	weights   weights       // the entries' sample weights (Degrade.WeightKey; none without)
	Closed    atomic.Bool   // set by the sink's Close: later entries are dropped as closed (info) or spilled (err)
	clock     zapcore.Clock // Settings.Clock: the time of its attempts, waits and deadlines

	policy Policy
	// over is what the stream does with what it cannot carry: drop it (info) or wait, cut
	// and spill it (err); its senders' route is the same value's.
	over    Overflow
	Senders Senders  // one per connection; the err stream has one
	flusher *flusher // when partly filled batches are sealed
	sends   sendCounts
	Counts  *Counts
}

// New makes stream id with budget bytes of batches, sending on fwds: its entries
// without a logger tag go under its own tag in tags (index 0), what it cannot carry to the
// overflow carry builds, and its send times to sendDuration.
func New(id ID, tags *tagtable.Table, budget int, s Settings, policy Policy, carry Carrier, sendDuration prometheus.Observer, fwds ...*forward.Forwarder) *Stream {
	nb := max(budget/s.BatchBytes, 2)
	st := &Stream{
		ID:       id,
		Tag:      tags.TagOf(0, int(id)),
		tags:     tags,
		policy:   policy,
		shards:   newShards(nb, tags, s.Enc),
		sealAt:   s.BatchBytes - s.BatchBytes/16,
		entryCap: s.EntryBytes,
		clock:    s.Clock,
	}
	st.Ring = ring.New(nb, s.BatchBytes, len(fwds), ring.Hooks{Finished: st.finished, Merged: func(b *ring.Batch) { st.floors.unclaim(b) }})
	st.floors = newTagFloors(tags, st.Ring)
	st.Reserve = newReserve(st.Ring, policy, st.sealAt)
	st.Counts = newCounts(id, tags, st.shards, s.FlushInterval, s.Clock.Now())
	st.sends.duration, st.sends.clock = sendDuration, s.Clock
	over, route := carry(st.Ring, st, s.Clock)
	st.over = over
	st.firstPass = msgpenc.FirstPass(s.EntryBytes, over.cutsOversized())
	st.flusher = newFlusher(st.Ring, st, over)
	// The connections hold at most all but randShards of the batches in flight together:
	// that many stay out of flight, for the writers to fill and the senders to take next
	// (the logger tags' shards are not counted: a core without tags keeps its window).
	window := nb - st.shards.randShards
	for _, f := range fwds {
		st.Senders = append(st.Senders, newSender(f, st.Ring, st, route, st.flusher, &st.sends, s.Clock, window))
	}
	st.flusher.senders = st.Senders
	return st
}

// mayTake reports whether a writer of tag may take a free batch: always, but for a tag at
// its floor (tagFloors.at). An entry the policy keeps whole passes too, while it reserves:
// it is no flood, and the last batches are kept for such entries whatever their tag (see
// takeFor).
func (s *Stream) mayTake(ent *zapcore.Entry, tag uint16) bool {
	return !s.floors.at(tag) || s.policy.Reserves() && s.policy.KeepsWhole(ent.Level, tag, ent.Message)
}

// tagOf returns the Forward tag of a batch with tag index idx.
func (s *Stream) tagOf(idx uint16) string {
	if idx == 0 {
		return s.Tag
	}
	return s.tags.TagOf(idx, int(s.ID))
}

// WeighWith has the stream weigh each entry it encodes and its encoders write the weight
// under key (the info stream with Degrade.WeightKey): weigh weighs an entry, unweigh gives
// a weight back. Call it before the first Write: the encoders read the key without a lock.
func (s *Stream) WeighWith(key []byte, weigh func(zapcore.Level, uint16, string) uint32, unweigh func(zapcore.Level, uint16, string, uint32)) {
	s.weights = weights{weigh: weigh, unweigh: unweigh}
	s.shards.weightKey(key)
}

// Stats reads the stream's counters and gauges at the sink's clock's now. The outcomes
// (delivered, spilled, dropped) are read before Entries (Counts.read).
func (s *Stream) Stats() Stats {
	now := s.clock.Now()
	st := Stats{
		Dropped:       make(map[string]uint64, outcome.NumReasons),
		Delivered:     s.Counts.Delivered.Load(),
		Spilled:       s.Counts.spilled.Load(),
		Replayed:      s.sends.replayed.Load(),
		Duplicated:    s.sends.duplicated.Load(),
		BufferedBytes: s.Buffered(),
		CapacityBytes: s.Capacity(),
		SentBatches:   s.sends.sentBatches.Load(),
		SentBytes:     s.sends.sentBytes.Load(),
		SendErrors:    s.sends.sendErrors.Load(),
		Reconnects:    s.sends.reconnects.Load(),
	}
	var busy int64 // when the oldest send under way began
	for _, snd := range s.Senders {
		st.HandshakeFailures += snd.fwd.Status().HandshakeFailures()
		if at := snd.fwd.Status().BusySince(); at != 0 && (busy == 0 || at < busy) {
			busy = at
		}
	}
	if busy != 0 {
		st.SendInProgress = max(now.Sub(time.Unix(0, busy)), 0)
	}
	st.Servers = s.serverStats()
	s.Counts.read(&st, now, s.Closed.Load())
	if at := oldestOpened(s.Ring); at != 0 {
		st.OldestPending = max(now.Sub(time.Unix(0, at)), 0)
	}
	st.AdmitRatio = 1
	s.policy.Report(&st)
	if st.Capacity > 0 && s.Counts.stalled(now, &st) {
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
func (s *Stream) serverStats() []Server {
	eps := s.Senders[0].fwd.Servers()
	rows := make([]Server, 0, len(eps))
	row := make([]int, len(eps)) // endpoint -> its address's row
	for i, ep := range eps {
		r := slices.IndexFunc(rows, func(st Server) bool { return st.Addr == ep.Addr })
		if r < 0 {
			r = len(rows)
			rows = append(rows, Server{Addr: ep.Addr})
		}
		row[i] = r
	}
	for _, snd := range s.Senders {
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

// countDelivered counts a frame delivered (Counts.frameDelivered), for the senders.
func (s *Stream) countDelivered(tag uint16, entries []byte, n int) {
	s.Counts.frameDelivered(tag, entries, n)
}

// Observe is what the info stream's degrade policy is told: the stream's counts, then the
// time. The time is read last, so that a step's length covers every entry its counts
// hold: reading the shards waits for their locks, and a writer that holds one may be off
// the CPU for a while, during which the others write on; timed before that wait, a step
// would count those entries against too short a span, and take a burst for a flood.
func (s *Stream) Observe() degrade.Observation {
	delivered := s.Counts.Delivered.Load()
	u := s.Usage()
	now := s.clock.Now()
	// The size of an entry: of those delivered, else of those held. Not from the bytes
	// sent: with acks, frames written and not acked yet counted against fewer entries, and
	// made an entry look up to several times its size.
	var entryBytes float64
	if delivered > 0 {
		entryBytes = float64(s.Counts.DeliveredBytes.Load()) / float64(delivered)
	} else if u.Held > 0 {
		entryBytes = float64(u.Buffered) / float64(u.Held)
	}
	return degrade.Observation{
		Now: now, Buffered: u.Buffered, Limit: s.Capacity(), Room: u.Room, Reserved: s.Reserve.Room(),
		DisconnectedFor: s.Senders.DisconnectedFor(now), Delivered: delivered, EntryBytes: entryBytes,
		Written: u.Taken,
	}
}
