package forwardtest

// Frame builders for the tests: requests are assembled from msgp.Append* primitives, not
// from the fluentcore client, so the receiver is checked against the protocol itself.

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore/internal/testkit"
	"github.com/tinylib/msgp/msgp"
)

// eventTime is a msgp.Extension for EventTime, passed to msgp.AppendExtension and never
// registered.
type eventTime = testkit.EventTime

// et encodes an EventTime as fixext8.
func et(sec, nsec uint32) []byte {
	b, err := msgp.AppendExtension(nil, &eventTime{Sec: sec, Nsec: nsec})
	if err != nil {
		panic(err)
	}
	return b
}

// et8 encodes an EventTime in the longer ext8 form (C7 08 00 + 8 bytes).
func et8(sec, nsec uint32) []byte {
	b := []byte{0xc7, 8, 0}
	b = binary.BigEndian.AppendUint32(b, sec)
	return binary.BigEndian.AppendUint32(b, nsec)
}

// ext encodes an extension of any type and payload.
func ext(typ int8, data []byte) []byte {
	b, err := msgp.AppendExtension(nil, &msgp.RawExtension{Type: typ, Data: data})
	if err != nil {
		panic(err)
	}
	return b
}

// it encodes an integer time.
func it(sec int64) []byte { return msgp.AppendInt64(nil, sec) }

// v encodes any value msgp.AppendIntf knows.
func v(x any) []byte {
	b, err := msgp.AppendIntf(nil, x)
	if err != nil {
		panic(err)
	}
	return b
}

// m encodes a map from alternating keys and values; keys are strings, or []byte to be
// appended raw (for non-str keys).
func m(kv ...any) []byte {
	b := msgp.AppendMapHeader(nil, uint32(len(kv)/2))
	for i := 0; i < len(kv); i += 2 {
		switch k := kv[i].(type) {
		case string:
			b = msgp.AppendString(b, k)
		case []byte:
			b = append(b, k...)
		}
		switch x := kv[i+1].(type) {
		case raw:
			b = append(b, x...)
		default:
			b = append(b, v(x)...)
		}
	}
	return b
}

// raw is already-encoded msgpack, inserted as is by m and arr.
type raw []byte

// arr encodes an array of already-encoded elements.
func arr(elems ...[]byte) []byte {
	b := msgp.AppendArrayHeader(nil, uint32(len(elems)))
	for _, e := range elems {
		b = append(b, e...)
	}
	return b
}

// entry encodes [time, record].
func entry(t, rec []byte) []byte { return arr(t, rec) }

// cat concatenates encoded values.
func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// bin encodes bytes as a msgpack bin.
func bin(p []byte) []byte { return msgp.AppendBytes(nil, p) }

// str encodes bytes as a msgpack str.
func str(s string) []byte { return msgp.AppendString(nil, s) }

// gz compresses each member separately and concatenates the results.
func gz(members ...[]byte) []byte {
	var buf bytes.Buffer
	for _, p := range members {
		w := gzip.NewWriter(&buf)
		if _, err := w.Write(p); err != nil {
			panic(err)
		}
		if err := w.Close(); err != nil {
			panic(err)
		}
	}
	return buf.Bytes()
}

// req encodes a request [tag, elems...].
func req(tag string, elems ...[]byte) []byte {
	return arr(append([][]byte{str(tag)}, elems...)...)
}

// dial connects to a receiver address as given by Addr.
func dial(t testing.TB, addr string) net.Conn {
	t.Helper()
	network, address := "tcp", strings.TrimPrefix(addr, "tcp://")
	if strings.HasPrefix(addr, "unix://") {
		network, address = "unix", strings.TrimPrefix(addr, "unix://")
	}
	c, err := net.DialTimeout(network, address, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// send writes requests on c.
func send(t testing.TB, c net.Conn, reqs ...[]byte) {
	t.Helper()
	if err := c.SetWriteDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	for _, r := range reqs {
		if _, err := c.Write(r); err != nil {
			t.Fatalf("write: %v", err)
		}
	}
}

// expectClosed checks that the server closes c: a read ends with EOF or a reset, not a
// timeout, and returns nothing.
func expectClosed(t testing.TB, c net.Conn) {
	t.Helper()
	if err := c.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, c)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("the receiver did not close the connection")
	}
	if n != 0 {
		t.Errorf("the receiver sent %d bytes before closing", n)
	}
}

// fillUntilBlocked writes frame over and over until a write blocks for 200ms, which means
// the kernel buffers between client and receiver are full. It returns the bytes written.
func fillUntilBlocked(t testing.TB, c net.Conn, frame []byte) int {
	t.Helper()
	total := 0
	for total < 1<<30 {
		if err := c.SetWriteDeadline(time.Now().Add(200 * time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		n, err := c.Write(frame)
		total += n
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return total
		}
		if err != nil {
			t.Fatalf("write: %v", err)
		}
	}
	t.Fatal("writes never blocked: the receiver kept reading")
	return 0
}
