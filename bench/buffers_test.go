package bench

import (
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/tinylib/msgp/msgp"
)

// BenchmarkBuffers measures the design choice under fluentcore's sink on its own: where an
// entry is encoded and where its memory comes from. Four models of the same sink — sharded
// batch buffers (2 × GOMAXPROCS shards, each a mutex and an open batch), sealed batches
// queued to one sender that writes them to io.Discard — differ only in that:
//
//   - direct: entries are encoded straight into the shard's batch; batches come from a
//     fixed free list allocated once (fluentcore's design);
//   - pool-entry: each entry is encoded into a sync.Pool-recycled buffer, then copied into
//     the batch under the shard's lock;
//   - alloc-entry: each entry is encoded into a freshly allocated buffer, then copied;
//   - pool-batch: like direct, but batches are recycled through a sync.Pool instead of the
//     fixed free list (memory is no longer bounded by configuration).
//
// The encoding is the same everywhere: the benchmark record as a Forward entry, written with
// tinylib/msgp's append functions. Writers that find no free batch wait for one (so no model
// drops work). Goroutines: 1, 16, 256.
func BenchmarkBuffers(b *testing.B) {
	for _, g := range []int{1, 16, 256} {
		for _, m := range []bufMode{direct, poolEntry, allocEntry, poolBatch} {
			b.Run(fmt.Sprintf("goroutines=%d/model=%s", g, m), func(b *testing.B) {
				s := newModelSink(m, 32, 256<<10)
				b.ReportAllocs()
				b.ResetTimer()
				inGoroutines(g)(b, s.write)
				s.flush()
				b.StopTimer()
				if s.entries() != int64(b.N) {
					b.Fatalf("sink wrote %d entries, want %d", s.entries(), b.N)
				}
				s.stop()
			})
		}
	}
}

type bufMode int

const (
	direct bufMode = iota
	poolEntry
	allocEntry
	poolBatch
)

func (m bufMode) String() string {
	return [...]string{"direct", "pool-entry", "alloc-entry", "pool-batch"}[m]
}

type modelBatch struct {
	buf []byte
	n   int
}

type modelShard struct {
	mu  sync.Mutex
	cur *modelBatch
	_   [48]byte
}

// modelSink is the sink model; see BenchmarkBuffers.
type modelSink struct {
	mode      bufMode
	shards    []modelShard
	free      chan *modelBatch // direct, pool-entry, alloc-entry
	batchPool sync.Pool        // pool-batch
	entryPool sync.Pool        // pool-entry
	queue     chan *modelBatch
	sealAt    int
	batchCap  int
	wg        sync.WaitGroup

	mu      sync.Mutex
	written int64 // entries the sender wrote
	idle    *sync.Cond
	sealed  int64
	done    int64
}

func newModelSink(mode bufMode, nbatches, batchCap int) *modelSink {
	s := &modelSink{
		mode:     mode,
		shards:   make([]modelShard, 2*runtime.GOMAXPROCS(0)),
		free:     make(chan *modelBatch, nbatches),
		queue:    make(chan *modelBatch, 1024),
		sealAt:   batchCap - batchCap/16,
		batchCap: batchCap,
	}
	s.idle = sync.NewCond(&s.mu)
	if mode == poolBatch {
		s.batchPool.New = func() any { return &modelBatch{buf: make([]byte, 0, batchCap)} }
	} else {
		for range nbatches {
			s.free <- &modelBatch{buf: make([]byte, 0, batchCap)}
		}
	}
	s.entryPool.New = func() any { b := make([]byte, 0, 512); return &b }
	s.wg.Add(1)
	go s.send()
	return s
}

func (s *modelSink) takeBatch() *modelBatch {
	if s.mode == poolBatch {
		return s.batchPool.Get().(*modelBatch)
	}
	return <-s.free // waits for the sender when every batch is in use
}

func (s *modelSink) releaseBatch(b *modelBatch) {
	b.buf, b.n = b.buf[:0], 0
	if s.mode == poolBatch {
		s.batchPool.Put(b)
		return
	}
	s.free <- b
}

