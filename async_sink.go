package fluentcore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zapcore"
)

// The sink owns every buffer. Each stream has a fixed set of batch buffers, allocated once
// in newStream, that circulate: free list -> a shard's open batch (writers append encoded
// entries under the shard's lock) -> sealed and queued -> the sender writes it -> free list.
// Nothing is pooled or allocated per entry, so memory is bounded by configuration whatever
// the receiver does.

// batch is one buffer of encoded entries: the payload of one PackedForward frame.
type batch struct {
	buf []byte // concatenated Forward entries; cap is the stream's batch size, never grown
	n   int    // entries in buf
	seq uint64 // position in the stream's sealing order
}

// shard is one open batch and the encoder that writes into it. Writers pick a shard at
// random, so many goroutines rarely meet on one lock.
type shard struct {
	mu      sync.Mutex
	enc     *msgpEncoder
	cur     *batch // nil until a writer takes a batch from the free list
	entries atomic.Uint64
	dropped [numDropReasons]atomic.Uint64
	_       [64]byte // keep neighbouring shards off this cache line
}

// stream is one of the two streams: its buffers, its sender and its counters.
type stream struct {
	id        streamID
	tag       string
	shards    []shard
	free      chan *batch // batches ready for writers
	queue     chan *batch // sealed batches, in seq order, for the sender
	nbatches  int
	batchCap  int // bytes per batch
	sealAt    int // a batch this full is sealed right away
	entryCap  int // largest encoded entry accepted
	errWait   time.Duration
	closed    atomic.Bool
	fwd       *forwarder
	spill     spiller         // err only: where entries go when they cannot be delivered
	degrade   *degradeControl // info only
	kick      chan struct{}   // wakes the clock when the queue reaches the high watermark
	highQueue int
	wake      chan struct{} // err only: an entry is waiting; the sender seals and sends it at once

	// err only, with SpillDir: the durable spill the sender moves batches to and replays.
	disk       *diskSpill
	spillKick  chan struct{} // a writer spilled: the buffers are full
	spillAfter time.Duration

	sealMu sync.Mutex
	sealed uint64 // seq of the last sealed batch

	doneMu   sync.Mutex
	done     uint64        // seq of the last batch the sender finished with
	progress chan struct{} // closed and replaced when done advances while someone waits
	watched  bool          // a waitDone caller holds progress

	pending *batch // a batch the sender was holding when Close aborted it

	queuedBytes                                    atomic.Int64
	queuedBatches                                  atomic.Int64
	delivered, spilled                             atomic.Uint64
	replayed                                       atomic.Uint64 // delivered from the durable spill
	sentBatches, sentBytes, sendErrors, reconnects atomic.Uint64
	sendDuration                                   prometheus.Observer // this stream's histogram; nil until newSink sets it
}

func newStream(id streamID, tag string, budget int, s *settings, fwd *forwarder, sp spiller, disk *diskSpill) *stream {
	nb := budget / s.batchBytes
	if nb < 2 {
		nb = 2
	}
	nshards := 2 * runtime.GOMAXPROCS(0)
	if nshards > nb/2 {
		nshards = nb / 2
	}
	st := &stream{
		id:        id,
		tag:       tag,
		shards:    make([]shard, nshards),
		free:      make(chan *batch, nb),
		queue:     make(chan *batch, nb),
		nbatches:  nb,
		batchCap:  s.batchBytes,
		sealAt:    s.batchBytes - s.batchBytes/16,
		entryCap:  s.entryBytes,
		errWait:   s.errMaxWait,
		fwd:       fwd,
		spill:     sp,
		kick:      make(chan struct{}, 1),
		progress:  make(chan struct{}),
		highQueue: int(float64(nb) * s.degrade.withDefaults().HighWatermark),
	}
	for i := range st.shards {
		st.shards[i].enc = newMsgpEncoder(s.enc)
	}
	for i := 0; i < nb; i++ {
		st.free <- &batch{buf: make([]byte, 0, s.batchBytes)}
	}
	if id == infoStream {
		st.degrade = newDegradeControl(s.degrade)
	} else {
		st.wake = make(chan struct{}, 1)
	}
	if disk != nil {
		st.disk = disk
		st.spillKick = make(chan struct{}, 1)
		st.spillAfter = s.spillAfter
	}
	return st
}

