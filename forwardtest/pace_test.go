package forwardtest

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore/internal/testkit"
	"github.com/tinylib/msgp/msgp"
)

// WithReadRate holds the receiver to its rate: a flood of entries arrives no faster.
func TestReadRateLimitsEntriesPerSecond(t *testing.T) {
	r := NewReceiver(t, CountOnly(), WithReadRate(20_000))
	c, err := net.Dial("tcp", strings.TrimPrefix(r.Addr(), "tcp://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	frame := msgp.AppendArrayHeader(nil, 3)
	frame = msgp.AppendString(frame, "t")
	frame = msgp.AppendBytes(frame, testkit.Entries(1000, "x"))
	frame = msgp.AppendMapHeader(frame, 1)
	frame = msgp.AppendString(frame, "size")
	frame = msgp.AppendInt(frame, 1000)
	go func() {
		for range 10 {
			if _, err := c.Write(frame); err != nil {
				return
			}
		}
	}()
	start := time.Now()
	if _, err := r.WaitForEntries(10_000, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	// 10000 entries at 20000/s: the last request is read once the first nine fit, 450 ms.
	if d := time.Since(start); d < 400*time.Millisecond {
		t.Errorf("10000 entries arrived in %v; at 20000/s that takes at least 450 ms", d)
	}
}

// WithConnReadRate paces each connection on its own, where WithReadRate shares its rate
// out over all of them: two connections with a backlog each take twice as long with the
// shared rate. Both runs are in this test, so that their ratio, not a wall time, decides.
func TestConnReadRatePacesEachConnection(t *testing.T) {
	const rate, perConn = 20_000, 10 // requests of 1000 entries on each of two connections
	frame := func(tag string) []byte {
		return req(tag, bin(testkit.Entries(1000, "x")), m("size", 1000))
	}
	took := func(opt Option) time.Duration {
		r := NewReceiver(t, CountOnly(), opt)
		start := time.Now()
		for _, c := range []net.Conn{dial(t, r.Addr()), dial(t, r.Addr())} {
			go func() {
				for range perConn {
					if _, err := c.Write(frame("t")); err != nil {
						return
					}
				}
			}()
		}
		if err := r.WaitFor(func(s Stats) bool { return s.Entries == 2*perConn*1000 }, waitTimeout); err != nil {
			t.Fatal(err)
		}
		return time.Since(start)
	}
	shared, own := took(WithReadRate(rate)), took(WithConnReadRate(rate))
	// Each connection's last request is read once its first nine fit: 450 ms on its own
	// rate, 950 ms when the two share one.
	if own < 400*time.Millisecond {
		t.Errorf("each connection's 10000 entries arrived in %v; at 20000/s that takes at least 450 ms", own)
	}
	if own > shared*3/4 {
		t.Errorf("paced per connection the two took %v, shared %v: want about half", own, shared)
	}
}
