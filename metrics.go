package fluentcore

import (
	"errors"
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics is the Prometheus collector of the cores on one Registerer that have the same
// ConstLabels: one core, or two while a config reload swaps cores (the new one made before
// the old one is closed). It reads its cores' Stats at scrape time, so the hot path pays for
// no metric of its own; its descriptors are built once, in newMetrics. The one metric the
// sinks feed themselves is the send-duration histogram (a distribution cannot be read back
// from counters), which its cores share.
//
// What it exports, so that a scraper sees neither a gap nor a counter going backwards when
// the cores are swapped: each counter is the sum over every core that has been in it (the
// live ones as they are now, those that left as they were when they left); each gauge is
// the sum over the live cores, what they hold now, except: degraded and dropping (1 if any
// live core is), oldest_pending_seconds and send_in_progress_seconds (the largest),
// degrade_admit_ratio (the lowest), keep_ratio (taken from the live cores' window counts
// summed: the share kept of everything they were offered) and
// last_send_success_timestamp_seconds (the latest over every core that has been in it, as
// a counter: a reload does not reset it to "never"). The last core to leave unregisters
// it; a core made after that registers a new one, from zero, as a new process would.
//
// A collector that is not registered (no Registerer, or the Registerer refused it) has its
// one core, which never leaves, so its numbers stay readable after Close. Its methods are
// safe for concurrent use.
type metrics struct {
	entries, delivered, spilled, dropped, truncated   *prometheus.Desc
	replayed, duplicated, spillBytes, spillCorrupt    *prometheus.Desc
	bufferBytes, capacityBytes, degraded, transitions *prometheus.Desc
	keepRatio, admitRatio, capacity, dropping         *prometheus.Desc
	pending, oldestPending, sendInProgress            *prometheus.Desc
	serverLastSuccess                                 *prometheus.Desc
	sentBatches, sentBytes, sendErrors, reconnects    *prometheus.Desc
	handshakeFailures                                 *prometheus.Desc
	serverConns, serverInFlight, serverDelivered      *prometheus.Desc
	tagOverflow, tagEntries, tagDelivered, tagDropped *prometheus.Desc // logger tags (tags.go)
	sendDuration                                      *prometheus.HistogramVec

	// reg is where it is registered, nil if nowhere; set before Register publishes it and
	// not changed after.
	reg  prometheus.Registerer
	gone chan struct{} // closed once the last core has left and it is unregistered

	mu      sync.Mutex
	members []*metricsMember
	retired Stats // the counters of the cores that left, summed; its gauges stay zero
	leaving bool  // the last core has left: a core that finds it waits for gone
}

// metricsMember is one core's place in a metrics collector. stats is nil until the core's
// sink exists; metrics.mu guards it.
type metricsMember struct{ stats func() Stats }

// joinMetrics returns the collector a new core is counted in, and the core's place in it.
// With reg nil it is a collector of the core's own, not registered. Otherwise it is the one
// already registered on reg with the same labels, or a new one registered there. The error
// is reg's refusal of a new one (another collector has the same names); the core then has a
// collector of its own, not registered.
func joinMetrics(reg prometheus.Registerer, constLabels prometheus.Labels) (*metrics, *metricsMember, error) {
	for {
		m := newMetrics(constLabels)
		mem, _ := m.join()
		if reg == nil {
			return m, mem, nil
		}
		m.reg = reg
		err := reg.Register(m)
		if err == nil {
			return m, mem, nil
		}
		m.reg = nil // never published: a refused collector is nobody else's
		var dup prometheus.AlreadyRegisteredError
		if !errors.As(err, &dup) {
			return m, mem, err
		}
		old, ok := dup.ExistingCollector.(*metrics)
		if !ok {
			return m, mem, err
		}
		if mem, ok := old.join(); ok {
			return old, mem, nil
		}
		<-old.gone // its last core has left: register anew once it is unregistered
	}
}

// join adds a core, whose numbers start once start gives them. It reports false if the
// collector's last core has already left.
func (m *metrics) join() (*metricsMember, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.leaving {
		return nil, false
	}
	mem := &metricsMember{}
	m.members = append(m.members, mem)
	return mem, true
}

// start makes stats the numbers of the core at mem.
func (m *metrics) start(mem *metricsMember, stats func() Stats) {
	m.mu.Lock()
	mem.stats = stats
	m.mu.Unlock()
}

// leave takes the core at mem out of the live cores, keeping its counters as they are
// now; the last core to leave unregisters the collector. A collector that is not
// registered keeps its core. Called once per core, by Close.
func (m *metrics) leave(mem *metricsMember) {
	if m.reg == nil {
		return
	}
	m.mu.Lock()
	i := slices.Index(m.members, mem)
	if i < 0 {
		m.mu.Unlock()
		return
	}
	if mem.stats != nil {
		st := mem.stats()
		m.retired.Info.addCounters(&st.Info)
		m.retired.Err.addCounters(&st.Err)
	}
	m.members = slices.Delete(m.members, i, i+1)
	m.leaving = len(m.members) == 0
	last := m.leaving
	m.mu.Unlock()
	if last { // outside mu: a Registerer may collect while it unregisters
		m.reg.Unregister(m)
		close(m.gone)
	}
}

// total returns what the collector exports: the counters of every core it has had, the
// gauges of the live ones. The live cores are read outside mu; a core that leaves
// meanwhile is counted once, by this read, and its counters are no lower at its leaving.
func (m *metrics) total() Stats {
	var t Stats
	m.mu.Lock()
	t.Info.addCounters(&m.retired.Info)
	t.Err.addCounters(&m.retired.Err)
	live := make([]func() Stats, 0, len(m.members))
	for _, mem := range m.members {
		if mem.stats != nil {
			live = append(live, mem.stats)
		}
	}
	m.mu.Unlock()
	t.Info.AdmitRatio, t.Err.AdmitRatio = 1, 1 // the lowest over the live cores; 1 with none
	for _, stats := range live {
		st := stats()
		t.Info.addCounters(&st.Info)
		t.Info.addGauges(&st.Info)
		t.Err.addCounters(&st.Err)
		t.Err.addGauges(&st.Err)
	}
	t.Info.KeepRatio, t.Err.KeepRatio = keepRatio(t.Info.recent), keepRatio(t.Err.recent)
	return t
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
	s.recent.offered += o.recent.offered
	s.recent.dropped += o.recent.dropped
	s.recent.pressed += o.recent.pressed
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

// sendDurationBuckets are the bounds of fluentcore_send_duration_seconds: 10 µs to about 42 s
// by factors of 4 (12 bounds, and +Inf). The lowest resolves an err frame acked on a
// local connection (tens of µs: a 100 µs floor read every one as "under 100 µs"); the
// highest is past AckTimeout's default (30 s) and WriteTimeout's (10 s), so that an
// attempt that ran into either lands in a bucket of its own, not in +Inf; factors of 4 keep
// the series as few as before (a stall in progress is send_in_progress_seconds').
var sendDurationBuckets = prometheus.ExponentialBuckets(0.00001, 4, 12)

// newMetrics returns a collector with no core, under constLabels, and its send-duration
// histogram (fluentcore_send_duration_seconds, by stream).
func newMetrics(constLabels prometheus.Labels) *metrics {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("fluentcore_"+name, help, append([]string{labelStream}, labels...), constLabels)
	}
	return &metrics{
		gone: make(chan struct{}),
		sendDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:        "fluentcore_send_duration_seconds",
			Help:        "Time to write one frame and, with acks, receive its ack.",
			Buckets:     sendDurationBuckets,
			ConstLabels: constLabels,
		}, []string{labelStream}),
		entries:       d("entries_total", "Entries at an enabled level that reached the core, including those dropped before encoding."),
		delivered:     d("delivered_entries_total", "Entries the receiver has (written, or acknowledged when acks are on)."),
		spilled:       d("spilled_entries_total", "Entries set aside instead of delivered: appended to the durable spill (SpillDir), or written to ErrFallback."),
		dropped:       d("dropped_entries_total", "Entries dropped, by reason.", labelReason),
		truncated:     d("truncated_entries_total", "Err entries larger than MaxEntryBytes cut down to fit (and still delivered or spilled)."),
		replayed:      d("replayed_entries_total", "Spilled entries delivered from the durable spill (already counted as spilled)."),
		duplicated:    d("duplicated_entries_total", "Err entries acknowledged by the receiver after they were spilled while their frame waited for its ack (counted as spilled; also in the spill or ErrFallback)."),
		spillBytes:    d("spill_bytes", "Bytes of the durable spill's segment files."),
		spillCorrupt:  d("spill_corrupt_segments_total", "Spill segments whose damaged tail was skipped on replay."),
		bufferBytes:   d("buffer_bytes", "Bytes of entries buffered: in open batches and in sealed ones waiting to be sent."),
		capacityBytes: d("buffer_capacity_bytes", "The stream's buffer budget in bytes."),
		degraded:      d("degraded", "1 while the stream's degrade policy has it degraded, else 0 (drops with nothing shed, as in an outage: dropping, keep_ratio)."),
		transitions:   d("degrade_transitions_total", "Changes between the normal and degraded states."),
		keepRatio: d("keep_ratio",
			"Share of the info entries offered in the last 10 s that were not dropped, for any reason (1: none offered, or none dropped; 0: all dropped)."),
		admitRatio: d("degrade_admit_ratio",
			"Share of the offered info entries the adaptive degrade policy let through at its last step (1: nothing thinned)."),
		capacity: d("capacity_entries_per_second",
			"Info entries per second the stream delivered while its buffer held a backlog, smoothed: what the adaptive degrade policy admits; 0 while nothing is delivered."),
		dropping: d("dropping",
			"1 while the stream has dropped entries for backpressure (degraded, sampled, queue_full, spill_full) in the last second, else 0."),
		pending: d("pending_entries",
			"Entries taken and not yet delivered, spilled or dropped: in the stream's buffers (open, queued, being sent, waiting for acks) or being written."),
		oldestPending: d("oldest_pending_seconds",
			"Age of the oldest entry in the stream's buffers not yet delivered, spilled or dropped (its batch's first entry); 0 when none."),
		sendInProgress: d("send_in_progress_seconds",
			"How long the oldest send attempt under way has lasted: a frame's dial and write, or the wait for its ack; 0 when none."),
		sentBatches: d("sent_batches_total", "Forward frames written to a receiver."),
		sentBytes:   d("sent_bytes_total", "Bytes of Forward frames written to a receiver."),
		sendErrors:  d("send_errors_total", "Failed attempts to send a frame (dial, write or ack)."),
		reconnects:  d("reconnects_total", "Connections opened after the first one."),
		handshakeFailures: d("handshake_failures_total",
			"New connections whose shared-key handshake failed: rejected credentials, a PONG that does not prove the key, or no PONG."),
		serverConns:    d("server_connections", "The stream's connections open to the server now.", labelServer),
		serverInFlight: d("server_frames_in_flight", "Frames written to the server that wait for their acks now (RequireAck).", labelServer),
		serverDelivered: d("server_delivered_entries_total",
			"Entries the server has taken (written, or acknowledged when acks are on), spill replays included.", labelServer),
		serverLastSuccess: d("last_send_success_timestamp_seconds",
			"Unix time when the server last took a frame of the stream (written, or acknowledged when acks are on); 0 before the first. Seconds since: time() - this.", labelServer),
		tagOverflow:  d("tag_overflow_total", "Entries whose logger asked for a tag name past MaxTags: sent under the stream's tag, the name in the record."),
		tagEntries:   d("tag_entries_total", "Entries of a logger tag that reached the core, those shed included (at most MaxTags tags).", labelTag),
		tagDelivered: d("tag_delivered_entries_total", "Entries of a logger tag the receiver has.", labelTag),
		tagDropped:   d("tag_dropped_entries_total", "Entries of a logger tag dropped, whatever the reason.", labelTag),
	}
}

