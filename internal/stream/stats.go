package stream

import (
	"time"

	"github.com/fluentcore/fluentcore/internal/outcome"
)

// Stats are a stream's counters and gauges, read at once at its clock's now (Stream.Stats;
// its policy adds its own, Policy.Report). The root hands them to users as StreamStats,
// whose fields document each, with the logger tags' counters (tagtable.TotalsOf); Recent
// are the counts its recent windows are read from.
type Stats struct {
	Entries, Delivered, Truncated, TagOverflow uint64
	Spilled, Replayed, Duplicated              uint64
	Dropped                                    map[string]uint64
	SpillBytes                                 int64
	SpillCorruptSegments                       uint64
	BufferedBytes, CapacityBytes               int64
	Pending                                    uint64
	OldestPending, SendInProgress              time.Duration
	Degraded                                   bool
	DegradeTransitions                         uint64
	Dropping                                   bool
	KeepRatio, AdmitRatio, Capacity            float64
	SentBatches, SentBytes, SendErrors         uint64
	Reconnects, HandshakeFailures              uint64
	Servers                                    []Server
	Recent                                     outcome.Counts
}

// Server is one server's numbers within a stream: its connections and frames in flight
// now, the entries delivered to it, and when it last took a frame.
type Server struct {
	Addr                        string
	Connections, FramesInFlight int
	Delivered                   uint64
	LastDelivery                time.Time
}
