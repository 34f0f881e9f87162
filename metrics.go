package fluentcore

import (
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/fluentcore/fluentcore/internal/outcome"
	"github.com/prometheus/client_golang/prometheus"
)

// The label names the metrics set themselves: the stream on every series, the reason on
// the drops, the server on the servers' series, the logger tag on the tags' series, and
// client_golang's bucket bound on the send-duration histogram.
const (
	labelStream = "stream"
	labelReason = "reason"
	labelServer = "server"
	labelTag    = "tag"
	labelBucket = "le"
)

// metricLabelNames is every label name the metrics set themselves, the one list that the
// descriptors (newMetrics builds none with a label outside it) and checkConstLabels (which
// refuses each of them in ConstLabels) read: a constant label of one of these names would
// give a series the name twice, and none of the collector's series could be made (the
// histogram's constructor panics on "le").
var metricLabelNames = [...]string{labelStream, labelReason, labelServer, labelTag, labelBucket}

// metricsHub is the collector of the metrics of every core on one Registerer, registered
// there once and for as long as the Registerer lives; inside it the cores with the same
// ConstLabels form a group (a metrics), one set of series. Safe for concurrent use.
//
//   - The hub is registered unchecked (its Describe sends nothing, client_golang's way for
//     a collector whose series it cannot describe in advance), so that groups with
//     different ConstLabels names export side by side: a registry fixes the label names of
//     each described metric name for its lifetime, unregistering included, so checked
//     collectors with different label names could never share it. What the registry
//     still checks, a claim does: a checked collector (metricsClaim) that describes each
//     metric name without labels and collects nothing. It keeps the names from any
//     other collector (either registration is refused, with the registry's error), and
//     it is how a core finds the hub already on a Registerer: registering the same claim
//     again returns it, in an AlreadyRegisteredError.
//   - A group is exported while it has a live core (one made and not closed). Its
//     counters are the sum over every core it has had: the live ones as they are now,
//     the closed ones as they are now too (a closed core still counts what it is handed,
//     as dropped or spilled), and those no longer reachable as they were when the garbage
//     collector found them so (the last count they could make). Its gauges are the live
//     cores' (see metrics). So a group's counters never go backwards across a reload,
//     the new core made before the old one is closed, or after it while another core on
//     the Registerer is open; and a closed core's later drops are in them.
//   - When the last live core on the Registerer is closed, the hub forgets every group: it
//     exports nothing, and a core made after that starts from zero, as a new process
//     would.
//
// Empty label values are left out of the ConstLabels a group is keyed and labelled by:
// Prometheus reads a label with an empty value as no label, so {core=""} and {} are one
// set of series, and two groups would be duplicates to it.
type metricsHub struct {
	mu     sync.Mutex
	groups map[string]*metrics // by labelsKey of their ConstLabels
	live   int                 // cores joined and not closed, over every group
}

// metricsClaim is the checked collector that holds the metric names on a Registerer for
// its hub and finds the hub there (see metricsHub): it describes each name without labels
// and collects nothing. Every claim describes the same descriptors, so a Registerer takes
// one.
type metricsClaim struct {
	hub   *metricsHub
	ready chan struct{} // closed once the hub's registration is decided
	err   error         // the Registerer's refusal of the hub, set before ready is closed
}

// metricsClaimDescs are the claim's descriptors: each metric name and its help, no label.
var metricsClaimDescs = sync.OnceValue(func() []*prometheus.Desc {
	names := newMetrics(nil).names
	ds := make([]*prometheus.Desc, 0, len(names))
	for _, n := range names {
		ds = append(ds, prometheus.NewDesc(n.name, n.help, nil, nil))
	}
	return ds
})

// Describe implements prometheus.Collector: the claimed names.
func (c *metricsClaim) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range metricsClaimDescs() {
		ch <- d
	}
}

// Collect implements prometheus.Collector: nothing (the hub collects).
func (c *metricsClaim) Collect(chan<- prometheus.Metric) {}

// Describe implements prometheus.Collector: nothing, which registers the hub unchecked.
func (h *metricsHub) Describe(chan<- *prometheus.Desc) {}

