package forwardtest

import (
	"fmt"
	"testing"
	"time"

	"github.com/tinylib/msgp/msgp"
)

// readAck reads one {"ack": token} reply.
func readAck(t *testing.T, rd *msgp.Reader) string {
	t.Helper()
	n, err := rd.ReadMapHeader()
	if err != nil || n != 1 {
		t.Fatalf("ack map header: %d, %v", n, err)
	}
	if k, err := rd.ReadString(); err != nil || k != "ack" {
		t.Fatalf("ack key %q, %v", k, err)
	}
	tok, err := rd.ReadString()
	if err != nil {
		t.Fatalf("ack value: %v", err)
	}
	return tok
}

func TestAck(t *testing.T) {
	for _, countOnly := range []bool{false, true} {
		t.Run(fmt.Sprintf("countOnly=%v", countOnly), func(t *testing.T) {
			var opts []Option
			if countOnly {
				opts = append(opts, CountOnly())
			}
			r := NewReceiver(t, opts...)
			c := dial(t, r.Addr())
			if err := c.SetReadDeadline(time.Now().Add(waitTimeout)); err != nil {
				t.Fatal(err)
			}
			rd := msgp.NewReader(c)
			packed := cat(entry(et(1, 2), m("a", 1)), entry(et(3, 4), m("b", 2)))
			tokens := []string{"p8n9gmxTQVC8/nh2wlKKeQ==", "aGVsbG8gd29ybGQgMTIzNA==\n", ""}
			reqs := [][]byte{
				req("t", bin(packed), m("size", 2, "chunk", tokens[0])),
				req("t", bin(gz(packed)), m("chunk", tokens[1], "compressed", "gzip")),
				req("t", et(5, 6), m("c", 3), m("chunk", tokens[2])),
			}
			total := 0
			for i, q := range reqs {
				send(t, c, q)
				total += []int{2, 2, 1}[i]
				if got := readAck(t, rd); got != tokens[i] {
					t.Errorf("ack %d = %q, want %q", i, got, tokens[i])
				}
				// The ack is written after the entries are stored.
				if r.Len() != total {
					t.Errorf("after ack %d: Len = %d, want %d", i, r.Len(), total)
				}
			}
			// A request without chunk gets no reply: the next bytes are the next ack.
			send(t, c, req("t", bin(packed)), req("t", bin(packed), m("chunk", "last")))
			if got := readAck(t, rd); got != "last" {
				t.Errorf("ack = %q, want last", got)
			}
			if err := r.WaitFor(func(s Stats) bool { return s.Acks == 4 }, waitTimeout); err != nil {
				t.Fatal(err)
			}
			if got, want := len(r.Entries()), 9; !countOnly && got != want {
				t.Errorf("stored %d entries, want %d", got, want)
			}
		})
	}
}

// WithAckDelay holds each ack back for the delay while the connection reads on: two
// requests sent back to back are both stored before the first ack comes, and the acks keep
// their order.
func TestAckDelayDoesNotHoldBackReading(t *testing.T) {
	const delay = 300 * time.Millisecond
	r := NewReceiver(t, WithAckDelay(delay))
	c := dial(t, r.Addr())
	if err := c.SetReadDeadline(time.Now().Add(waitTimeout)); err != nil {
		t.Fatal(err)
	}
	rd := msgp.NewReader(c)
	packed := cat(entry(et(1, 2), m("a", 1)))
	start := time.Now()
	send(t, c, req("t", bin(packed), m("size", 1, "chunk", "one")), req("t", bin(packed), m("size", 1, "chunk", "two")))
	if got := readAck(t, rd); got != "one" {
		t.Errorf("first ack = %q, want one", got)
	}
	if d := time.Since(start); d < delay {
		t.Errorf("first ack after %v, want at least the %v delay", d, delay)
	}
	// Both requests were read while the first ack waited.
	if got := r.Len(); got != 2 {
		t.Errorf("when the first ack came, %d entries were stored, want 2", got)
	}
	if got := readAck(t, rd); got != "two" {
		t.Errorf("second ack = %q, want two", got)
	}
	if err := r.WaitFor(func(s Stats) bool { return s.Acks == 2 }, waitTimeout); err != nil {
		t.Fatal(err)
	}
}

// A receiver that closes after each request (DenyKeepalive) writes the delayed ack first.
func TestAckDelayAcksBeforeDenyKeepaliveClose(t *testing.T) {
	r := NewReceiver(t, WithAckDelay(50*time.Millisecond), DenyKeepalive())
	c := dial(t, r.Addr())
	if err := c.SetReadDeadline(time.Now().Add(waitTimeout)); err != nil {
		t.Fatal(err)
	}
	send(t, c, req("t", bin(cat(entry(et(1, 2), m("a", 1)))), m("size", 1, "chunk", "only")))
	if got := readAck(t, msgp.NewReader(c)); got != "only" {
		t.Errorf("ack = %q, want only", got)
	}
}