// writeStatus is what one attempt to append an entry under a shard's lock ended with.
type writeStatus uint8

const (
	written      writeStatus = iota // the entry is in a batch (or counted as dropped)
	needBatch                       // no free batch; the caller decides to drop or wait
	streamClosed                    // the stream is closed
	oversized                       // an err entry larger than entryCap even once truncated
)

// write appends one entry to the stream. Info entries that find no free batch are dropped
// (queue_full); err entries wait up to errWait for one and are spilled after that.
func (s *stream) write(ctx *encodedContext, ent zapcore.Entry, fields []zapcore.Field) {
	sh := &s.shards[rand.N(len(s.shards))]
	sh.entries.Add(1)
	var deadline time.Time
	for {
		switch s.tryWrite(sh, ctx, ent, fields) {
		case written:
			if s.wake != nil {
				// Err entries do not wait for FlushInterval: the sender seals the open
				// batches as soon as it is free, so entries written while it sends are
				// batched together and an error under an info flood arrives in milliseconds.
				select {
				case s.wake <- struct{}{}:
				default:
				}
			}
			return
		case oversized:
			// Err entries are never dropped: one that can't be truncated to fit goes to the
			// fallback whole.
			s.spillEntry(ctx, ent, fields)
			return
		case streamClosed:
			if s.id == errStream {
				s.spillEntry(ctx, ent, fields)
				return
			}
			sh.dropped[dropClosed].Add(1)
			return
		case needBatch:
			if s.id == infoStream {
				sh.dropped[dropQueueFull].Add(1)
				return
			}
			if deadline.IsZero() {
				deadline = time.Now().Add(s.errWait)
			}
			if !s.waitForBatch(sh, deadline) {
				s.spillEntry(ctx, ent, fields)
				return
			}
		}
	}
}

// tryWrite encodes the entry into the shard's open batch under the shard's lock.
func (s *stream) tryWrite(sh *shard, ctx *encodedContext, ent zapcore.Entry, fields []zapcore.Field) writeStatus {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if s.closed.Load() {
		return streamClosed
	}
	b := sh.cur
	if b == nil {
		if b = s.takeFree(); b == nil {
			return needBatch
		}
		sh.cur = b
	}
	start := len(b.buf)
	out, ok := encodeSafely(sh.enc, b.buf, ctx, ent, fields)
	if !ok {
		b.buf = b.buf[:start]
		sh.dropped[dropEncodeError].Add(1)
		return written
	}
	if len(out)-start > s.entryCap {
		b.buf = b.buf[:start]
		if s.id != errStream {
			sh.dropped[dropTooLarge].Add(1)
			return written
		}
		// An err entry is delivered with its largest values truncated and marked (see
		// capEntry); out[start:] is still intact, and capped lives in the encoder.
		capped, ok := sh.enc.capEntry(out[start:], s.entryCap)
		if !ok {
			return oversized
		}
		out = append(b.buf, capped...)
	}
	if cap(out) != cap(b.buf) {
		// The entry did not fit and append moved everything to a new array: seal the batch as
		// it was and copy the entry into a fresh one (rare: only entries larger than the
		// space sealAt leaves get here).
		b.buf = b.buf[:start]
		sh.cur = nil
		s.seal(b)
		nb := s.takeFree()
		if nb == nil {
			return needBatch
		}
		nb.buf = append(nb.buf, out[start:]...)
		nb.n = 1
		sh.cur = nb
		b = nb
	} else {
		b.buf = out
		b.n++
	}
	if len(b.buf) >= s.sealAt {
		sh.cur = nil
		s.seal(b)
	}
	return written
}