// Collect implements prometheus.Collector: the series of each group with a live core.
func (h *metricsHub) Collect(ch chan<- prometheus.Metric) {
	h.mu.Lock()
	groups := make([]*metrics, 0, len(h.groups))
	for _, m := range h.groups {
		m.mu.Lock()
		if len(m.live) > 0 {
			groups = append(groups, m)
		}
		m.mu.Unlock()
	}
	h.mu.Unlock()
	for _, m := range groups {
		m.Collect(ch)
	}
}

// metrics is one set of fluentcore series: the group of the cores on one Registerer with
// the same ConstLabels (a core, or two while a config reload swaps them), or a core's own
// collector, not registered. It reads its cores' Stats at scrape time, so the hot path pays
// for no metric of its own; its descriptors are built once, in newMetrics. The one metric
// the sinks feed themselves is the send-duration histogram (a distribution cannot be read
// back from counters), which its cores share.
//
// What it exports, so that a scraper sees neither a gap nor a counter going backwards when
// the cores are swapped: each counter is the sum over every core that has been in it (see
// metricsHub for the closed ones); each gauge is the sum over the live cores, what they
// hold now, except: degraded and dropping (1 if any live core is), oldest_pending_seconds
// and send_in_progress_seconds (the largest), degrade_admit_ratio (the lowest), keep_ratio
// (taken from the live cores' window counts summed: the share kept of everything they were
// offered) and last_send_success_timestamp_seconds (the latest over every core that has
// been in it, as a counter: a reload does not reset it to "never").
//
// A collector that is not registered (no Registerer, or the Registerer refused it) has its
// one core, which never leaves, so its numbers stay readable after Close. Collected on its
// own (not through the hub) it exports whether or not it has a live core. Its methods are
// safe for concurrent use.
type metrics struct {
	metricDescs
	sendDuration *prometheus.HistogramVec
	names        []metricName // of every series, the histogram's included

	// hub is the collector it is a group of; nil for a core's own collector. Set before
	// the group is published, not changed after.
	hub *metricsHub

	mu      sync.Mutex
	live    []*metricsMember // the cores not closed
	closed  []*metricsMember // the closed cores still reachable: their counters are read
	retired Stats            // the counters of the closed cores no longer reachable, summed; its gauges stay zero
}

// metricDescs are the descriptors of a collector's series, one per metric.
type metricDescs struct {
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
}

// metricName is a metric's name and help.
type metricName struct{ name, help string }

// metricsMember is one core's place in a metrics collector. metrics.mu guards it; stats is
// set once, before the core's owner can be collected, and not changed after.
type metricsMember struct {
	stats func() Stats // nil until the core's sink exists
	gone  bool         // its core is no longer reachable: counted into retired once closed
}

// joinMetrics returns the collector a new core is counted in, and the core's place in it.
// With reg nil it is a collector of the core's own, not registered. Otherwise it is the
// group of reg's hub with the same labels (their non-empty values), made if there is none.
// The error is reg's refusal of the hub (another collector has the metrics' names), or
// labels the metrics cannot carry (checkConstLabels lets none through); the core then has
// a collector of its own, not registered.
func joinMetrics(reg prometheus.Registerer, constLabels prometheus.Labels) (*metrics, *metricsMember, error) {
	labels := maps.Clone(constLabels)
	maps.DeleteFunc(labels, func(_, v string) bool { return v == "" })
	var err error
	if reg != nil {
		var h *metricsHub
		if h, err = hubOn(reg); err == nil {
			return h.join(labels)
		}
	}
	m := newMetrics(labels)
	return m, m.join(), err
}

// hubOn returns the hub registered on reg, registering one if there is none.
func hubOn(reg prometheus.Registerer) (*metricsHub, error) {
	c := &metricsClaim{hub: &metricsHub{groups: map[string]*metrics{}}, ready: make(chan struct{})}
	err := reg.Register(c)
	if err == nil {
		if c.err = reg.Register(c.hub); c.err != nil {
			reg.Unregister(c) // a later core tries again
		}
		close(c.ready)
		return c.hub, c.err
	}
	var dup prometheus.AlreadyRegisteredError
	if errors.As(err, &dup) {
		if old, ok := dup.ExistingCollector.(*metricsClaim); ok {
			<-old.ready
			return old.hub, old.err
		}
	}
	return nil, err
}

