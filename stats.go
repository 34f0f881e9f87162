package fluentcore

import (
	"time"

	"github.com/fluentcore/fluentcore/internal/outcome"
	"github.com/fluentcore/fluentcore/internal/stream"
	"github.com/fluentcore/fluentcore/internal/tagtable"
)

// StreamStats are the counters and gauges of one stream. Counters only grow. At any quiet
// point Entries = Delivered + Spilled + the sum of Dropped + entries still in flight; after
// Close nothing is in flight. Replayed is outside that sum: replayed entries were counted
// as Spilled when they went to the spill (by this process, or by an earlier one that used
// the same Spill.Dir), so within one process Replayed <= Spilled + what the spill held at
// start; the entries still in flight are Pending. A StreamStats is a copy, taken by
// Core.Stats (and by each scrape) at the sink's clock's time: safe to keep and read from
// any goroutine. Its zero value is a stream that has seen nothing, except that the ratios
// of such a stream read 1; no field reports an error (SendErrors counts them).
type StreamStats struct {
	// Entries counts every entry at an enabled level that reached the core, including those
	// dropped before encoding.
	Entries uint64
	// Delivered counts entries the receiver has: acknowledged, on a stream that asks for acks
	// (the err stream by default; see StreamConfig.Acks), else written to the connection —
	// into its socket buffers, which a receiver that stopped reading does not empty (see
	// ServerStats.LastDelivery for what counts as the receiver taking them).
	Delivered uint64
	// Truncated counts err entries larger than Transport.MaxEntryBytes that were cut down to fit (their
	// largest values shortened and marked); they are also counted where they went
	// (Delivered, or Spilled). Always 0 on the info stream, which drops such entries.
	Truncated uint64
	// TagOverflow counts entries whose logger asked for a tag name past Config.Tags.Max: they
	// went under the stream's own tag, with the name in the record (see TagOverflowKey), and
	// are also counted where they went (Delivered, Dropped, Spilled).
	TagOverflow uint64
	// Tags are the counters of each logger tag (Tag, Config.Tags.FromName) the stream has
	// sent under, by tag: at most Config.Tags.Max; nil without any. The stream's own tag is
	// not among them: its entries are the stream's less these.
	Tags map[string]TagStats
	// Spilled counts entries set aside instead of delivered (err only): appended to the
	// durable spill with Config.Spill.Dir, written to Spill.Fallback without it.
	Spilled uint64
	// Replayed counts entries delivered from the durable spill (err only). They are not
	// counted in Delivered again.
	Replayed uint64
	// Duplicated counts err entries the receiver acknowledged after they had gone to the
	// spill: their frame waited for its ack while the connection was stuck for Spill.After
	// (or the err buffers were full), so they were spilled, and the ack came later. They are
	// counted as Spilled, not Delivered, and are at the receiver twice over: once from the
	// frame, once more if the durable spill replays them (or in Spill.Fallback's output).
	// Outside the sum of Entries.
	Duplicated uint64
	// Dropped counts dropped entries by reason: degraded, sampled, queue_full, too_large,
	// closed, encode_error, shutdown, spill_failed, spill_full. Every reason is present,
	// zero or not.
	Dropped map[string]uint64
	// SpillBytes is the size of the durable spill's segment files; SpillCorruptSegments
	// counts segments whose damaged tail was skipped on replay (err only).
	SpillBytes           int64
	SpillCorruptSegments uint64
	// BufferedBytes is the size of the entries buffered: in open batches, and in sealed
	// ones waiting to be sent; CapacityBytes the stream's buffer budget.
	BufferedBytes, CapacityBytes int64
	// Pending is how many entries the stream has taken and not yet delivered, spilled or
	// dropped: in its batches (open, queued, being sent, waiting for their acks), or in a
	// logging call that is still writing one (an err entry waiting for room). It is
	// Entries - Delivered - Spilled - DroppedTotal(), read so that it is never negative; 0
	// after Close.
	Pending uint64
	// OldestPending is how long the oldest pending entry in the stream's batches has been
	// there, on the sink's clock: the time since the first entry of the oldest batch not
	// yet finished was written (0 when none is pending). It is measured per batch, not per
	// entry, so that the write path pays nothing for it: entries moved forward into an
	// older batch while the sender cannot deliver count from that batch's start.
	OldestPending time.Duration
	// SendInProgress is how long the oldest send attempt now under way has lasted: a
	// frame's write (the dial and handshake included), or with acks the wait for its ack
	// (0 when none is under way). A stall shows here while it lasts; the send-duration
	// histogram has it only once it ends. Between the attempts of an outage (a dial
	// refused at once, then a backoff wait) it is 0: OldestPending and
	// ServerStats.LastDelivery show an outage.
	SendInProgress time.Duration
	// Degraded is true while the stream is degraded; DegradeTransitions counts changes.
	// Under DegradeAdaptive the stream is degraded before its first shed entry is counted
	// (and OnEvent has had EventDegraded by then), until it has shed none for a second. It
	// is the degrade policy's state: in an outage, when the buffer is full and entries are
	// dropped as queue_full with nothing shed, it stays false; Dropping and KeepRatio say
	// that the stream is not carrying what it is offered.
	Degraded           bool
	DegradeTransitions uint64
	// Dropping is true while the stream has dropped an entry for backpressure — shed by
	// the degrade policy (degraded, sampled), no room in the buffer (queue_full), or the
	// spill full (spill_full) — within the last second or two: since the sink's clock
	// last took its once-a-second count at least a second ago; false once the core is
	// closed. It has no event: OnEvent's EventDegraded and EventRecovered stay the degrade
	// policy's.
	Dropping bool
	// KeepRatio is the share of the entries offered to the stream (Entries) in the last
	// ten seconds or so that were not dropped, for any reason (degraded, sampled,
	// queue_full, too_large, closed, shutdown, ...): 1 when nothing was offered, 0 when
	// everything offered was dropped. The window is counted from the sink's clock, which
	// takes the counts once a second: it reaches back to the newest count at least ten
	// seconds old (to the core's start while it is younger), so it spans 10–11 s.
	KeepRatio float64
	// AdmitRatio is the share of the offered info entries DegradeAdaptive let through at
	// its last step (1 when it thinned nothing, under the other policies, and on the err
	// stream): the policy's own figure, where KeepRatio is what the stream kept.
	AdmitRatio float64
	// Capacity is the delivery rate DegradeAdaptive measured while the buffer held a
	// backlog, in entries per second (0 until measured, and on the err stream). It reads 0
	// while nothing is delivered — entries have been pending for longer than
	// Transport.FlushInterval and a second, and no frame has been taken for a second — rather than
	// the last measure, which would say the receiver takes what it no longer takes. The
	// policy itself still uses its measure (this is reporting only).
	Capacity float64
	// SentBatches and SentBytes count frames written; SendErrors failed attempts;
	// Reconnects connections opened after the first.
	SentBatches, SentBytes, SendErrors, Reconnects uint64
	// HandshakeFailures counts new connections whose shared-key handshake failed (also
	// counted in SendErrors).
	HandshakeFailures uint64
	// Servers has one row per server as configured (Config.Servers, or the one Addr), in
	// their order, keyed by its address as written: the addresses a name resolves to are
	// summed under it. An address listed twice has one row.
	Servers []ServerStats

	// recent is what the stream was offered and dropped within KeepRatio's window: the
	// collector sums it over its cores and takes KeepRatio from the sums.
	recent outcome.Counts
}