// encodeSafely appends the entry and reports false if a marshaler panicked, so a panic can
// never leave a shard locked or a batch holding half an entry.
func encodeSafely(enc *msgpEncoder, dst []byte, ctx *encodedContext, ent zapcore.Entry, fields []zapcore.Field) (out []byte, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false // appendEntry resets the encoder's state at its start
		}
	}()
	return enc.appendEntry(dst, ctx, ent, fields), true
}

func (s *stream) takeFree() *batch {
	select {
	case b := <-s.free:
		return b
	default:
		return nil
	}
}

// waitForBatch blocks (without any lock) until a batch is free or the deadline passes, and
// installs the batch in the shard. It reports false on timeout.
func (s *stream) waitForBatch(sh *shard, deadline time.Time) bool {
	d := time.Until(deadline)
	if d <= 0 {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case b := <-s.free:
		sh.mu.Lock()
		if sh.cur == nil {
			sh.cur = b
		} else {
			s.free <- b // another writer refilled the shard meanwhile; cannot block: b came from free
		}
		sh.mu.Unlock()
		return true
	case <-t.C:
		return false
	}
}

// seal queues a batch for the sender. Callers hold the lock of the shard the batch came
// from; the queue has room for every batch, so this never blocks.
func (s *stream) seal(b *batch) {
	s.queuedBytes.Add(int64(len(b.buf)))
	q := s.queuedBatches.Add(1)
	s.sealMu.Lock()
	s.sealed++
	b.seq = s.sealed
	s.queue <- b
	s.sealMu.Unlock()
	if s.degrade != nil && int(q) >= s.highQueue && !s.degrade.active.Load() {
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
}

// flush seals every shard's non-empty open batch.
func (s *stream) flush() {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		if b := sh.cur; b != nil && b.n > 0 {
			sh.cur = nil
			s.seal(b)
		}
		sh.mu.Unlock()
	}
}

// fill is the share of the stream's batches sealed and waiting for the sender.
func (s *stream) fill() float64 {
	return float64(s.queuedBatches.Load()) / float64(s.nbatches)
}

func (s *stream) lastSealed() uint64 {
	s.sealMu.Lock()
	defer s.sealMu.Unlock()
	return s.sealed
}

// waitDone waits until the sender has finished with every batch up to seq.
func (s *stream) waitDone(seq uint64, deadline <-chan time.Time) bool {
	for {
		s.doneMu.Lock()
		done, ch := s.done, s.progress
		s.watched = true
		s.doneMu.Unlock()
		if done >= seq {
			return true
		}
		select {
		case <-ch:
		case <-deadline:
			return false
		}
	}
}

func (s *stream) finish(b *batch) {
	s.queuedBytes.Add(-int64(len(b.buf)))
	s.queuedBatches.Add(-1)
	seq := b.seq
	b.buf, b.n = b.buf[:0], 0
	s.free <- b
	s.doneMu.Lock()
	s.done = seq
	if s.watched {
		// Only then: a channel per batch would make the sender allocate, and an allocating
		// sender is made to assist the garbage collector (even parked) under a log flood.
		close(s.progress)
		s.progress = make(chan struct{})
		s.watched = false
	}
	s.doneMu.Unlock()
}

// run is the stream's sender: it delivers sealed batches in order until ctx is cancelled.
// With a durable spill (err stream, SpillDir) it first replays whatever the spill holds —
// also what a previous process left there — and sends from memory again once it is empty.
func (s *stream) run(ctx context.Context, bo backoff.BackOff) {
	for {
		if s.disk != nil && !s.disk.empty() {
			if !s.replay(ctx, bo) {
				return
			}
			continue
		}
		select {
		case b := <-s.queue:
			if !s.deliver(ctx, b, bo) {
				s.pending = b
				return
			}
		case <-s.wake: // nil for info
			s.flush()
		case <-s.spillKick: // nil without a spill
		case <-ctx.Done():
			return
		}
	}
}