// join adds a core to the group of h with labels, made if there is none. A new group's
// descriptors are checked first, on a registry of their own: one that the registry refuses
// would break every scrape of the hub, so the core gets a collector of its own instead,
// with the error.
func (h *metricsHub) join(labels prometheus.Labels) (*metrics, *metricsMember, error) {
	key := labelsKey(labels)
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.groups[key]
	if m == nil {
		m = newMetrics(labels)
		if err := prometheus.NewPedanticRegistry().Register(m); err != nil {
			return m, m.join(), err
		}
		m.hub = h
		h.groups[key] = m
	}
	h.live++
	return m, m.join(), nil
}

// labelsKey is labels as one string, the same for equal label sets.
func labelsKey(labels prometheus.Labels) string {
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(labels)) {
		b.WriteString(name)
		b.WriteByte('=')
		b.WriteString(strconv.Quote(labels[name]))
		b.WriteByte(',')
	}
	return b.String()
}

// join adds a live core, whose numbers start once start gives them.
func (m *metrics) join() *metricsMember {
	mem := &metricsMember{}
	m.mu.Lock()
	m.live = append(m.live, mem)
	m.mu.Unlock()
	return mem
}

// start makes stats the numbers of the core at mem.
func (m *metrics) start(mem *metricsMember, stats func() Stats) {
	m.mu.Lock()
	mem.stats = stats
	m.mu.Unlock()
}

// releaseWhenGone has m let go of the core at mem once owner is unreachable. owner is what
// the core's callers hold (every Core of one New shares it), and what the core's numbers
// (mem's stats) do not reach: once the garbage collector finds it unreachable, the core
// can count nothing more, and a closed core's final counters are folded into retired, so
// that the collector holds nothing of the core any more. A collector of the core's own,
// not registered, needs no such release.
func releaseWhenGone[T any](m *metrics, mem *metricsMember, owner *T) {
	if m.hub != nil {
		runtime.AddCleanup(owner, m.release, mem)
	}
}

// leave takes the core at mem out of the live cores, as Close does, once: its counters
// are still read, those it makes after Close included, until it is released
// (releaseWhenGone). When the
// last live core on the hub leaves, the hub forgets its groups. A collector of the core's
// own keeps its core as it is.
func (m *metrics) leave(mem *metricsMember) {
	h := m.hub
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	m.mu.Lock()
	i := slices.Index(m.live, mem)
	if i < 0 {
		m.mu.Unlock()
		return
	}
	m.live = slices.Delete(m.live, i, i+1)
	if mem.gone { // released while it was leaving: nothing can reach it, its count is final
		m.retire(mem)
	} else {
		m.closed = append(m.closed, mem)
	}
	m.mu.Unlock()
	if h.live--; h.live == 0 {
		clear(h.groups)
	}
}

// release is the cleanup of a core that is no longer reachable (releaseWhenGone): a
// closed one's counters are folded into retired, and the collector lets it go; one that is
// still live (closing, or never closed) is marked, for leave.
func (m *metrics) release(mem *metricsMember) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mem.gone = true
	if i := slices.Index(m.closed, mem); i >= 0 {
		m.closed = slices.Delete(m.closed, i, i+1)
		m.retire(mem)
	}
}

// retire adds the counters of the core at mem, which can count nothing more, to retired.
// The caller holds mu, and has taken mem out of live and closed: a concurrent total reads
// the core either there or here, never both.
func (m *metrics) retire(mem *metricsMember) {
	if mem.stats == nil {
		return
	}
	st := mem.stats()
	m.retired.Info.addCounters(&st.Info)
	m.retired.Err.addCounters(&st.Err)
}

