package fluentcore

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/fluentcore/fluentcore/internal/stream"

	"github.com/fluentcore/fluentcore/internal/degrade"
	"github.com/fluentcore/fluentcore/internal/msgpenc"
	"github.com/fluentcore/fluentcore/internal/ring"
	"github.com/fluentcore/fluentcore/internal/tagtable"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zapcore"
)

// The sink owns every buffer. Each stream has a fixed set of batch buffers, allocated once
// in stream.New, that circulate: free list -> a shard's open batch (writers append encoded
// entries under the shard's lock) -> sealed and queued -> the sender writes it -> free list.
// Nothing is pooled or allocated per entry, so memory is bounded by configuration whatever
// the receiver does.
//
// The two streams share all of that; what differs is a policy value per stream: the info
// stream's (the root's infoPolicy, degrade.go) drops what it cannot carry and counts it, the err
// stream's (stream.ErrPolicy) waits, truncates and spills instead, through the overflow the
// err stream holds (internal/stream's errSpill).

// sink is the two streams, their senders and the clock that flushes them and steps the
// info stream's degrade policy. It implements entrySink.
type sink struct {
	streams  [numStreams]*stream.Stream
	tags     *tagtable.Table   // the logger tags, shared by both streams (tags.go)
	info     *infoPolicy       // the info stream's policy, which Check consults and the clock steps
	err      *stream.ErrPolicy // the err stream's, which a DPanic, Panic or Fatal has spill
	s        *settings
	spillErr error // why Spill.Dir could not be used, if it could not
	// down says, for each stream, that the clock last found every connection failing
	// (reportConnections); only the clock's goroutine reads and writes it.
	down     [numStreams]bool
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	stopTick chan struct{}
	closing  sync.Once
	closeErr error
}

// newSink allocates both streams' buffers, opens the spill and starts the senders and the
// clock. sendDuration receives each stream's send times.
func newSink(s *settings, sendDuration *prometheus.HistogramVec) *sink {
	k := &sink{s: s, stopTick: make(chan struct{})}
	k.info = newInfoPolicy(s.degrade, s.clock, k.infoObservation, func(now time.Time, degraded bool) {
		kind := EventRecovered
		if degraded {
			kind = EventDegraded
		}
		s.onEvent.emit(now, infoStream, kind, nil)
	})
	k.tags = newTagTable(s.tagBase, s.tags, s.tagTemplate, s.maxTags)
	info := stream.New(infoStream, k.tags, s.infoBufferBytes, s.stream, k.info, stream.DropsAll, sendDuration.WithLabelValues(infoStream.String()), newForwarders(s.connFor(infoStream), s.infoConnections)...)
	if s.degrade.WeightKey != "" && s.degrade.Policy == DegradeAdaptive {
		info.WeighWith(msgpenc.AppendStr(nil, s.degrade.WeightKey), k.info.weight, k.info.unweigh)
	}
	k.err, k.spillErr = stream.NewErrPolicy(s.spill)
	errs := stream.New(errStream, k.tags, s.errBufferBytes, s.stream, k.err, k.err.Carry, sendDuration.WithLabelValues(errStream.String()), newForwarder(s.connFor(errStream)))
	k.streams = [numStreams]*stream.Stream{infoStream: info, errStream: errs}

	ctx, cancel := context.WithCancel(context.Background())
	k.cancel = cancel
	if k.spillErr != nil {
		k.wg.Add(1)
		go func() { // OnEvent is the user's: not on New's goroutine
			defer k.wg.Done()
			s.onEvent.emit(s.clock.Now(), errStream, EventSpillDisabled, k.spillErr)
		}()
	}
	for _, st := range k.streams {
		st.Senders.Start(ctx, &k.wg)
	}
	k.wg.Add(1)
	go func() {
		defer k.wg.Done()
		k.clock()
	}()
	return k
}

// consults is inlined into Check: while the info stream's policy is not consulted, an entry
// costs one atomic load.
func (k *sink) consults() bool { return k.info.checking() }

// admit asks the info stream's policy about an entry, for Check, while consults. Err entries
// always pass; a step of the adaptive shedder that the clock is late for is taken there. A
// shed entry has the stream shown degraded first (infoPolicy.shed), then is counted. tag is
// the entry's logger tag if tagged (a Tag option), else its name's is looked up
// (Tags.FromName): the shedder's keys are messages of a tag, so that a flood on one tag does
// not thin the others' entries. The entry goes by pointer: admission never copies a
// zapcore.Entry (about 150 bytes), on the path of every logging call.
func (k *sink) admit(ent *zapcore.Entry, tag tagtable.Ref, tagged bool) bool {
	if k.s.split.streamFor(ent.Level) != infoStream {
		return true
	}
	if !tagged {
		tag = k.tagFor(ent)
	}
	v := k.info.admission.Admit(ent.Level, tag.Idx, ent.Message, ent.Time.UnixNano())
	if v == degrade.Keep {
		return true
	}
	k.streams[infoStream].Counts.Drop(k.info.shed(v), tag)
	if k.info.yields() {
		// Never a wait on I/O, and only a caller whose entry the pipeline could not
		// take pays (see yields).
		runtime.Gosched()
	}
	return false
}

