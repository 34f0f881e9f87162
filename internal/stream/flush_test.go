package stream

import (
	"testing"

	"github.com/fluentcore/fluentcore/internal/ring"
)

// The flush policy seals the open batches on the clock's tick only while the senders wait
// for work: while one is busy the tick owes the flush, which the sender does once done, and
// only once; a wake seals at once while no acks lag.
func TestFlusherOwesTheFlushWhileASenderIsBusy(t *testing.T) {
	s := testSettings(defaultBatchBytes, defaultEntryBytes)
	fwd := testForwarders(t, "127.0.0.1:1", 1)[0]
	r := ring.New(4, 1<<10, 1, ring.Hooks{})
	view := new(flushCounter)
	f := newFlusher(r, view, dropOverflow{})
	f.senders = Senders{newSender(fwd, r, view, dropOverflow{}, f, &sendCounts{}, s.Clock, 2)}

	f.tick(s.Clock.Now())
	if view.flushes != 1 {
		t.Fatalf("an idle sender's tick flushed %d times, want 1", view.flushes)
	}
	f.busy.Add(1)
	f.tick(s.Clock.Now())
	if view.flushes != 1 || !f.owed.Load() {
		t.Fatalf("a busy sender's tick flushed (%d) or owed nothing (%v)", view.flushes-1, f.owed.Load())
	}
	f.busy.Add(-1)
	f.afterSend()
	f.afterSend()
	if view.flushes != 2 || f.owed.Load() {
		t.Fatalf("after the send: %d flushes, owed %v; want the owed one, once", view.flushes-1, f.owed.Load())
	}
	f.wake()
	if view.flushes != 3 {
		t.Fatalf("a wake with no acks lagging flushed %d times, want 1", view.flushes-2)
	}
}

// flushCounter is a streamView that counts its flushes; the flusher uses nothing else.
type flushCounter struct{ flushes int }

func (*flushCounter) regroup(*ring.Batch)                {}
func (*flushCounter) tagOf(uint16) string                { return "" }
func (*flushCounter) countDelivered(uint16, []byte, int) {}
func (*flushCounter) countSpill(error, int, uint16)      {}
func (c *flushCounter) Flush()                           { c.flushes++ }