// total returns what the collector exports: the counters of every core it has had, the
// gauges of the live ones. The cores are read outside mu; one that leaves or is released
// meanwhile is counted once, by this read, and its counters are no lower afterwards.
func (m *metrics) total() Stats {
	var t Stats
	m.mu.Lock()
	t.Info.addCounters(&m.retired.Info)
	t.Err.addCounters(&m.retired.Err)
	live := make([]func() Stats, 0, len(m.live))
	for _, mem := range m.live {
		if mem.stats != nil {
			live = append(live, mem.stats)
		}
	}
	closed := make([]func() Stats, 0, len(m.closed))
	for _, mem := range m.closed {
		if mem.stats != nil {
			closed = append(closed, mem.stats)
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
	for _, stats := range closed {
		st := stats()
		t.Info.addCounters(&st.Info)
		t.Err.addCounters(&st.Err)
	}
	t.Info.KeepRatio, t.Err.KeepRatio = outcome.KeepRatio(t.Info.recent), outcome.KeepRatio(t.Err.recent)
	return t
}

// sendDurationBuckets are the bounds of fluentcore_send_duration_seconds: 10 µs to about 42 s
// by factors of 4 (12 bounds, and +Inf). The lowest resolves an err frame acked on a
// local connection (tens of µs, which a 100 µs floor would read all as "under 100 µs");
// the highest is past Timeouts.Ack's default (30 s) and Timeouts.Write's (10 s), so that an
// attempt that ran into either lands in a bucket of its own, not in +Inf; factors of 4
// span that in 12 bounds (a stall in progress is send_in_progress_seconds').
var sendDurationBuckets = prometheus.ExponentialBuckets(0.00001, 4, 12)

// newMetrics returns a collector with no core, under constLabels, and its send-duration
// histogram (fluentcore_send_duration_seconds, by stream). It panics if a descriptor has a
// label outside metricLabelNames, which Validate would not keep out of ConstLabels.
func newMetrics(constLabels prometheus.Labels) *metrics {
	const durationName, durationHelp = "fluentcore_send_duration_seconds", "Time to write one frame and, with acks, receive its ack."
	names := []metricName{{durationName, durationHelp}}
	d := func(name, help string, labels ...string) *prometheus.Desc {
		labels = append([]string{labelStream}, labels...)
		for _, l := range labels {
			if !slices.Contains(metricLabelNames[:], l) {
				panic(fmt.Sprintf("fluentcore: metric label %q is not in metricLabelNames", l))
			}
		}
		names = append(names, metricName{"fluentcore_" + name, help})
		return prometheus.NewDesc("fluentcore_"+name, help, labels, constLabels)
	}
	m := &metrics{
		sendDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:        durationName,
			Help:        durationHelp,
			Buckets:     sendDurationBuckets,
			ConstLabels: constLabels,
		}, []string{labelStream}),
		metricDescs: metricDescs{
			entries:       d("entries_total", "Entries at an enabled level that reached the core, including those dropped before encoding."),
			delivered:     d("delivered_entries_total", "Entries the receiver has (written, or acknowledged when acks are on)."),
			spilled:       d("spilled_entries_total", "Entries set aside instead of delivered: appended to the durable spill (Spill.Dir), or written to Spill.Fallback."),
			dropped:       d("dropped_entries_total", "Entries dropped, by reason.", labelReason),
			truncated:     d("truncated_entries_total", "Err entries larger than Transport.MaxEntryBytes cut down to fit (and still delivered or spilled)."),
			replayed:      d("replayed_entries_total", "Spilled entries delivered from the durable spill (already counted as spilled)."),
			duplicated:    d("duplicated_entries_total", "Err entries acknowledged by the receiver after they were spilled while their frame waited for its ack (counted as spilled; also in the spill or Spill.Fallback)."),
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
			serverInFlight: d("server_frames_in_flight", "Frames written to the server that wait for their acks now (a stream with acks).", labelServer),
			serverDelivered: d("server_delivered_entries_total",
				"Entries the server has taken (written, or acknowledged when acks are on), spill replays included.", labelServer),
			serverLastSuccess: d("last_send_success_timestamp_seconds",
				"Unix time when the server last took a frame of the stream (written, or acknowledged when acks are on); 0 before the first. Seconds since: time() - this.", labelServer),
			tagOverflow:  d("tag_overflow_total", "Entries whose logger asked for a tag name past Tags.Max: sent under the stream's tag, the name in the record."),
			tagEntries:   d("tag_entries_total", "Entries of a logger tag that reached the core, those shed included (at most Tags.Max tags).", labelTag),
			tagDelivered: d("tag_delivered_entries_total", "Entries of a logger tag the receiver has.", labelTag),
			tagDropped:   d("tag_dropped_entries_total", "Entries of a logger tag dropped, whatever the reason.", labelTag),
		},
		names: names,
	}
	return m
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
