package fluentcore

import (
	"github.com/prometheus/client_golang/prometheus"
)

// dropReason is the closed set of reasons an entry is dropped; each is a value of the
// "reason" label of fluentcore_dropped_entries_total, pre-initialised to 0.
type dropReason uint8

const (
	dropDegraded    dropReason = iota // info stream degraded, policy dropped it (in Check)
	dropSampled                       // info stream degraded, sampler dropped it (in Check)
	dropQueueFull                     // info buffers all in use
	dropTooLarge                      // entry larger than MaxEntryBytes (info)
	dropClosed                        // logged after Close (info)
	dropEncodeError                   // a marshaler panicked while encoding
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
	// Delivered counts entries the receiver has: written (or acknowledged, with RequireAck).
	Delivered uint64
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
	// BufferedBytes is the size of the batches waiting to be sent; CapacityBytes the
	// stream's buffer budget.
	BufferedBytes, CapacityBytes int64
	// Degraded is true while the stream is degraded; DegradeTransitions counts changes.
	Degraded           bool
	DegradeTransitions uint64
	// SentBatches and SentBytes count frames written; SendErrors failed attempts;
	// Reconnects connections opened after the first.
	SentBatches, SentBytes, SendErrors, Reconnects uint64
	// HandshakeFailures counts new connections whose shared-key handshake failed (also
	// counted in SendErrors).
	HandshakeFailures uint64
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

// metrics is the Prometheus collector of one Core. It reads the sink's own counters at
// scrape time, so the hot path pays for no metric of its own.
type metrics struct {
	sink *sink

	entries, delivered, spilled, dropped              *prometheus.Desc
	replayed, spillBytes, spillCorrupt                *prometheus.Desc
	bufferBytes, capacityBytes, degraded, transitions *prometheus.Desc
	sentBatches, sentBytes, sendErrors, reconnects    *prometheus.Desc
	handshakeFailures                                 *prometheus.Desc
	sendDuration                                      *prometheus.HistogramVec
}

func newMetrics(s *sink, constLabels prometheus.Labels) *metrics {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("fluentcore_"+name, help, append([]string{"stream"}, labels...), constLabels)
	}
	return &metrics{
		sink:          s,
		entries:       d("entries_total", "Entries at an enabled level that reached the core, including those dropped before encoding."),
		delivered:     d("delivered_entries_total", "Entries the receiver has (written, or acknowledged when acks are on)."),
		spilled:       d("spilled_entries_total", "Entries set aside instead of delivered: appended to the durable spill (SpillDir), or written to ErrFallback."),
		dropped:       d("dropped_entries_total", "Entries dropped, by reason.", "reason"),
		replayed:      d("replayed_entries_total", "Spilled entries delivered from the durable spill (already counted as spilled)."),
		spillBytes:    d("spill_bytes", "Bytes of the durable spill's segment files."),
		spillCorrupt:  d("spill_corrupt_segments_total", "Spill segments whose damaged tail was skipped on replay."),
		bufferBytes:   d("buffer_bytes", "Bytes of sealed batches waiting to be sent."),
		capacityBytes: d("buffer_capacity_bytes", "The stream's buffer budget in bytes."),
		degraded:      d("degraded", "1 while the stream is degraded, else 0."),
		transitions:   d("degrade_transitions_total", "Changes between the normal and degraded states."),
		sentBatches:   d("sent_batches_total", "Forward frames written to a receiver."),
		sentBytes:     d("sent_bytes_total", "Bytes of Forward frames written to a receiver."),
		sendErrors:    d("send_errors_total", "Failed attempts to send a frame (dial, write or ack)."),
		reconnects:    d("reconnects_total", "Connections opened after the first one."),
		handshakeFailures: d("handshake_failures_total",
			"New connections whose shared-key handshake failed: rejected credentials, a PONG that does not prove the key, or no PONG."),
		sendDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:        "fluentcore_send_duration_seconds",
			Help:        "Time to write one frame and, with acks, receive its ack.",
			Buckets:     prometheus.ExponentialBuckets(0.0001, 4, 10),
			ConstLabels: constLabels,
		}, []string{"stream"}),
	}
}

// Describe implements prometheus.Collector.
func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.entries, m.delivered, m.spilled, m.dropped, m.replayed, m.spillBytes, m.spillCorrupt, m.bufferBytes,
		m.capacityBytes, m.degraded, m.transitions, m.sentBatches, m.sentBytes, m.sendErrors, m.reconnects, m.handshakeFailures} {
		ch <- d
	}
	m.sendDuration.Describe(ch)
}

// Collect implements prometheus.Collector.
func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	for id := streamID(0); id < numStreams; id++ {
		st := m.sink.streams[id].stats()
		name := id.String()
		counter := func(d *prometheus.Desc, v uint64, labels ...string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), append([]string{name}, labels...)...)
		}
		gauge := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, name)
		}
		counter(m.entries, st.Entries)
		counter(m.delivered, st.Delivered)
		counter(m.spilled, st.Spilled)
		for r := dropReason(0); r < numDropReasons; r++ {
			counter(m.dropped, st.Dropped[r.String()], r.String())
		}
		counter(m.replayed, st.Replayed)
		gauge(m.spillBytes, float64(st.SpillBytes))
		counter(m.spillCorrupt, st.SpillCorruptSegments)
		gauge(m.bufferBytes, float64(st.BufferedBytes))
		gauge(m.capacityBytes, float64(st.CapacityBytes))
		deg := 0.0
		if st.Degraded {
			deg = 1
		}
		gauge(m.degraded, deg)
		counter(m.transitions, st.DegradeTransitions)
		counter(m.sentBatches, st.SentBatches)
		counter(m.sentBytes, st.SentBytes)
		counter(m.sendErrors, st.SendErrors)
		counter(m.reconnects, st.Reconnects)
		counter(m.handshakeFailures, st.HandshakeFailures)
	}
	m.sendDuration.Collect(ch)
}