// TagStats are the counters of one logger tag on one stream (StreamStats.Tags).
type TagStats struct {
	// Entries counts the tag's entries at an enabled level that reached the core, those
	// shed in Check included.
	Entries uint64
	// Delivered counts those the receiver has (see StreamStats.Delivered).
	Delivered uint64
	// Dropped counts those dropped, whatever the reason (shed, queue_full, too_large, …;
	// StreamStats.Dropped has the reasons of the stream's entries of every tag).
	Dropped uint64
	// Spilled counts those set aside (err only; see StreamStats.Spilled).
	Spilled uint64
}

// streamStatsOf returns a stream's numbers as users get them, its logger tags' read from tags.
func streamStatsOf(s stream.Stats, tags *tagtable.Table, id stream.ID) StreamStats {
	st := StreamStats{
		Entries: s.Entries, Delivered: s.Delivered, Truncated: s.Truncated, TagOverflow: s.TagOverflow,
		Spilled: s.Spilled, Replayed: s.Replayed, Duplicated: s.Duplicated, Dropped: s.Dropped,
		SpillBytes: s.SpillBytes, SpillCorruptSegments: s.SpillCorruptSegments,
		BufferedBytes: s.BufferedBytes, CapacityBytes: s.CapacityBytes, Pending: s.Pending,
		OldestPending: s.OldestPending, SendInProgress: s.SendInProgress,
		Degraded: s.Degraded, DegradeTransitions: s.DegradeTransitions, Dropping: s.Dropping,
		KeepRatio: s.KeepRatio, AdmitRatio: s.AdmitRatio, Capacity: s.Capacity,
		SentBatches: s.SentBatches, SentBytes: s.SentBytes, SendErrors: s.SendErrors,
		Reconnects: s.Reconnects, HandshakeFailures: s.HandshakeFailures,
		recent: s.Recent,
		Tags:   tagtable.TotalsOf[TagStats](tags, int(id)),
	}
	st.Servers = make([]ServerStats, len(s.Servers))
	for i, sv := range s.Servers {
		st.Servers[i] = ServerStats(sv)
	}
	return st
}