// Describe implements prometheus.Collector.
func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.entries, m.delivered, m.spilled, m.dropped, m.truncated, m.replayed, m.duplicated, m.spillBytes, m.spillCorrupt, m.bufferBytes,
		m.capacityBytes, m.degraded, m.transitions, m.keepRatio, m.admitRatio, m.capacity, m.dropping, m.pending, m.oldestPending, m.sendInProgress,
		m.sentBatches, m.sentBytes, m.sendErrors, m.reconnects, m.handshakeFailures,
		m.serverConns, m.serverInFlight, m.serverDelivered, m.serverLastSuccess, m.tagOverflow, m.tagEntries, m.tagDelivered, m.tagDropped} {
		ch <- d
	}
	m.sendDuration.Describe(ch)
}

// Collect implements prometheus.Collector.
func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	all := m.total()
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
		for _, r := range streamDropReasons[id] {
			counter(m.dropped, st.Dropped[r.String()], r.String())
		}
		// Only the err stream spills, and cuts what is too large (the info stream drops it):
		// the info stream has none of these series, rather than zeros that read as "none yet".
		if streamID(id) == errStream {
			counter(m.spilled, st.Spilled)
			counter(m.replayed, st.Replayed)
			counter(m.duplicated, st.Duplicated)
			gauge(m.spillBytes, float64(st.SpillBytes))
			counter(m.spillCorrupt, st.SpillCorruptSegments)
			counter(m.truncated, st.Truncated)
		}
		gauge(m.bufferBytes, float64(st.BufferedBytes))
		gauge(m.capacityBytes, float64(st.CapacityBytes))
		gauge(m.pending, float64(st.Pending))
		gauge(m.oldestPending, st.OldestPending.Seconds())
		gauge(m.sendInProgress, st.SendInProgress.Seconds())
		gauge(m.degraded, boolGauge(st.Degraded))
		gauge(m.dropping, boolGauge(st.Dropping))
		counter(m.transitions, st.DegradeTransitions)
		if streamID(id) == infoStream { // the err stream never sheds
			gauge(m.keepRatio, st.KeepRatio)
			gauge(m.admitRatio, st.AdmitRatio)
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
			var last float64 // 0 before the first
			if !sv.LastDelivery.IsZero() {
				last = float64(sv.LastDelivery.UnixNano()) / 1e9
			}
			ch <- prometheus.MustNewConstMetric(m.serverLastSuccess, prometheus.GaugeValue, last, name, sv.Addr)
		}
		counter(m.tagOverflow, st.TagOverflow)
		for tag, ts := range st.Tags {
			counter(m.tagEntries, ts.Entries, tag)
			counter(m.tagDelivered, ts.Delivered, tag)
			counter(m.tagDropped, ts.Dropped, tag)
		}
	}
	m.sendDuration.Collect(ch)
}

// boolGauge is a gauge's value for b: 1 or 0.
func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
