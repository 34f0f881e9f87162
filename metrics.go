package fluentcore

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics is the Prometheus collector of one Core: it reads the core's Stats at scrape
// time, so the hot path pays for no metric of its own. Its descriptors are built once, in
// newMetrics. The one metric the sink feeds itself is the send-duration histogram (a
// distribution cannot be read back from counters); newSendDuration makes it, New hands it
// to both.
type metrics struct {
	stats func() Stats

	entries, delivered, spilled, dropped, truncated   *prometheus.Desc
	replayed, spillBytes, spillCorrupt                *prometheus.Desc
	bufferBytes, capacityBytes, degraded, transitions *prometheus.Desc
	keepRatio, capacity                               *prometheus.Desc
	sentBatches, sentBytes, sendErrors, reconnects    *prometheus.Desc
	handshakeFailures                                 *prometheus.Desc
	serverConns, serverInFlight, serverDelivered      *prometheus.Desc
	sendDuration                                      *prometheus.HistogramVec
}

// newSendDuration returns fluentcore_send_duration_seconds, by stream.
func newSendDuration(constLabels prometheus.Labels) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:        "fluentcore_send_duration_seconds",
		Help:        "Time to write one frame and, with acks, receive its ack.",
		Buckets:     prometheus.ExponentialBuckets(0.0001, 4, 10),
		ConstLabels: constLabels,
	}, []string{"stream"})
}

func newMetrics(stats func() Stats, sendDuration *prometheus.HistogramVec, constLabels prometheus.Labels) *metrics {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("fluentcore_"+name, help, append([]string{"stream"}, labels...), constLabels)
	}
	return &metrics{
		stats:         stats,
		sendDuration:  sendDuration,
		entries:       d("entries_total", "Entries at an enabled level that reached the core, including those dropped before encoding."),
		delivered:     d("delivered_entries_total", "Entries the receiver has (written, or acknowledged when acks are on)."),
		spilled:       d("spilled_entries_total", "Entries set aside instead of delivered: appended to the durable spill (SpillDir), or written to ErrFallback."),
		dropped:       d("dropped_entries_total", "Entries dropped, by reason.", "reason"),
		truncated:     d("truncated_entries_total", "Err entries larger than MaxEntryBytes cut down to fit (and still delivered or spilled)."),
		replayed:      d("replayed_entries_total", "Spilled entries delivered from the durable spill (already counted as spilled)."),
		spillBytes:    d("spill_bytes", "Bytes of the durable spill's segment files."),
		spillCorrupt:  d("spill_corrupt_segments_total", "Spill segments whose damaged tail was skipped on replay."),
		bufferBytes:   d("buffer_bytes", "Bytes of entries buffered: in open batches and in sealed ones waiting to be sent."),
		capacityBytes: d("buffer_capacity_bytes", "The stream's buffer budget in bytes."),
		degraded:      d("degraded", "1 while the stream is degraded, else 0."),
		transitions:   d("degrade_transitions_total", "Changes between the normal and degraded states."),
		keepRatio:     d("keep_ratio", "Share of the offered info entries the adaptive degrade policy let through at its last step (1: nothing thinned)."),
		capacity:      d("capacity_entries_per_second", "Info entries per second the stream delivered while its buffer held a backlog, smoothed: what the adaptive degrade policy admits."),
		sentBatches:   d("sent_batches_total", "Forward frames written to a receiver."),
		sentBytes:     d("sent_bytes_total", "Bytes of Forward frames written to a receiver."),
		sendErrors:    d("send_errors_total", "Failed attempts to send a frame (dial, write or ack)."),
		reconnects:    d("reconnects_total", "Connections opened after the first one."),
		handshakeFailures: d("handshake_failures_total",
			"New connections whose shared-key handshake failed: rejected credentials, a PONG that does not prove the key, or no PONG."),
		serverConns:    d("server_connections", "The stream's connections open to the server now.", "server"),
		serverInFlight: d("server_frames_in_flight", "Frames written to the server that wait for their acks now (RequireAck).", "server"),
		serverDelivered: d("server_delivered_entries_total",
			"Entries the server has taken (written, or acknowledged when acks are on), spill replays included.", "server"),
	}
}

// Describe implements prometheus.Collector.
func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.entries, m.delivered, m.spilled, m.dropped, m.truncated, m.replayed, m.spillBytes, m.spillCorrupt, m.bufferBytes,
		m.capacityBytes, m.degraded, m.transitions, m.keepRatio, m.capacity, m.sentBatches, m.sentBytes, m.sendErrors, m.reconnects, m.handshakeFailures,
		m.serverConns, m.serverInFlight, m.serverDelivered} {
		ch <- d
	}
	m.sendDuration.Describe(ch)
}

// Collect implements prometheus.Collector.
func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	all := m.stats()
	for id, st := range [numStreams]StreamStats{infoStream: all.Info, errStream: all.Err} {
		name := streamID(id).String()
		counter := func(d *prometheus.Desc, v uint64, labels ...string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), append([]string{name}, labels...)...)
		}
		gauge := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, name)
		}
		counter(m.entries, st.Entries)
		counter(m.delivered, st.Delivered)
		counter(m.spilled, st.Spilled)
		for _, r := range streamDropReasons[id] {
			counter(m.dropped, st.Dropped[r.String()], r.String())
		}
		if streamID(id) == errStream { // the info stream drops what is too large
			counter(m.truncated, st.Truncated)
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
		if streamID(id) == infoStream { // the err stream never sheds
			gauge(m.keepRatio, st.KeepRatio)
			gauge(m.capacity, st.Capacity)
		}
		counter(m.sentBatches, st.SentBatches)
		counter(m.sentBytes, st.SentBytes)
		counter(m.sendErrors, st.SendErrors)
		counter(m.reconnects, st.Reconnects)
		counter(m.handshakeFailures, st.HandshakeFailures)
		for _, sv := range st.Servers {
			ch <- prometheus.MustNewConstMetric(m.serverConns, prometheus.GaugeValue, float64(sv.Connections), name, sv.Addr)
			ch <- prometheus.MustNewConstMetric(m.serverInFlight, prometheus.GaugeValue, float64(sv.FramesInFlight), name, sv.Addr)
			counter(m.serverDelivered, sv.Delivered, sv.Addr)
		}
	}
	m.sendDuration.Collect(ch)
}