// write appends one entry.
func (s *modelSink) write() {
	now := time.Now()
	var scratch *[]byte
	var enc []byte
	switch s.mode {
	case poolEntry:
		scratch = s.entryPool.Get().(*[]byte)
		enc = appendModelEntry((*scratch)[:0], now)
	case allocEntry:
		enc = appendModelEntry(make([]byte, 0, 512), now)
	}
	sh := &s.shards[rand.N(len(s.shards))]
	sh.mu.Lock()
	if sh.cur == nil {
		sh.cur = s.takeBatch()
	}
	b := sh.cur
	if enc != nil {
		b.buf = append(b.buf, enc...)
	} else {
		b.buf = appendModelEntry(b.buf, now)
	}
	b.n++
	if len(b.buf) >= s.sealAt {
		sh.cur = nil
		s.seal(b)
	}
	sh.mu.Unlock()
	if scratch != nil {
		*scratch = enc[:0]
		s.entryPool.Put(scratch)
	}
}

func (s *modelSink) seal(b *modelBatch) {
	s.mu.Lock()
	s.sealed++
	s.mu.Unlock()
	s.queue <- b
}

func (s *modelSink) send() {
	defer s.wg.Done()
	for b := range s.queue {
		_, _ = io.Discard.Write(b.buf)
		n := b.n
		s.releaseBatch(b)
		s.mu.Lock()
		s.written += int64(n)
		s.done++
		s.idle.Broadcast()
		s.mu.Unlock()
	}
}

// flush seals every open batch and waits until the sender has written everything.
func (s *modelSink) flush() {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		if sh.cur != nil && sh.cur.n > 0 {
			s.seal(sh.cur)
			sh.cur = nil
		}
		sh.mu.Unlock()
	}
	s.mu.Lock()
	for s.done < s.sealed {
		s.idle.Wait()
	}
	s.mu.Unlock()
}

func (s *modelSink) entries() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.written
}

func (s *modelSink) stop() {
	close(s.queue)
	s.wg.Wait()
}

// appendModelEntry appends the benchmark record as a Forward entry, [EventTime, map], with
// the keys zap's production encoder uses.
func appendModelEntry(dst []byte, t time.Time) []byte {
	dst = msgp.AppendArrayHeader(dst, 2)
	dst = append(dst, 0xd7, 0x00)
	dst = binary.BigEndian.AppendUint32(dst, uint32(t.Unix()))
	dst = binary.BigEndian.AppendUint32(dst, uint32(t.Nanosecond()))
	dst = msgp.AppendMapHeader(dst, 12)
	dst = msgp.AppendString(dst, "level")
	dst = msgp.AppendString(dst, "info")
	dst = msgp.AppendString(dst, "msg")
	dst = msgp.AppendString(dst, Message)
	dst = msgp.AppendString(dst, "method")
	dst = msgp.AppendString(dst, "GET")
	dst = msgp.AppendString(dst, "path")
	dst = msgp.AppendString(dst, "/api/v1/users/12345/orders")
	dst = msgp.AppendString(dst, "status")
	dst = msgp.AppendInt64(dst, 200)
	dst = msgp.AppendString(dst, "latency_ms")
	dst = msgp.AppendFloat64(dst, 12.345)
	dst = msgp.AppendString(dst, "bytes")
	dst = msgp.AppendInt64(dst, 5120)
	dst = msgp.AppendString(dst, "user_id")
	dst = msgp.AppendString(dst, "u-8f3a2b9c")
	dst = msgp.AppendString(dst, "trace_id")
	dst = msgp.AppendString(dst, TraceID)
	dst = msgp.AppendString(dst, "ok")
	dst = msgp.AppendBool(dst, true)
	dst = msgp.AppendString(dst, "retries")
	dst = msgp.AppendInt64(dst, 0)
	dst = msgp.AppendString(dst, "region")
	dst = msgp.AppendString(dst, "ap-northeast-1")
	return dst
}
