package bench

import (
	"bytes"
	"net"
	"time"

	"github.com/fluentcore/fluentcore/forwardtest"
)

// Counter is a receiver that only counts what arrives: forwardtest's count-only Forward
// receiver for the fluentd clients, LineReceiver for zap's JSON lines. Benchmarks wait on it
// until every entry a client accepted has arrived. Implementations are safe for concurrent
// use.
type Counter interface {
	// Addr is the address to give the client: "tcp://127.0.0.1:PORT".
	Addr() string
	// Count returns the entries received so far.
	Count() int64
	// Wait waits until at least want entries have arrived, or none has arrived for quiet, or
	// max has passed, and returns the count. Call it once the client has flushed: from then
	// on entries only arrive while the receiver is still reading what was written, so a
	// quiet receiver means the rest will not come.
	Wait(want int64, quiet, max time.Duration) int64
	// Violations returns the number of requests rejected as malformed (each closes its
	// connection, so the entries in it and after it on that connection are lost).
	Violations() int64
	// CPU returns the CPU time the receiver has used, if it runs in its own process (see
	// StartRemote); 0 otherwise.
	CPU() time.Duration
	// Stall stops reading from every connection until Resume.
	Stall()
	// Resume reads again.
	Resume()
	// Close stops the receiver and closes every connection.
	Close() error
}

// waiter is the one primitive Wait is built on.
type waiter interface {
	Count() int64
	waitFor(cond func(n int64) bool, timeout time.Duration) (int64, bool)
}

// StartForward starts forwardtest's receiver in count-only mode on a free loopback port.
// It returns an error if it cannot listen.
func StartForward() (Counter, error) {
	r, err := forwardtest.Start(forwardtest.CountOnly(), forwardtest.WithLogf(nil))
	if err != nil {
		return nil, err
	}
	return forwardCounter{r}, nil
}

type forwardCounter struct{ *forwardtest.Receiver }

func (f forwardCounter) Count() int64 { return int64(f.Len()) }

func (f forwardCounter) Violations() int64 { return f.Stats().Violations }

func (f forwardCounter) CPU() time.Duration { return 0 }

func (f forwardCounter) Wait(want int64, quiet, max time.Duration) int64 {
	return waitDelivered(f, want, quiet, max)
}

func (f forwardCounter) waitFor(cond func(int64) bool, timeout time.Duration) (int64, bool) {
	var last int64
	err := f.Receiver.WaitFor(func(s forwardtest.Stats) bool {
		last = s.Entries
		return cond(last)
	}, timeout)
	return last, err == nil
}

// waitDelivered implements Counter.Wait.
func waitDelivered(w waiter, want int64, quiet, max time.Duration) int64 {
	deadline := time.Now().Add(max)
	last := w.Count()
	for last < want {
		left := time.Until(deadline)
		if left <= 0 {
			return last
		}
		prev := last
		n, ok := w.waitFor(func(n int64) bool { return n >= want || n != prev }, min(quiet, left))
		if !ok && n == prev {
			return n // nothing arrived for quiet: what is missing will not come
		}
		last = n
	}
	return last
}

// LineReceiver is a TCP server that counts newline-terminated lines, for zap's JSON encoder
// writing through a BufferedWriteSyncer to a socket. Counting is a bytes.Count over each
// read, far cheaper per entry than any Forward decoding. It is safe for concurrent use.
type LineReceiver struct {
	*tcpServer
	lines int64 // under tcpServer.mu
}

// StartLines starts a LineReceiver on a free loopback port. It returns an error if it cannot
// listen.
func StartLines() (*LineReceiver, error) {
	s, err := listenTCP()
	if err != nil {
		return nil, err
	}
	r := &LineReceiver{tcpServer: s}
	s.start(r.serve, func() int64 { return r.lines })
	return r, nil
}

// Violations is always 0: lines are not checked.
func (r *LineReceiver) Violations() int64 { return 0 }

// Wait implements Counter.Wait.
func (r *LineReceiver) Wait(want int64, quiet, max time.Duration) int64 {
	return waitDelivered(r, want, quiet, max)
}

func (r *LineReceiver) serve(c net.Conn) {
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		// A read already waiting when Stall is called returns new data: hold it until
		// Resume, so that a stalled receiver counts nothing more.
		if !r.gate() {
			return
		}
		if k := bytes.Count(buf[:n], []byte{'\n'}); k > 0 {
			r.mu.Lock()
			r.lines += int64(k)
			r.changedLocked()
			r.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

var _ Counter = (*LineReceiver)(nil)