// stream is the stream of an entry at level l: its Write is the next step of Core.Write.
func (k *sink) stream(l zapcore.Level) *stream.Stream { return k.streams[k.s.split.streamFor(l)] }

// tagFor is the tag of an entry of a logger with no Tag option: its zap name's, with
// Tags.FromName, else its stream's own.
func (k *sink) tagFor(ent *zapcore.Entry) tagtable.Ref {
	if !k.s.tagFromName || ent.LoggerName == "" {
		return tagtable.Ref{}
	}
	return k.tags.Lookup(ent.LoggerName)
}

// tagNamed resolves a Tag option's name, once, for With.
func (k *sink) tagNamed(name string) tagtable.Ref { return k.tags.Lookup(name) }

func (k *sink) stats() Stats {
	return Stats{
		Info: streamStatsOf(k.streams[infoStream].Stats(), k.tags, infoStream),
		Err:  streamStatsOf(k.streams[errStream].Stats(), k.tags, errStream),
	}
}

// clock flushes the streams every Transport.FlushInterval and steps the info stream's degrade policy
// several times a second (and at once when its fill reaches the policy's mark).
// Once a second of its time it takes each stream's counts for the recent windows of Stats
// (KeepRatio, Dropping). Its tickers and the time it passes on are settings.clock's.
func (k *sink) clock() {
	// Two tickers: flushing on its own Transport.FlushInterval ticker bounds an entry's wait in a
	// batch by Transport.FlushInterval itself (a flush on a coarser tick could add a whole tick);
	// the degrade policy is stepped every observeEvery, or as often as it asks (stepEvery).
	flush := k.s.clock.NewTicker(k.s.flushInterval)
	defer flush.Stop()
	slow := min(k.s.flushInterval, observeEvery)
	observe := k.s.clock.NewTicker(slow)
	defer observe.Stop()
	every := slow
	for {
		select {
		case <-k.stopTick:
			return
		case <-k.info.kick:
		case <-observe.C:
		case <-flush.C:
			now := k.s.clock.Now()
			for _, st := range k.streams {
				st.FlushTick(now)
			}
		}
		now := k.s.clock.Now()
		for _, st := range k.streams {
			st.Counts.Roll(now) // once a second: the windows of KeepRatio and Dropping
		}
		k.reportConnections(now)
		k.info.step()
		if d := k.info.stepEvery(slow); d != every {
			every = d
			observe.Reset(d)
		}
	}
}

// reportConnections tells OnEvent when a stream loses its last working connection
// (EventDisconnected, with the last send error) and when it delivers again
// (EventConnected). The clock reads it at each of its ticks, so a change is reported within
// observeEvery.
func (k *sink) reportConnections(now time.Time) {
	if k.s.onEvent == nil {
		return
	}
	for id, st := range k.streams {
		if down := st.Senders.Failing(); down != k.down[id] {
			k.down[id] = down
			kind, err := EventConnected, error(nil)
			if down {
				kind, err = EventDisconnected, st.Senders.LastError()
			}
			k.s.onEvent.emit(now, streamID(id), kind, err)
		}
	}
}

// observeEvery is how often the degrade policy is stepped when nothing else wakes it.
const observeEvery = 100 * time.Millisecond

// infoObservation is what the info stream's policy is told (stream.Stream.Observe).
func (k *sink) infoObservation() degrade.Observation { return k.streams[infoStream].Observe() }

