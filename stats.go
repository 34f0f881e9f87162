package fluentcore

// dropReason is the closed set of reasons an entry is dropped; each is a key of
// StreamStats.Dropped (all of them, for both streams) and a value of the "reason" label of
// fluentcore_dropped_entries_total (those a stream can have: streamDropReasons, level_split.go), exported
// at 0 from the start.
type dropReason uint8

const (
	dropDegraded    dropReason = iota // info stream degraded, policy dropped it (in Check)
	dropSampled                       // info stream degraded, sampler dropped it (in Check)
	dropQueueFull                     // info buffers all in use
	dropTooLarge                      // entry larger than MaxEntryBytes (info)
	dropClosed                        // logged after Close (info)
	dropEncodeError                   // a panic no field could take (zap.Inline, EncodeLevel) while encoding
	dropShutdown                      // accepted, but not delivered before Close's deadline (info)
	dropSpillFailed                   // err entry the spill (or, without SpillDir, ErrFallback) failed to take
	dropSpillFull                     // err entry the spill refused: SpillMaxBytes reached (written to ErrFallback)
	numDropReasons
)

var dropReasonNames = [numDropReasons]string{
	"degraded", "sampled", "queue_full", "too_large", "closed", "encode_error", "shutdown",
	"spill_failed", "spill_full",
}

// String returns the reason's label value.
func (r dropReason) String() string { return dropReasonNames[r] }

// The label names the metrics set themselves (metrics.go): the stream on every series, the
// reason on the drops, the server on the servers' series, and client_golang's bucket bound
// on the send-duration histogram. A constant label of the same name would make the series
// unregistrable (the histogram's would panic), so resolve refuses them in ConstLabels.
const (
	labelStream = "stream"
	labelReason = "reason"
	labelServer = "server"
	labelTag    = "tag"
	labelBucket = "le"
)

// StreamStats are the counters and gauges of one stream. Counters only grow. At any quiet
// point Entries = Delivered + Spilled + the sum of Dropped + entries still in flight; after
// Close nothing is in flight. Replayed is outside that sum: replayed entries were counted
// as Spilled when they went to the spill (by this process, or by an earlier one that used
// the same SpillDir), so within one process Replayed <= Spilled + what the spill held at
// start.
type StreamStats struct {
	// Entries counts every entry at an enabled level that reached the core, including those
	// dropped before encoding.
	Entries uint64
	// Delivered counts entries the receiver has: acknowledged, on a stream that asks for acks
	// (the err stream by default; see StreamConfig.Acks), else written to the connection.
	Delivered uint64
	// Truncated counts err entries larger than MaxEntryBytes that were cut down to fit (their
	// largest values shortened and marked); they are also counted where they went
	// (Delivered, or Spilled). Always 0 on the info stream, which drops such entries.
	Truncated uint64
	// TagOverflow counts entries whose logger asked for a tag name past Config.MaxTags: they
	// went under the stream's own tag, with the name in the record (see TagOverflowKey), and
	// are also counted where they went (Delivered, Dropped, Spilled).
	TagOverflow uint64
	// Tags are the counters of each logger tag (Tag, Config.TagFromName) the stream has
	// sent under, by tag: at most Config.MaxTags; nil without any. The stream's own tag is
	// not among them: its entries are the stream's less these.
	Tags map[string]TagStats
	// Spilled counts entries set aside instead of delivered (err only): appended to the
	// durable spill with Config.SpillDir, written to ErrFallback without it.
	Spilled uint64
	// Replayed counts entries delivered from the durable spill (err only). They are not
	// counted in Delivered again.
	Replayed uint64
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
	// Degraded is true while the stream is degraded; DegradeTransitions counts changes.
	// Under DegradeAdaptive the stream is degraded before its first shed entry is counted
	// (and OnEvent has had EventDegraded by then), until it has shed none for a second.
	Degraded           bool
	DegradeTransitions uint64
	// KeepRatio is the share of the offered info entries DegradeAdaptive let through at
	// its last step (1 when it thinned nothing, and on the err stream). Capacity is the
	// delivery rate it measured while the buffer held a backlog, in entries per second (0
	// until measured, and on the err stream).
	KeepRatio, Capacity float64
	// SentBatches and SentBytes count frames written; SendErrors failed attempts;
	// Reconnects connections opened after the first.
	SentBatches, SentBytes, SendErrors, Reconnects uint64
	// HandshakeFailures counts new connections whose shared-key handshake failed (also
	// counted in SendErrors).
	HandshakeFailures uint64
	// Servers has one row per address in Config.Servers (or the one Addr), in their order;
	// an address listed twice has one row.
	Servers []ServerStats
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

// ServerStats are one server's numbers within a stream.
type ServerStats struct {
	// Addr is the server's address as configured.
	Addr string
	// Connections is how many of the stream's connections are open to it now.
	Connections int
	// FramesInFlight is how many frames on those connections wait for their acks now
	// (always 0 without RequireAck).
	FramesInFlight int
	// Delivered counts the entries it has taken: written, or acknowledged with RequireAck.
	// Entries replayed from the spill are counted too, so over all servers it is the
	// stream's Delivered + Replayed.
	Delivered uint64
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
