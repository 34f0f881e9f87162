package interop

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/tinylib/msgp/msgp"
)

// tap is a TCP proxy between the core and a receiver that records what the core sends,
// so that a test can check the carrier mode on the wire: the receivers do not say which
// mode a request used.
type tap struct {
	ln       net.Listener
	upstream string

	mu    sync.Mutex
	conns []*bytes.Buffer // client-to-server bytes, per connection
	open  map[net.Conn]struct{}
	wg    sync.WaitGroup
}

func newTap(t *testing.T, upstream string) *tap {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tp := &tap{ln: ln, upstream: upstream, open: make(map[net.Conn]struct{})}
	tp.wg.Add(1)
	go tp.accept()
	t.Cleanup(func() {
		_ = ln.Close()
		tp.mu.Lock()
		for c := range tp.open {
			_ = c.Close()
		}
		tp.mu.Unlock()
		tp.wg.Wait()
	})
	return tp
}

func (tp *tap) addr() string { return tp.ln.Addr().String() }

func (tp *tap) accept() {
	defer tp.wg.Done()
	for {
		c, err := tp.ln.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", tp.upstream)
		if err != nil {
			_ = c.Close()
			continue
		}
		rec := &lockedWriter{mu: &tp.mu, b: new(bytes.Buffer)}
		tp.mu.Lock()
		tp.conns = append(tp.conns, rec.b)
		tp.open[c], tp.open[u] = struct{}{}, struct{}{}
		tp.mu.Unlock()
		closeBoth := func() {
			_ = c.Close()
			_ = u.Close()
		}
		tp.wg.Add(2)
		go func() {
			defer tp.wg.Done()
			defer closeBoth()
			_, _ = io.Copy(u, io.TeeReader(c, rec))
		}()
		go func() {
			defer tp.wg.Done()
			defer closeBoth()
			_, _ = io.Copy(c, u)
		}()
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// frame is one request the core sent, as seen on the wire.
type frame struct {
	tag        string
	mode       string         // Message, Forward, PackedForward, CompressedPackedForward
	entriesFmt string         // "bin" or "str" for the packed modes
	gzipMagic  bool           // the packed entries start with the gzip magic 1f 8b
	entries    int            // entries in the request (after gunzip)
	options    map[string]any // the option map, nil if absent
}

// frames decodes every complete request the core sent, on every connection, in order.
// A trailing partial request (still in flight) is ignored.
func (tp *tap) frames() ([]frame, error) {
	tp.mu.Lock()
	bufs := make([][]byte, len(tp.conns))
	for i, b := range tp.conns {
		bufs[i] = bytes.Clone(b.Bytes())
	}
	tp.mu.Unlock()
	var out []frame
	for ci, b := range bufs {
		for len(b) > 0 {
			f, rest, err := decodeFrame(b)
			if errors.Is(err, msgp.ErrShortBytes) {
				break
			}
			if err != nil {
				return out, fmt.Errorf("connection %d, request %d: %w", ci, len(out), err)
			}
			if f != nil {
				out = append(out, *f)
			}
			b = rest
		}
	}
	return out, nil
}

// decodeFrame decodes one request. A handshake message (PING) returns a nil frame.
func decodeFrame(b []byte) (*frame, []byte, error) {
	n, b, err := msgp.ReadArrayHeaderBytes(b)
	if err != nil {
		return nil, b, err
	}
	if n < 2 || n > 6 {
		return nil, b, fmt.Errorf("request is an array of %d elements", n)
	}
	tag, b, err := msgp.ReadStringBytes(b)
	if err != nil {
		return nil, b, fmt.Errorf("tag: %w", err)
	}
	if tag == "PING" && n == 6 {
		for i := uint32(1); i < n; i++ {
			if b, err = msgp.Skip(b); err != nil {
				return nil, b, err
			}
		}
		return nil, b, nil
	}
	f := &frame{tag: tag}
	var packed []byte
	switch msgp.NextType(b) {
	case msgp.BinType:
		f.entriesFmt = "bin"
		packed, b, err = msgp.ReadBytesBytes(b, nil)
	case msgp.StrType:
		f.entriesFmt = "str"
		var s []byte
		s, b, err = msgp.ReadStringZC(b)
		packed = bytes.Clone(s)
	case msgp.ArrayType:
		f.mode = "Forward"
		var m uint32
		m, b, err = msgp.ReadArrayHeaderBytes(b)
		f.entries = int(m)
		for i := uint32(0); i < m && err == nil; i++ {
			b, err = msgp.Skip(b)
		}
	default:
		f.mode, f.entries = "Message", 1
		if b, err = msgp.Skip(b); err == nil { // time
			b, err = msgp.Skip(b) // record
		}
	}
	if err != nil {
		return nil, b, fmt.Errorf("%s entries: %w", tag, err)
	}
	if rest := int(n) - 2; (f.mode == "Message" && rest == 2) || (f.mode != "Message" && rest == 1) {
		var m uint32
		if m, b, err = msgp.ReadMapHeaderBytes(b); err != nil {
			return nil, b, fmt.Errorf("options: %w", err)
		}
		f.options = make(map[string]any, m)
		for i := uint32(0); i < m; i++ {
			var k string
			var v any
			if k, b, err = msgp.ReadStringBytes(b); err != nil {
				return nil, b, fmt.Errorf("option key: %w", err)
			}
			if v, b, err = msgp.ReadIntfBytes(b); err != nil {
				return nil, b, fmt.Errorf("option %q: %w", k, err)
			}
			f.options[k] = v
		}
	}
	if packed != nil {
		f.mode = "PackedForward"
		f.gzipMagic = len(packed) >= 2 && packed[0] == 0x1f && packed[1] == 0x8b
		if f.gzipMagic {
			f.mode = "CompressedPackedForward"
			zr, err := gzip.NewReader(bytes.NewReader(packed)) // multistream: every member
			if err != nil {
				return nil, b, fmt.Errorf("gzip: %w", err)
			}
			if packed, err = io.ReadAll(zr); err != nil {
				return nil, b, fmt.Errorf("gunzip: %w", err)
			}
		}
		for len(packed) > 0 {
			if packed, err = msgp.Skip(packed); err != nil {
				return nil, b, fmt.Errorf("packed entry %d: %w", f.entries, err)
			}
			f.entries++
		}
	}
	return f, b, nil
}

// checkFrames checks the requests the core sent: each in the wanted mode, with bin
// entries, a "size" option equal to its entry count, and a 24-character "chunk" exactly
// when acks are asked for (ack: the info stream's; the err stream's, whose tag ends in
// ".err", always, its default); together they carry at least the entries logged.
func checkFrames(t *testing.T, tp *tap, wantMode string, ack bool, wantEntries int) {
	t.Helper()
	frames, err := tp.frames()
	if err != nil {
		t.Fatalf("decoding what the core sent: %v", err)
	}
	total, bad := 0, 0
	errorf := func(format string, args ...any) {
		if bad++; bad <= 3 {
			t.Errorf(format, args...)
		}
	}
	defer func() {
		if bad > 3 {
			t.Errorf("... and %d more problems with requests", bad-3)
		}
	}()
	for i, f := range frames {
		total += f.entries
		if f.mode != wantMode || f.entriesFmt != "bin" {
			errorf("request %d (%s): mode %s with %s entries, want %s with bin", i, f.tag, f.mode, f.entriesFmt, wantMode)
		}
		if size, _ := f.options["size"].(int64); size != int64(f.entries) {
			if usize, ok := f.options["size"].(uint64); !ok || usize != uint64(f.entries) {
				errorf("request %d: option size %v, want %d", i, f.options["size"], f.entries)
			}
		}
		chunk, hasChunk := f.options["chunk"].(string)
		wantAck := ack || strings.HasSuffix(f.tag, ".err")
		switch {
		case wantAck && len(chunk) != 24:
			errorf("request %d (%s): option chunk %q, want a 24-character token", i, f.tag, chunk)
		case !wantAck && hasChunk:
			errorf("request %d (%s): option chunk %q on a stream without acks", i, f.tag, chunk)
		}
		wantCompressed := ""
		if wantMode == "CompressedPackedForward" {
			wantCompressed = "gzip"
		}
		if c, _ := f.options["compressed"].(string); c != wantCompressed {
			errorf("request %d: option compressed %q, want %q", i, c, wantCompressed)
		}
	}
	if total < wantEntries {
		t.Errorf("the core sent %d entries in %d requests, want at least %d", total, len(frames), wantEntries)
	}
	if len(frames) < 4 {
		t.Errorf("the core sent %d requests, want several per stream (small Transport.MaxBatchBytes)", len(frames))
	}
}

// TestDecodeFrame checks the tap's decoder on hand-made requests, so that a mode check
// that passes means what it says.
func TestDecodeFrame(t *testing.T) {
	entry := func(b []byte, n int64) []byte {
		b = msgp.AppendArrayHeader(b, 2)
		b, _ = msgp.AppendExtension(b, &eventTime{}) // cannot fail: fixed 8 bytes
		b = msgp.AppendMapHeader(b, 1)
		b = msgp.AppendString(b, "n")
		return msgp.AppendInt64(b, n)
	}
	var packed []byte
	for i := int64(0); i < 3; i++ {
		packed = entry(packed, i)
	}
	var gz bytes.Buffer // two gzip members, as the spec allows
	for _, part := range [][]byte{packed[:len(packed)/3], packed[len(packed)/3:]} {
		zw := gzip.NewWriter(&gz)
		_, _ = zw.Write(part)
		_ = zw.Close()
	}
	// A member boundary inside an entry is fine: the entries are one concatenated stream.
	req := func(payload []byte, bin bool, opts ...any) []byte {
		b := msgp.AppendArrayHeader(nil, 3)
		b = msgp.AppendString(b, "t")
		if bin {
			b = msgp.AppendBytes(b, payload)
		} else {
			b = msgp.AppendStringFromBytes(b, payload)
		}
		b = msgp.AppendMapHeader(b, uint32(len(opts)/2))
		for i := 0; i < len(opts); i += 2 {
			b = msgp.AppendString(b, opts[i].(string))
			b, _ = msgp.AppendIntf(b, opts[i+1])
		}
		return b
	}
	ping := msgp.AppendArrayHeader(nil, 6)
	for _, s := range []string{"PING", "host", "salt", "digest", "", ""} {
		ping = msgp.AppendString(ping, s)
	}
	forward := msgp.AppendArrayHeader(nil, 2)
	forward = msgp.AppendString(forward, "t")
	forward = msgp.AppendArrayHeader(forward, 1)
	forward = entry(forward, 9)

	var stream []byte
	stream = append(stream, ping...)
	stream = append(stream, req(packed, true, "size", 3, "chunk", "p8n9gmxTQVC8/nh2wlKKeQ==")...)
	stream = append(stream, req(gz.Bytes(), true, "size", 3, "compressed", "gzip")...)
	stream = append(stream, req(packed, false)...)
	stream = append(stream, forward...)
	stream = append(stream, req(packed, true)[:10]...) // in flight: ignored

	tp := &tap{conns: []*bytes.Buffer{bytes.NewBuffer(stream)}}
	got, err := tp.frames()
	if err != nil {
		t.Fatal(err)
	}
	want := []frame{
		{tag: "t", mode: "PackedForward", entriesFmt: "bin", entries: 3,
			options: map[string]any{"size": int64(3), "chunk": "p8n9gmxTQVC8/nh2wlKKeQ=="}},
		{tag: "t", mode: "CompressedPackedForward", entriesFmt: "bin", gzipMagic: true, entries: 3,
			options: map[string]any{"size": int64(3), "compressed": "gzip"}},
		{tag: "t", mode: "PackedForward", entriesFmt: "str", entries: 3, options: map[string]any{}},
		{tag: "t", mode: "Forward", entries: 1},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("frames\n got %+v\nwant %+v", got, want)
	}
}

// eventTime is an EventTime for hand-made entries (never registered globally).
type eventTime struct{}

func (*eventTime) ExtensionType() int8 { return 0 }
func (*eventTime) Len() int            { return 8 }
func (*eventTime) MarshalBinaryTo(b []byte) error {
	copy(b, "\x67\x00\x00\x00\x00\x00\x00\x07")
	return nil
}
func (*eventTime) UnmarshalBinary([]byte) error { return nil }
