package bench

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
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
	*tcpServer
	tag        string
	othersRate float64 // entries a second it takes of the other tags; 0: no limit

	// under tcpServer.mu:
	lat        []time.Duration // of the clocked tag's entries, in arrival order
	others     int64           // entries of other tags
	marked     int64           // entries of other tags that contain RareMark
	violations int64
}

// StartClock starts a ClockReceiver for tag on a free loopback port. It returns an error if it
// cannot listen.
func StartClock(tag string) (*ClockReceiver, error) { return StartClockRate(tag, 0) }

// StartClockRate is StartClock for a receiver that takes at most othersRate entries a
// second of the other tags, as a fluentd whose output is slow (0: no limit); the clocked
// tag's entries, on their own connection, are read as they come.
func StartClockRate(tag string, othersRate float64) (*ClockReceiver, error) {
	s, err := listenTCP()
	if err != nil {
		return nil, err
	}
	r := &ClockReceiver{tcpServer: s, tag: tag, othersRate: othersRate}
	s.start(r.serve, func() int64 { return int64(len(r.lat)) })
	return r, nil
}

// RareMark is in the message of the skew scenario's rare entries: the clock receiver counts
// the entries that contain it (Marked), so that the scenario counts the rare entries that
// arrived rather than estimate them.
const RareMark = "rare message "

// Marked returns the entries of other tags received so far that contain RareMark.
func (r *ClockReceiver) Marked() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.marked
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

// Wait implements Counter.Wait for the clocked tag's entries.
func (r *ClockReceiver) Wait(want int64, quiet, max time.Duration) int64 {
	return waitDelivered(r, want, quiet, max)
}

func (r *ClockReceiver) serve(c net.Conn) {
	rd := msgp.NewReaderSize(c, 64<<10)
	var payload []byte
	var lat []time.Duration
	var paceAt time.Time  // othersRate: when this connection's entries so far fit the rate
	var chunk, ack []byte // the request's ack token, if it asked for one; the reply
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
		chunk = chunk[:0]
		if err == nil && n == 3 {
			chunk, err = readChunk(rd, chunk)
		}
		now := time.Now()
		var others int64
		if err == nil {
			lat, others, err = r.entries(tag, payload, now, lat[:0])
		}
		if err == nil && others > 0 && r.othersRate > 0 {
			paceAt = maxTime(paceAt, now).Add(time.Duration(float64(others) / r.othersRate * float64(time.Second)))
			select {
			case <-time.After(time.Until(paceAt)):
			case <-r.done:
				return
			}
		}
		if err == nil && len(chunk) > 0 {
			// Acked once the entries are counted, as fluentd acks once they are emitted.
			ack = msgp.AppendMapHeader(ack[:0], 1)
			ack = msgp.AppendString(ack, "ack")
			ack = msgp.AppendStringFromBytes(ack, chunk)
			if _, werr := c.Write(ack); werr != nil {
				return
			}
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

// readChunk reads a request's option map and returns its "chunk" (the ack token) appended
// to buf, or buf if it has none.
func readChunk(rd *msgp.Reader, buf []byte) ([]byte, error) {
	n, err := rd.ReadMapHeader()
	for ; err == nil && n > 0; n-- {
		var key string
		if key, err = rd.ReadString(); err != nil {
			break
		}
		if key == "chunk" {
			buf, err = rd.ReadStringAsBytes(buf)
		} else {
			err = rd.Skip()
		}
	}
	return buf, err
}

// entries decodes the entries of one request: their latencies if tag is the clocked one,
// their number otherwise.
func (r *ClockReceiver) entries(tag string, b []byte, now time.Time, lat []time.Duration) ([]time.Duration, int64, error) {
	clocked := tag == r.tag
	var others, marked int64
	for len(b) > 0 {
		n, rest, err := msgp.ReadArrayHeaderBytes(b)
		if err != nil {
			return lat, 0, err
		}
		if n != 2 || len(rest) < 10 || rest[0] != 0xd7 || rest[1] != 0 {
			return lat, 0, errors.New("entry is not [EventTime, record]")
		}
		if clocked {
			sec := binary.BigEndian.Uint32(rest[2:6])
			nsec := binary.BigEndian.Uint32(rest[6:10])
			lat = append(lat, now.Sub(time.Unix(int64(sec), int64(nsec))))
		}
		next, err := msgp.Skip(rest[10:])
		if err != nil {
			return lat, 0, err
		}
		if !clocked {
			others++
			if bytes.Contains(rest[10:len(rest)-len(next)], rareMark) {
				marked++
			}
		}
		b = next
	}
	r.mu.Lock()
	r.lat = append(r.lat, lat...)
	r.others += others
	r.marked += marked
	r.changedLocked()
	r.mu.Unlock()
	return lat, others, nil
}

var rareMark = []byte(RareMark)

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

var _ Counter = (*ClockReceiver)(nil)