// deliver sends one batch, retrying with backoff until it is delivered (true) or ctx is
// cancelled (false). With a durable spill, a batch that has failed for SpillAfter, or once
// writers spill because the buffers are full, goes to the spill instead (true), and run
// switches to replaying.
func (s *stream) deliver(ctx context.Context, b *batch, bo backoff.BackOff) bool {
	bo.Reset()
	var failingSince time.Time
	for {
		start := time.Now()
		if s.sendFrame(ctx, s.tag, b.buf, b.n) {
			s.delivered.Add(uint64(b.n))
			s.finish(b)
			return true
		}
		if failingSince.IsZero() {
			failingSince = start
		}
		if s.disk != nil && (time.Since(failingSince) >= s.spillAfter || !s.disk.empty()) {
			s.spillSealed(b)
			return true
		}
		wait := bo.NextBackOff()
		if wait == backoff.Stop {
			wait = time.Second
		}
		t := time.NewTimer(wait)
		for waiting := true; waiting; {
			select {
			case <-t.C:
				waiting = false
			case <-s.spillKick: // nil without a spill
				if !s.disk.empty() { // else a stale kick from before the last replay
					t.Stop()
					s.spillSealed(b)
					return true
				}
			case <-ctx.Done():
				t.Stop()
				return false
			}
		}
	}
}

// sendFrame makes one attempt to send a frame, and counts it.
func (s *stream) sendFrame(ctx context.Context, tag string, entries []byte, n int) bool {
	start := time.Now()
	size, fresh, err := s.fwd.send(ctx, tag, entries, n)
	if fresh && s.fwd.connects.Load() > 1 {
		s.reconnects.Add(1)
	}
	if err != nil {
		s.sendErrors.Add(1)
		return false
	}
	if s.sendDuration != nil {
		s.sendDuration.Observe(time.Since(start).Seconds())
	}
	s.sentBatches.Add(1)
	s.sentBytes.Add(uint64(size))
	return true
}

// replay is the err sender while the durable spill holds frames. The spill is then the
// queue: every sealed batch is appended to its tail (which frees the batch for writers at
// once) and frames are sent from its head, oldest first, so spilled entries arrive before
// newer ones, and newer ones wait behind them, never forever. A segment is deleted once all
// its frames are delivered (acknowledged, with RequireAck: send waits for the ack). A
// segment that cannot be read is retried like a failed send. It returns true once the spill
// is empty, false when ctx is cancelled.
func (s *stream) replay(ctx context.Context, bo backoff.BackOff) bool {
	bo.Reset()
	for {
		s.drainToSpill()
		fr, ok, err := s.disk.head()
		if err == nil && !ok {
			return true
		}
		if err == nil && s.sendFrame(ctx, fr.tag, fr.entries, fr.n) {
			s.replayed.Add(uint64(fr.n))
			s.disk.pop()
			bo.Reset()
			continue
		}
		wait := bo.NextBackOff()
		if wait == backoff.Stop {
			wait = time.Second
		}
		if !s.spillWhileWaiting(ctx, wait) {
			return false
		}
	}
}

// spillWhileWaiting waits d (false if ctx is cancelled first), moving batches to the spill
// as they are sealed.
func (s *stream) spillWhileWaiting(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case b := <-s.queue:
			s.spillSealed(b)
		case <-s.spillKick:
		case <-t.C:
			return true
		case <-ctx.Done():
			return false
		}
	}
}

// drainToSpill moves every queued batch to the spill, without waiting.
func (s *stream) drainToSpill() {
	for {
		select {
		case b := <-s.queue:
			s.spillSealed(b)
		default:
			return
		}
	}
}

// spillSealed hands a sealed err batch to the spill and frees it.
func (s *stream) spillSealed(b *batch) {
	s.countSpill(s.spill.spillBatch(s.tag, b.buf, b.n), b.n)
	s.finish(b)
}

// countSpill counts n entries by what the spill said: spilled, or dropped with the reason
// (the spill chain has written them to ErrFallback where it could): never silently.
func (s *stream) countSpill(err error, n int) {
	switch {
	case err == nil:
		s.spilled.Add(uint64(n))
	case errors.Is(err, errSpillFull):
		s.shards[0].dropped[dropSpillFull].Add(uint64(n))
	case errors.Is(err, errEncode):
		s.shards[0].dropped[dropEncodeError].Add(uint64(n))
	default:
		s.shards[0].dropped[dropSpillFailed].Add(uint64(n))
	}
}