// syncStreams is sync that also says which stream missed the deadline. It waits for the err
// stream first, so that a backlog of info entries is never taken for an err stream that
// cannot deliver.
func (k *sink) syncStreams(timeout time.Duration) (missed streamID, err error) {
	var targets [numStreams]uint64
	for id, st := range k.streams {
		st.Flush()
		targets[id] = st.Ring.LastSealed()
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	for _, id := range [...]streamID{errStream, infoStream} {
		st := k.streams[id]
		if !st.Ring.WaitDone(targets[id], t.C) {
			err := fmt.Errorf("fluentcore: sync: %s stream not delivered within %v", st.ID, timeout)
			if last := st.Senders.LastError(); last != nil {
				err = fmt.Errorf("%w; last send error: %w", err, last) // e.g. ErrHandshake
			}
			return id, err
		}
	}
	return 0, nil
}

// sync flushes both streams and waits until everything sealed so far is delivered (or given
// up on), or the timeout passes. With orSpill, for a DPanic, Panic or Fatal entry, which the
// process may not survive, it waits for delivery for timeout less a fifth of it (at most
// 1 s), and if the err stream missed that, for the rest it has the err sender move what it
// could not deliver to the spill (Spill.Dir, or Spill.Fallback). The sender answers between
// attempts to send; one still in progress then (a dial to a host that does not answer, a
// handshake, a write to a receiver that stopped reading, an ack wait) ends within its own
// timeout, and if that is later than the rest of the bound only the sync error is returned.
func (k *sink) sync(timeout time.Duration, orSpill bool) error {
	if !orSpill {
		_, err := k.syncStreams(timeout)
		return err
	}
	evac := min(timeout/5, time.Second)
	missed, err := k.syncStreams(timeout - evac)
	if err == nil || missed != errStream {
		return err
	}
	done := make(chan struct{})
	t := time.NewTimer(evac)
	defer t.Stop()
	if !k.err.Evacuate(done, t.C) {
		return err
	}
	select {
	case <-done:
		return fmt.Errorf("%w; the err stream's undelivered entries went to the spill (Spill.Dir, or Spill.Fallback)", err)
	case <-t.C:
		return err
	}
}

// close stops accepting entries, tries to deliver what was accepted within timeout, then
// stops the senders and accounts for whatever is left: info as dropped (shutdown), err as
// spilled (to Spill.Dir, for the next process to replay, or to Spill.Fallback).
func (k *sink) close(timeout time.Duration) error {
	k.closing.Do(func() {
		for _, st := range k.streams {
			st.Closed.Store(true)
		}
		_, err := k.syncStreams(timeout)
		k.cancel()
		close(k.stopTick)
		k.wg.Wait()
		var left [numStreams]int // entries abandoned, by stream
		for _, st := range k.streams {
			abandon := func(b *ring.Batch) {
				left[st.ID] += b.Unsent()
				st.Abandon(b)
			}
			st.Senders.Release(abandon) // oldest first: in flight, unsent, held, then the queue
			st.Ring.Drain(abandon)
			st.Senders.CloseAll()
		}
		k.err.Close() // releases Spill.Dir; later err entries go to Spill.Fallback
		if err != nil {
			if report := abandonedError(left, k.err.Durable()); report != nil {
				err = errors.Join(err, report)
				k.reportShutdown(report, left)
			}
		}
		k.closeErr = err
	})
	return k.closeErr
}

// reportShutdown writes Close's report of the entries it could not deliver (report, and
// their counts: left, by stream) to Spill.Fallback as the process's last record there, in the
// fallback's format (the err stream's tag, logger "fluentcore", level error, the counts as
// the fields shutdown_info_dropped and shutdown_err_spilled): the shutdown drops otherwise
// show only in Close's error and in counters that no scrape may read before the process
// exits. Spill.Dir is closed by then, so the record goes to Spill.Fallback in every
// configuration; an error writing it is ignored (Close's error has the same report).
func (k *sink) reportShutdown(report error, left [numStreams]int) {
	ent := zapcore.Entry{Level: zapcore.ErrorLevel, Time: k.s.clock.Now(), LoggerName: "fluentcore", Message: report.Error()}
	fields := []zapcore.Field{
		{Key: "shutdown_info_dropped", Type: zapcore.Int64Type, Integer: int64(left[infoStream])},
		{Key: "shutdown_err_spilled", Type: zapcore.Int64Type, Integer: int64(left[errStream])},
	}
	_, _ = k.err.SpillEntry(k.streams[errStream].Tag, nil, &ent, fields)
}

// abandonedError says what Close did with the entries it could not deliver in time: left,
// by stream; durable, whether the err entries went to Spill.Dir. Nil if there were none.
func abandonedError(left [numStreams]int, durable bool) error {
	var parts []string
	if n := left[infoStream]; n > 0 {
		parts = append(parts, fmt.Sprintf("info entries dropped (shutdown): %d", n))
	}
	if n := left[errStream]; n > 0 {
		where := "Spill.Fallback"
		if durable {
			where = "Spill.Dir, for the next process to send (Spill.Fallback if it refused them)"
		}
		parts = append(parts, fmt.Sprintf("err entries spilled to %s: %d", where, n))
	}
	if len(parts) == 0 {
		return nil
	}
	return fmt.Errorf("fluentcore: close: not delivered in time: %s", strings.Join(parts, "; "))
}
