package bench

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/tinylib/msgp/msgp"
)

// ClockReceiver is a minimal Forward receiver for the err-latency benchmark: for every entry
// of one tag it records the time from the entry's EventTime (set by the log call) to its
// arrival, and it counts and discards the entries of every other tag. It reads PackedForward
// requests only ([tag, bin, options?], what fluentcore sends) and closes a connection on
// anything else. forwardtest's count-only mode cannot tell when an entry of a given tag
// arrived, hence this receiver. It is safe for concurrent use.
type ClockReceiver struct {
	tag  string
	ln   net.Listener
	done chan struct{}
	wg   sync.WaitGroup
	once sync.Once

	mu         sync.Mutex
	lat        []time.Duration // of the clocked tag's entries, in arrival order
	others     int64           // entries of other tags
	violations int64
	conns      map[net.Conn]struct{}
	changed    chan struct{}
	stalled    chan struct{}
	closed     bool
}

// StartClock starts a ClockReceiver for tag on a free loopback port. It returns an error if it
// cannot listen.
func StartClock(tag string) (*ClockReceiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("bench: listen: %w", err)
	}
	r := &ClockReceiver{tag: tag, ln: ln, done: make(chan struct{}), conns: make(map[net.Conn]struct{})}
	r.wg.Add(1)
	go r.accept()
	return r, nil
}

// Addr returns "tcp://127.0.0.1:PORT".
func (r *ClockReceiver) Addr() string { return "tcp://" + r.ln.Addr().String() }

// Count returns the entries of the clocked tag received so far.
func (r *ClockReceiver) Count() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return int64(len(r.lat))
}

// Others returns the entries of other tags received so far.
func (r *ClockReceiver) Others() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.others
}

// Latencies returns a copy of the recorded latencies, in arrival order.
func (r *ClockReceiver) Latencies() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Duration(nil), r.lat...)
}

// Violations counts connections closed because of a request this receiver cannot read.
func (r *ClockReceiver) Violations() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.violations
}

// CPU is 0: the receiver runs in the caller's process.
func (r *ClockReceiver) CPU() time.Duration { return 0 }

// Wait implements Counter.Wait for the clocked tag's entries.
func (r *ClockReceiver) Wait(want int64, quiet, max time.Duration) int64 {
	return waitDelivered(r, want, quiet, max)
}

func (r *ClockReceiver) waitFor(cond func(int64) bool, timeout time.Duration) (int64, bool) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		r.mu.Lock()
		n := int64(len(r.lat))
		if cond(n) {
			r.mu.Unlock()
			return n, true
		}
		if r.changed == nil {
			r.changed = make(chan struct{})
		}
		ch := r.changed
		r.mu.Unlock()
		select {
		case <-ch:
		case <-r.done:
			return r.Count(), false
		case <-t.C:
			return r.Count(), false
		}
	}
}

// Stall stops reading until Resume.
func (r *ClockReceiver) Stall() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stalled == nil {
		r.stalled = make(chan struct{})
	}
}

// Resume undoes Stall.
func (r *ClockReceiver) Resume() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stalled != nil {
		close(r.stalled)
		r.stalled = nil
	}
}

// Close stops the receiver and waits for its goroutines.
func (r *ClockReceiver) Close() error {
	var err error
	r.once.Do(func() {
		r.mu.Lock()
		r.closed = true
		for c := range r.conns {
			_ = c.Close()
		}
		r.mu.Unlock()
		close(r.done)
		err = r.ln.Close()
		r.wg.Wait()
	})
	return err
}

func (r *ClockReceiver) accept() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			_ = c.Close()
			return
		}
		r.conns[c] = struct{}{}
		r.wg.Add(1)
		r.mu.Unlock()
		go r.serve(c)
	}
}

func (r *ClockReceiver) serve(c net.Conn) {
	defer r.wg.Done()
	defer func() {
		_ = c.Close()
		r.mu.Lock()
		delete(r.conns, c)
		r.mu.Unlock()
	}()
	rd := msgp.NewReaderSize(c, 64<<10)
	var payload []byte
	var lat []time.Duration
	for {
		if !r.gate() {
			return
		}
		n, err := rd.ReadArrayHeader()
		if err != nil {
			return
		}
		tag, err := rd.ReadString()
		if err == nil && (n < 2 || n > 3) {
			err = fmt.Errorf("request of %d elements", n)
		}
		if err == nil {
			payload, err = rd.ReadBytes(payload[:0])
		}
		if err == nil && n == 3 {
			err = rd.Skip()
		}
		now := time.Now()
		if err == nil {
			lat, err = r.entries(tag, payload, now, lat[:0])
		}
		if err != nil {
			r.mu.Lock()
			if !r.closed {
				r.violations++
			}
			r.mu.Unlock()
			return
		}
	}
}

// entries decodes the entries of one request: their latencies if tag is the clocked one,
// their number otherwise.
func (r *ClockReceiver) entries(tag string, b []byte, now time.Time, lat []time.Duration) ([]time.Duration, error) {
	clocked := tag == r.tag
	var others int64
	for len(b) > 0 {
		n, rest, err := msgp.ReadArrayHeaderBytes(b)
		if err != nil {
			return lat, err
		}
		if n != 2 || len(rest) < 10 || rest[0] != 0xd7 || rest[1] != 0 {
			return lat, errors.New("entry is not [EventTime, record]")
		}
		if clocked {
			sec := binary.BigEndian.Uint32(rest[2:6])
			nsec := binary.BigEndian.Uint32(rest[6:10])
			lat = append(lat, now.Sub(time.Unix(int64(sec), int64(nsec))))
		} else {
			others++
		}
		if b, err = msgp.Skip(rest[10:]); err != nil {
			return lat, err
		}
	}
	r.mu.Lock()
	r.lat = append(r.lat, lat...)
	r.others += others
	if r.changed != nil {
		close(r.changed)
		r.changed = nil
	}
	r.mu.Unlock()
	return lat, nil
}

// gate blocks while stalled and reports false once the receiver is closed.
func (r *ClockReceiver) gate() bool {
	for {
		r.mu.Lock()
		ch, closed := r.stalled, r.closed
		r.mu.Unlock()
		if closed {
			return false
		}
		if ch == nil {
			return true
		}
		select {
		case <-ch:
		case <-r.done:
			return false
		}
	}
}

var _ Counter = (*ClockReceiver)(nil)
