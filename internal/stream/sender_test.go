package stream

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/fluentcore/fluentcore/internal/testkit"
)

// The sender allocates nothing per frame once connected. An allocating goroutine is made to
// assist the garbage collector, and under a flood of allocating loggers the sender was parked
// in those assists for most of the time, so delivery collapsed (bench: cmd/throughput -g 1024).
func TestSenderAllocatesNothingPerFrame(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer ln.Close()
	wg.Add(1)
	go func() {
		defer wg.Done()
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = io.Copy(io.Discard, c) // until the client closes
	}()
	// A stream whose sender is this test: post is what run calls for each batch it takes.
	st := newTestStream(testSettings(defaultBatchBytes, defaultEntryBytes), 1<<20, &testPolicy{}, testForwarders(t, ln.Addr().String(), 1)[0])
	defer st.Senders[0].fwd.Close() // before wg.Wait: the server reads until the client closes
	entry := []byte{0x92, 0xd7, 0x00, 0, 0, 0, 1, 0, 0, 0, 0, 0x81, 0xa1, 'k', 0xa1, 'v'}
	frame := func() {
		b := st.Ring.Take(nil)
		b.Buf = append(b.Buf, entry...)
		b.N = 1
		st.Ring.Seal(b)
		b = <-st.Ring.Queue()
		snd := st.Senders[0]
		snd.out = append(snd.out, b)
		if !snd.post(context.Background()) {
			t.Fatal("not delivered")
		}
		snd.out = snd.out[:0]
	}
	frame() // connects
	if st.sends.sentBatches.Load() != 1 {
		t.Fatalf("sent %d batches", st.sends.sentBatches.Load())
	}
	if a := testkit.SteadyAllocs(200, frame); a != 0 {
		t.Fatalf("the sender allocates %.1f times per frame", a)
	}
}