// abandon accounts for a batch that was never delivered: err entries are spilled, info
// entries counted as dropped at shutdown.
func (s *stream) abandon(b *batch) {
	if s.id == errStream {
		s.spillSealed(b)
		return
	}
	s.shards[0].dropped[dropShutdown].Add(uint64(b.n))
	s.finish(b)
}

// spillEntry spills one err entry that could not be buffered (to SpillDir or ErrFallback)
// and counts it. With a durable spill it also wakes the sender: full buffers are a reason
// to move the queued batches to the spill now.
func (s *stream) spillEntry(ctx *encodedContext, ent zapcore.Entry, fields []zapcore.Field) {
	s.countSpill(s.spill.spillEntry(s.tag, ctx, ent, fields), 1)
	if s.spillKick != nil {
		select {
		case s.spillKick <- struct{}{}:
		default:
		}
	}
}

func (s *stream) stats() StreamStats {
	st := StreamStats{
		Dropped:       make(map[string]uint64, numDropReasons),
		Delivered:     s.delivered.Load(),
		Spilled:       s.spilled.Load(),
		Replayed:      s.replayed.Load(),
		BufferedBytes: s.queuedBytes.Load(),
		CapacityBytes: int64(s.nbatches * s.batchCap),
		SentBatches:   s.sentBatches.Load(),
		SentBytes:     s.sentBytes.Load(),
		SendErrors:    s.sendErrors.Load(),
		Reconnects:    s.reconnects.Load(),

		HandshakeFailures: s.fwd.handshakeFailures.Load(),
	}
	for r := dropReason(0); r < numDropReasons; r++ {
		st.Dropped[r.String()] = 0
	}
	for i := range s.shards {
		sh := &s.shards[i]
		st.Entries += sh.entries.Load()
		for r := dropReason(0); r < numDropReasons; r++ {
			st.Dropped[r.String()] += sh.dropped[r].Load()
		}
	}
	if s.disk != nil {
		st.SpillBytes = s.disk.bytes.Load()
		st.SpillCorruptSegments = s.disk.corrupt.Load()
	}
	if s.degrade != nil {
		st.Degraded = s.degrade.active.Load()
		st.DegradeTransitions = s.degrade.transitions.Load()
	}
	return st
}

// countCheckDrop counts an info entry dropped in Check (degraded or sampled).
func (s *stream) countCheckDrop(r dropReason) {
	sh := &s.shards[rand.N(len(s.shards))]
	sh.entries.Add(1)
	sh.dropped[r].Add(1)
}

// sink is the two streams, their senders and the clock that flushes them and drives the
// degrade state machine.
type sink struct {
	streams   [numStreams]*stream
	settings  *settings
	metrics   *metrics
	configErr error // what Validate found, reported by Sync and Close
	spillErr  error // why SpillDir could not be used, if it could not
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	stopTick  chan struct{}
	closing   sync.Once
	closeErr  error
}

func newSink(s *settings, constLabels map[string]string) *sink {
	k := &sink{settings: s, stopTick: make(chan struct{})}
	tags := s.tags
	budgets := [numStreams]int{s.infoBufferBytes, s.errBufferBytes}
	fallback := newJSONSpiller(s.errFallback, s.enc)
	var (
		sp   spiller = fallback
		disk *diskSpill
	)
	if s.spillDir != "" {
		var err error
		if disk, err = openSpill(s.spillDir, s.spillMaxBytes, s.batchBytes, s.enc, s.onEvent); err != nil {
			k.spillErr = err
		} else {
			sp = spillChain{disk: disk, fallback: fallback}
		}
	}
	for id := streamID(0); id < numStreams; id++ {
		var d *diskSpill
		if id == errStream {
			d = disk
		}
		k.streams[id] = newStream(id, tags[id], budgets[id], s, newForwarder(s), sp, d)
	}
	k.metrics = newMetrics(k, constLabels)
	for _, st := range k.streams {
		st.sendDuration = k.metrics.sendDuration.WithLabelValues(st.id.String())
	}
	ctx, cancel := context.WithCancel(context.Background())
	k.cancel = cancel
	for _, st := range k.streams {
		k.wg.Add(1)
		go func() {
			defer k.wg.Done()
			if st.id == errStream && k.spillErr != nil && s.onEvent != nil {
				s.onEvent(Event{Kind: EventSpillDisabled, Stream: st.id.String(), Time: time.Now(), Err: k.spillErr})
			}
			st.run(ctx, s.newBackoff())
		}()
	}
	k.wg.Add(1)
	go func() {
		defer k.wg.Done()
		k.clock()
	}()
	return k
}