// ServerStats are one server's numbers within a stream.
type ServerStats struct {
	// Addr is the server's address as configured.
	Addr string
	// Connections is how many of the stream's connections are open to it now.
	Connections int
	// FramesInFlight is how many frames on those connections wait for their acks now
	// (always 0 on a stream without acks).
	FramesInFlight int
	// Delivered counts the entries it has taken: written, or acknowledged on a stream with acks.
	// Entries replayed from the spill are counted too, so over all servers it is the
	// stream's Delivered + Replayed.
	Delivered uint64
	// LastDelivery is when it last took a frame of the stream (written, or acknowledged
	// on a stream with acks; a frame of the spill's replay too), on the sink's clock; the zero
	// time before the first. Without acks, once a write has timed out (the receiver read
	// nothing for Timeouts.Write), the frames then written into new connections are counted
	// in Delivered but move LastDelivery only once writes still succeed Timeouts.Write after
	// the last timeout: into a receiver that reads nothing, a write times out sooner, once
	// the socket buffers are full. An idle stream's grows old too: it says a server is not taking
	// entries only while some are pending.
	LastDelivery time.Time
}

// DroppedTotal returns the sum of Dropped over all reasons.
func (s StreamStats) DroppedTotal() uint64 {
	var n uint64
	for _, v := range s.Dropped {
		n += v
	}
	return n
}

// Stats holds the numbers of both streams, the same ones the Prometheus metrics expose.
type Stats struct {
	Info, Err StreamStats
}

// addCounters adds o's counters to s's, the servers' matched by address.
func (s *StreamStats) addCounters(o *StreamStats) {
	s.Entries += o.Entries
	s.Delivered += o.Delivered
	s.Truncated += o.Truncated
	s.Spilled += o.Spilled
	s.Replayed += o.Replayed
	s.Duplicated += o.Duplicated
	s.SpillCorruptSegments += o.SpillCorruptSegments
	s.DegradeTransitions += o.DegradeTransitions
	s.SentBatches += o.SentBatches
	s.SentBytes += o.SentBytes
	s.SendErrors += o.SendErrors
	s.Reconnects += o.Reconnects
	s.HandshakeFailures += o.HandshakeFailures
	if s.Dropped == nil {
		s.Dropped = make(map[string]uint64, len(o.Dropped))
	}
	for r, v := range o.Dropped {
		s.Dropped[r] += v
	}
	for _, sv := range o.Servers {
		p := s.server(sv.Addr)
		p.Delivered += sv.Delivered
		if sv.LastDelivery.After(p.LastDelivery) {
			p.LastDelivery = sv.LastDelivery
		}
	}
	s.TagOverflow += o.TagOverflow
	for tag, ts := range o.Tags {
		if s.Tags == nil {
			s.Tags = map[string]TagStats{}
		}
		t := s.Tags[tag]
		s.Tags[tag] = TagStats{t.Entries + ts.Entries, t.Delivered + ts.Delivered, t.Dropped + ts.Dropped, t.Spilled + ts.Spilled}
	}
}

// addGauges adds o's gauges to s's: amounts (and the window counts KeepRatio is taken from)
// are summed, Degraded and Dropping are either's, the ages the larger, AdmitRatio the
// lower. KeepRatio is left for the caller to take from the summed window counts.
func (s *StreamStats) addGauges(o *StreamStats) {
	s.SpillBytes += o.SpillBytes
	s.BufferedBytes += o.BufferedBytes
	s.CapacityBytes += o.CapacityBytes
	s.Capacity += o.Capacity
	s.Pending += o.Pending
	s.OldestPending = max(s.OldestPending, o.OldestPending)
	s.SendInProgress = max(s.SendInProgress, o.SendInProgress)
	s.Degraded = s.Degraded || o.Degraded
	s.Dropping = s.Dropping || o.Dropping
	s.AdmitRatio = min(s.AdmitRatio, o.AdmitRatio)
	s.recent.Offered += o.recent.Offered
	s.recent.Dropped += o.recent.Dropped
	s.recent.Pressed += o.recent.Pressed
	for _, sv := range o.Servers {
		p := s.server(sv.Addr)
		p.Connections += sv.Connections
		p.FramesInFlight += sv.FramesInFlight
	}
}

// server returns s's row for addr, adding it if there is none.
func (s *StreamStats) server(addr string) *ServerStats {
	for i := range s.Servers {
		if s.Servers[i].Addr == addr {
			return &s.Servers[i]
		}
	}
	s.Servers = append(s.Servers, ServerStats{Addr: addr})
	return &s.Servers[len(s.Servers)-1]
}