// clock flushes the streams every FlushInterval and feeds the info stream's degrade state
// machine several times a second (and at once when the queue reaches its high watermark).
func (k *sink) clock() {
	// Two tickers: flushing on its own FlushInterval ticker bounds an entry's wait in a
	// batch by FlushInterval itself (a flush on a coarser tick could add a whole tick);
	// the degrade machine is fed every observeEvery.
	flush := time.NewTicker(k.settings.flushInterval)
	defer flush.Stop()
	observe := time.NewTicker(min(k.settings.flushInterval, observeEvery))
	defer observe.Stop()
	info := k.streams[infoStream]
	for {
		select {
		case <-k.stopTick:
			return
		case <-info.kick:
		case <-observe.C:
		case <-flush.C:
			for _, st := range k.streams {
				st.flush()
			}
		}
		k.observeDegrade(time.Now())
	}
}

// observeEvery is how often the degrade state machine is fed when nothing else wakes it.
const observeEvery = 100 * time.Millisecond

func (k *sink) observeDegrade(now time.Time) {
	info := k.streams[infoStream]
	changed, degraded := info.degrade.observe(now, info.fill(), info.fwd.disconnectedFor(now))
	if changed && k.settings.onEvent != nil {
		kind := EventRecovered
		if degraded {
			kind = EventDegraded
		}
		k.settings.onEvent(Event{Kind: kind, Stream: info.id.String(), Time: now})
	}
}

// sync flushes both streams and waits until everything sealed so far is delivered (or given
// up on), or the timeout passes.
func (k *sink) sync(timeout time.Duration) error {
	var targets [numStreams]uint64
	for id, st := range k.streams {
		st.flush()
		targets[id] = st.lastSealed()
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	for id, st := range k.streams {
		if !st.waitDone(targets[id], t.C) {
			err := fmt.Errorf("fluentcore: sync: %s stream not delivered within %v", st.id, timeout)
			if last := st.fwd.lastError(); last != nil {
				err = fmt.Errorf("%w; last send error: %w", err, last) // e.g. ErrHandshake
			}
			return err
		}
	}
	return nil
}

// close stops accepting entries, tries to deliver what was accepted within timeout, then
// stops the senders and accounts for whatever is left: info as dropped (shutdown), err as
// spilled (to SpillDir, for the next process to replay, or to ErrFallback).
func (k *sink) close(timeout time.Duration) error {
	k.closing.Do(func() {
		for _, st := range k.streams {
			st.closed.Store(true)
		}
		err := k.sync(timeout)
		k.cancel()
		close(k.stopTick)
		k.wg.Wait()
		for _, st := range k.streams {
			if st.pending != nil {
				st.abandon(st.pending)
				st.pending = nil
			}
			for len(st.queue) > 0 {
				st.abandon(<-st.queue)
			}
			st.fwd.close()
			if st.disk != nil {
				st.disk.close() // releases SpillDir; later err entries go to ErrFallback
			}
		}
		if err != nil {
			err = errors.Join(err, fmt.Errorf("fluentcore: close: undelivered info entries were dropped and err entries spilled to the fallback"))
		}
		k.closeErr = err
	})
	return k.closeErr
}
