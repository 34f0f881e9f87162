package forwardtest

import (
	"bytes"
	"fmt"
	"math"
	"net"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore/internal/testkit"
	"github.com/tinylib/msgp/msgp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const waitTimeout = 10 * time.Second

var t0 = time.Unix(1700000000, 123456789).UTC()

func TestModes(t *testing.T) {
	rec1 := m("msg", "one", "n", 1)
	rec2 := m("msg", "two", "n", 2)
	sec := uint32(t0.Unix())
	nsec := uint32(t0.Nanosecond())
	withNs := t0
	whole := time.Unix(t0.Unix(), 0).UTC()
	want2 := []map[string]any{{"msg": "one", "n": int64(1)}, {"msg": "two", "n": int64(2)}}
	packed := cat(entry(et(sec, nsec), rec1), entry(it(t0.Unix()), rec2))

	tests := []struct {
		name  string
		req   []byte
		mode  Mode
		times []time.Time
		recs  []map[string]any
	}{
		{"message int time", req("app", it(t0.Unix()), rec1), Message, []time.Time{whole}, want2[:1]},
		{"message event time with options", req("app", et(sec, nsec), rec1, m("size", 1)), Message, []time.Time{withNs}, want2[:1]},
		{"message nil options", req("app", et(sec, nsec), rec1, v(nil)), Message, []time.Time{withNs}, want2[:1]},
		{"forward", req("app", arr(entry(et(sec, nsec), rec1), entry(it(t0.Unix()), rec2))), Forward, []time.Time{withNs, whole}, want2},
		{"forward ext8 time and options", req("app", arr(entry(et8(sec, nsec), rec1), entry(et8(sec, nsec), rec2)), m("size", 2)), Forward, []time.Time{withNs, withNs}, want2},
		{"forward v1.5 metadata time", req("app", arr(entry(arr(et(sec, nsec), m("k", "v")), rec1), entry(arr(it(t0.Unix())), rec2))), Forward, []time.Time{withNs, whole}, want2},
		{"packed bin", req("app", bin(packed)), PackedForward, []time.Time{withNs, whole}, want2},
		{"packed str like fluentd", req("app", msgp.AppendStringFromBytes(nil, packed), m("size", 2, "compressed", "text")), PackedForward, []time.Time{withNs, whole}, want2},
		{"compressed one member", req("app", bin(gz(packed)), m("compressed", "gzip")), CompressedPackedForward, []time.Time{withNs, whole}, want2},
		{"compressed two members", req("app", bin(gz(entry(et(sec, nsec), rec1), entry(it(t0.Unix()), rec2))), m("size", 2, "compressed", "gzip")), CompressedPackedForward, []time.Time{withNs, whole}, want2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReceiver(t)
			c := dial(t, r.Addr())
			send(t, c, tt.req, tt.req) // twice: several requests share a connection
			n := 2 * len(tt.recs)
			got, err := r.WaitForEntries(n, waitTimeout)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != n {
				t.Fatalf("got %d entries, want %d", len(got), n)
			}
			for i, e := range got {
				j := i % len(tt.recs)
				if e.Tag != "app" || e.Mode != tt.mode || !e.Time.Equal(tt.times[j]) || !reflect.DeepEqual(e.Record, tt.recs[j]) {
					t.Errorf("entry %d = %+v, want tag app, mode %v, time %v, record %v", i, e, tt.mode, tt.times[j], tt.recs[j])
				}
			}
			s := r.Stats()
			if s.Frames != 2 || s.Entries != int64(n) || s.Bytes != int64(2*len(tt.req)) || s.Connections != 1 || s.Acks != 0 {
				t.Errorf("stats = %+v", s)
			}
			if r.Len() != n {
				t.Errorf("Len = %d, want %d", r.Len(), n)
			}
		})
	}
}

func TestRecordValues(t *testing.T) {
	r := NewReceiver(t)
	c := dial(t, r.Addr())
	rec := m(
		"str", "s",
		"bin", []byte{0, 1, 0xff},
		"empty bin", []byte{},
		"neg", int64(-5),
		"small uint", uint64(7),
		"big uint", uint64(math.MaxUint64),
		"f32", float32(1.5),
		"f64", 2.25,
		"bool", true,
		"nil", nil,
		"map", map[string]any{"a": "b", "c": map[string]any{}},
		"array", []any{"x", int64(1), nil, []any{}},
	)
	send(t, c, req("types", it(1), rec))
	got, err := r.WaitForEntries(1, waitTimeout)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"str":        "s",
		"bin":        []byte{0, 1, 0xff},
		"empty bin":  []byte{},
		"neg":        int64(-5),
		"small uint": int64(7),
		"big uint":   uint64(math.MaxUint64),
		"f32":        float32(1.5),
		"f64":        2.25,
		"bool":       true,
		"nil":        nil,
		"map":        map[string]any{"a": "b", "c": map[string]any{}},
		"array":      []any{"x", int64(1), nil, []any{}},
	}
	if !reflect.DeepEqual(got[0].Record, want) {
		t.Errorf("record =\n%#v\nwant\n%#v", got[0].Record, want)
	}
}

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

func TestUnixSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fluent.sock")
	r := NewReceiver(t, WithAddr("unix://"+path))
	if got, want := r.Addr(), "unix://"+path; got != want {
		t.Fatalf("Addr = %q, want %q", got, want)
	}
	c := dial(t, r.Addr())
	rd := msgp.NewReader(c)
	if err := c.SetReadDeadline(time.Now().Add(waitTimeout)); err != nil {
		t.Fatal(err)
	}
	send(t, c, req("unix", bin(entry(et(1, 0), m("k", "v"))), m("chunk", "tok")))
	if got := readAck(t, rd); got != "tok" {
		t.Errorf("ack = %q", got)
	}
	got, err := r.WaitForEntries(1, waitTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Tag != "unix" || got[0].Record["k"] != "v" {
		t.Errorf("entry = %+v", got[0])
	}
}

func TestAddr(t *testing.T) {
	r := NewReceiver(t, WithAddr("tcp://127.0.0.1:0"))
	if !strings.HasPrefix(r.Addr(), "tcp://127.0.0.1:") || strings.HasSuffix(r.Addr(), ":0") {
		t.Errorf("Addr = %q", r.Addr())
	}
	for _, bad := range []string{"udp://127.0.0.1:0", "unix://", "tcp://", "127.0.0.1:notaport"} {
		if r, err := Start(WithAddr(bad)); err == nil {
			_ = r.Close()
			t.Errorf("Start(WithAddr(%q)) succeeded", bad)
		}
	}
}

func TestCountOnly(t *testing.T) {
	r := NewReceiver(t, CountOnly())
	c := dial(t, r.Addr())
	packed := cat(entry(et(1, 2), m("a", 1)), entry(it(3), m("b", []any{1, 2})), entry(arr(et(1, 2), m()), m()))
	send(t, c,
		req("t", it(1), m("a", 1)),
		req("t", arr(entry(et(1, 2), m("a", 1)), entry(it(3), m("b", 2)))),
		req("t", bin(packed)),
		req("t", bin(gz(packed, packed)), m("compressed", "gzip")),
	)
	if err := r.WaitFor(func(s Stats) bool { return s.Entries == 12 && s.Frames == 4 }, waitTimeout); err != nil {
		t.Fatal(err)
	}
	if e := r.Entries(); e != nil {
		t.Errorf("Entries = %v, want nil in count-only mode", e)
	}
	if r.Len() != 12 {
		t.Errorf("Len = %d", r.Len())
	}
}

// violationCase is a request the receiver must reject.
type violationCase struct {
	name      string
	req       []byte
	want      string // substring of the violation
	countOnly bool   // also checked in count-only mode
}

func violationCases() []violationCase {
	ok := m("k", "v")
	okEntry := entry(et(1, 0), ok)
	bigBin := []byte{0x92, 0xa1, 't', 0xc6}
	bigBin = binary32(bigBin, maxFrame)
	return []violationCase{
		{"nil request", v(nil), "nil request", true},
		{"map request", m("a", 1), "request is msgpack map", true},
		{"one element", arr(str("t")), "has 1 elements", true},
		{"five elements", req("t", it(1), ok, v(nil), v(nil)), "has 5 elements", true},
		{"forward with four elements", req("t", arr(okEntry), v(nil), v(nil)), "Forward request has 4 elements", true},
		{"bin tag", arr(bin([]byte("t")), it(1), ok), "tag is msgpack bin", true},
		{"int tag", arr(v(1), it(1), ok), "tag is msgpack int", true},
		{"options array", req("t", arr(okEntry), arr()), "options are msgpack array", true},
		{"chunk bin", req("t", arr(okEntry), m("chunk", []byte("tok"))), `"chunk" is msgpack bin`, true},
		{"chunk int", req("t", bin(okEntry), m("chunk", 1)), `"chunk" is msgpack int`, true},
		{"compressed zstd", req("t", bin(okEntry), m("compressed", "zstd")), `"compressed" is "zstd"`, true},
		{"compressed nil", req("t", bin(okEntry), m("compressed", nil)), `"compressed" is msgpack nil`, true},
		{"compressed str entries", req("t", str(string(gz(okEntry))), m("compressed", "gzip")), "must be bin", true},
		{"not gzip", req("t", bin(okEntry), m("compressed", "gzip")), "gzip:", true},
		{"fluent_signal 7", req("t", bin(okEntry), m("fluent_signal", 7)), `"fluent_signal" is 7`, true},
		{"fluent_signal metrics", req("t", bin(okEntry), m("fluent_signal", 1)), "logs only", true},
		{"message float time", req("t", v(1.5), ok), "time is a float", true},
		{"forward float time", req("t", arr(entry(v(1.5), ok))), "time is a float", true},
		{"negative time", req("t", it(-1), ok), "negative", true},
		{"nil time", req("t", v(nil), ok), "time is msgpack nil", true},
		{"str time in entry", req("t", arr(entry(str("now"), ok))), "time is msgpack str", true},
		{"timestamp ext -1", req("t", arr(entry(ext(-1, make([]byte, 8)), ok))), "extension type -1", true},
		{"ext type 5 time", req("t", bin(entry(ext(5, make([]byte, 8)), ok))), "extension type 5", true},
		{"ext0 with 4 bytes", req("t", ext(0, make([]byte, 4)), ok), "EventTime has 4 bytes", true},
		{"ext0 with 16 bytes", req("t", arr(entry(ext(0, make([]byte, 16)), ok))), "EventTime has 16 bytes", true},
		{"reserved seconds -1", req("t", et(0xFFFFFFFF, 0), ok), "group marker", true},
		{"reserved seconds -2", req("t", bin(entry(et(0xFFFFFFFE, 0), ok))), "group marker", true},
		{"record array", req("t", it(1), arr()), "record is msgpack array", true},
		{"record nil", req("t", arr(entry(it(1), v(nil)))), "record is msgpack nil", true},
		{"record int key", req("t", it(1), m([]byte{0x01}, "v")), "map key is msgpack int", false},
		{"nested bin key", req("t", it(1), m("outer", raw(m(bin([]byte("k")), 1)))), `key "outer": map key is msgpack bin`, false},
		{"ext in record", req("t", it(1), m("k", raw(ext(5, []byte{1})))), "extension type 5 in a record", false},
		{"ext0 in nested record", req("t", arr(entry(it(1), m("a", raw(arr(v(1), ext(0, make([]byte, 8)))))))), "extension type 0 in a record", false},
		{"entry not array", req("t", arr(ok)), "entry is msgpack map", true},
		{"entry three elements", req("t", bin(arr(it(1), ok, ok))), "entry array has 3 elements", true},
		{"packed garbage", req("t", bin([]byte{0x92, 0x01})), "malformed msgpack", true},
		{"packed invalid byte", req("t", bin(cat(okEntry, []byte{0xc1}))), "malformed msgpack: msgp: unrecognized type prefix 0xc1", true},
		{"invalid byte in request", []byte{0x93, 0xa1, 't', 0xc1}, "0xc1", true},
		{"request over 6144000 bytes", bigBin, "larger than 6144000", true},
		{"decompressed over 6144000 bytes", req("t", bin(gz(make([]byte, maxFrame+1))), m("compressed", "gzip")), "decompressed entries larger than 6144000", true},
	}
}

func binary32(b []byte, n uint32) []byte {
	return append(b, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
}

func TestViolations(t *testing.T) {
	valid := req("ok", it(1), m("k", "v"))
	for _, tt := range violationCases() {
		modes := []bool{false}
		if tt.countOnly {
			modes = append(modes, true)
		}
		for _, countOnly := range modes {
			t.Run(fmt.Sprintf("%s/countOnly=%v", tt.name, countOnly), func(t *testing.T) {
				opts := []Option{AllowViolations()}
				if countOnly {
					opts = append(opts, CountOnly())
				}
				r := NewReceiver(t, opts...)
				c := dial(t, r.Addr())
				// A valid request first: it is stored; the bad one is not.
				send(t, c, valid, tt.req)
				expectClosed(t, c)
				if err := r.WaitFor(func(s Stats) bool { return s.Violations == 1 }, waitTimeout); err != nil {
					t.Fatal(err)
				}
				vs := r.Violations()
				if len(vs) != 1 || !strings.Contains(vs[0].Error(), tt.want) {
					t.Fatalf("violations = %v, want one containing %q", vs, tt.want)
				}
				if !strings.Contains(vs[0].Error(), "conn 1 ") || !strings.Contains(vs[0].Error(), "request 2") {
					t.Errorf("violation %q does not say where", vs[0])
				}
				if s := r.Stats(); s.Entries != 1 || s.Frames != 1 || s.Truncated != 0 {
					t.Errorf("stats = %+v, want only the valid request", s)
				}
			})
		}
	}
}

func TestLargeRequestWithinLimit(t *testing.T) {
	r := NewReceiver(t, CountOnly())
	c := dial(t, r.Addr())
	rec := m("msg", strings.Repeat("x", 1000))
	one := entry(et(1, 0), rec)
	n := (maxFrame - 100) / len(one)
	payload := bytes.Repeat(one, n)
	q := req("t", bin(payload), m("size", n))
	if len(q) > maxFrame {
		t.Fatalf("request is %d bytes", len(q))
	}
	send(t, c, q, req("t", bin(gz(payload)), m("compressed", "gzip")))
	if err := r.WaitFor(func(s Stats) bool { return s.Entries == int64(2*n) }, waitTimeout); err != nil {
		t.Fatal(err)
	}
}

// fakeTB records what NewReceiver reports, to test the cleanup report.
type fakeTB struct {
	testing.TB
	cleanups []func()
	errors   []string
}

func (f *fakeTB) Helper()                   {}
func (f *fakeTB) Cleanup(fn func())         { f.cleanups = append(f.cleanups, fn) }
func (f *fakeTB) Errorf(s string, a ...any) { f.errors = append(f.errors, fmt.Sprintf(s, a...)) }
func (f *fakeTB) runCleanups() {
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
}

func TestViolationsReportedAtCleanup(t *testing.T) {
	for _, allow := range []bool{false, true} {
		t.Run(fmt.Sprintf("allow=%v", allow), func(t *testing.T) {
			ftb := &fakeTB{TB: t}
			var opts []Option
			if allow {
				opts = append(opts, AllowViolations())
			}
			r := NewReceiver(ftb, opts...)
			c := dial(t, r.Addr())
			send(t, c, req("t", v(1.5), m()), v(nil))
			expectClosed(t, c)
			if err := r.WaitFor(func(s Stats) bool { return s.Violations == 1 }, waitTimeout); err != nil {
				t.Fatal(err)
			}
			ftb.runCleanups()
			switch {
			case allow && len(ftb.errors) != 0:
				t.Errorf("reported %q despite AllowViolations", ftb.errors)
			case !allow && (len(ftb.errors) != 1 || !strings.Contains(ftb.errors[0], "time is a float")):
				t.Errorf("reported %q, want the float time violation", ftb.errors)
			}
		})
	}
}

func TestTruncated(t *testing.T) {
	full := req("t", bin(cat(entry(et(1, 0), m("a", 1)), entry(et(2, 0), m("b", 2)))), m("chunk", "x"))
	for _, cut := range []int{1, 3, 10, len(full) - 1} {
		t.Run(fmt.Sprint(cut), func(t *testing.T) {
			r := NewReceiver(t)
			c := dial(t, r.Addr())
			send(t, c, full, full[:cut])
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			if err := r.WaitFor(func(s Stats) bool { return s.Truncated == 1 }, waitTimeout); err != nil {
				t.Fatal(err)
			}
			if s := r.Stats(); s.Violations != 0 || s.Entries != 2 || s.Frames != 1 {
				t.Errorf("stats = %+v", s)
			}
		})
	}
}

func TestStallResume(t *testing.T) {
	r := NewReceiver(t, CountOnly())
	const perFrame = 1000
	var payload []byte
	for i := range perFrame {
		payload = append(payload, entry(et(uint32(i), 0), m("msg", "a log line of moderate length", "i", i))...)
	}
	frame := req("stall", bin(payload), m("size", perFrame))

	// phase runs one stall: fill the connection while stalled, prove nothing was read,
	// resume and see everything arrive.
	phase := func(c net.Conn, written int, base int64) int64 {
		t.Helper()
		if s := r.Stats(); s.Entries != base || s.Frames != base/perFrame {
			t.Fatalf("while stalled: stats = %+v, want %d entries", s, base)
		}
		r.Resume()
		frames := written / len(frame)
		if rest := written % len(frame); rest > 0 {
			// Finish the request the blocked write left half-written.
			if _, err := c.Write(frame[rest:]); err != nil {
				t.Fatal(err)
			}
			frames++
		}
		want := base + int64(frames*perFrame)
		if err := r.WaitFor(func(s Stats) bool { return s.Entries == want }, waitTimeout); err != nil {
			t.Fatal(err)
		}
		return want
	}

	// Stalled before the connection exists.
	r.Stall()
	c := dial(t, r.Addr())
	written := fillUntilBlocked(t, c, frame)
	if err := c.SetWriteDeadline(time.Now().Add(waitTimeout)); err != nil {
		t.Fatal(err)
	}
	if written < 2*len(frame) {
		t.Fatalf("only %d bytes written before blocking", written)
	}
	got := phase(c, written, 0)

	// Stalled while the connection is open and idle.
	r.Stall()
	written = fillUntilBlocked(t, c, frame)
	if err := c.SetWriteDeadline(time.Now().Add(waitTimeout)); err != nil {
		t.Fatal(err)
	}
	got = phase(c, written, got)
	t.Logf("%d entries (%d bytes per request) went through two stalls", got, len(frame))
}

// Allow lets a stalled receiver read exactly so many requests, in order, and no more: a
// test delivers frame by frame with it.
func TestAllowReadsSoManyRequests(t *testing.T) {
	r := NewReceiver(t)
	r.Allow(3) // not stalled: nothing to allow, and nothing kept for a later stall
	r.Stall()
	c := dial(t, r.Addr())
	for i := range 5 {
		send(t, c, req("allow", it(1), m("i", i)))
	}
	read := func(n int64) {
		t.Helper()
		if err := r.WaitFor(func(s Stats) bool { return s.Entries >= n }, waitTimeout); err != nil {
			t.Fatal(err)
		}
		if s := r.Stats(); s.Entries != n || s.Frames != n {
			t.Fatalf("stats %+v; want %d requests read", s, n)
		}
	}
	r.Allow(2)
	read(2)
	r.Allow(1)
	read(3)
	r.Resume()
	read(5)
	for i, e := range r.Entries() {
		if e.Record["i"] != int64(i) {
			t.Errorf("entry %d is %v: not in order", i, e.Record)
		}
	}
}

func TestWaitForEntriesTimeout(t *testing.T) {
	r := NewReceiver(t)
	start := time.Now()
	got, err := r.WaitForEntries(3, 50*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "0 of 3 entries") || len(got) != 0 {
		t.Fatalf("WaitForEntries = %v, %v; want a timeout saying 0 of 3", got, err)
	}
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Errorf("returned after %v", d)
	}
	c := dial(t, r.Addr())
	send(t, c, req("t", it(1), m()))
	got, err = r.WaitForEntries(3, 200*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "1 of 3 entries") || len(got) != 1 {
		t.Fatalf("WaitForEntries = %v, %v; want a timeout saying 1 of 3", got, err)
	}
	if err := r.WaitFor(func(s Stats) bool { return s.Acks > 0 }, 20*time.Millisecond); err == nil || !strings.Contains(err.Error(), "timed out") {
		t.Errorf("WaitFor = %v, want a timeout", err)
	}
}

func TestReset(t *testing.T) {
	r := NewReceiver(t, AllowViolations())
	c := dial(t, r.Addr())
	send(t, c, req("t", it(1), m()), req("t", it(1), m()))
	if _, err := r.WaitForEntries(2, waitTimeout); err != nil {
		t.Fatal(err)
	}
	r.Reset()
	if r.Len() != 0 || len(r.Entries()) != 0 || r.Stats() != (Stats{}) {
		t.Fatalf("after Reset: Len %d, stats %+v", r.Len(), r.Stats())
	}
	send(t, c, req("t2", it(1), m()), v(nil))
	got, err := r.WaitForEntries(1, waitTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Tag != "t2" {
		t.Errorf("entries = %+v", got)
	}
	if err := r.WaitFor(func(s Stats) bool { return s.Violations == 1 }, waitTimeout); err != nil {
		t.Fatal(err)
	}
	r.Reset()
	if len(r.Violations()) != 1 {
		t.Errorf("Reset forgot violations: %v", r.Violations())
	}
}

func TestClose(t *testing.T) {
	r, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	idle := dial(t, r.Addr())
	half := dial(t, r.Addr())
	stalled := dial(t, r.Addr())
	send(t, idle, req("t", it(1), m()))
	send(t, half, req("t", bin(entry(it(1), m())))[:5])
	if _, err := r.WaitForEntries(1, waitTimeout); err != nil {
		t.Fatal(err)
	}
	if err := r.WaitFor(func(s Stats) bool { return s.Connections == 3 }, waitTimeout); err != nil {
		t.Fatal(err)
	}
	r.Stall()
	send(t, stalled, req("t", it(1), m()))

	waitErr := make(chan error, 1)
	go func() {
		_, err := r.WaitForEntries(10, time.Minute)
		waitErr <- err
	}()
	if err := r.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := <-waitErr; err == nil || !strings.Contains(err.Error(), "receiver closed") {
		t.Errorf("WaitForEntries during Close = %v", err)
	}
	for _, c := range []net.Conn{idle, half, stalled} {
		expectClosed(t, c)
	}
	if s := r.Stats(); s.Truncated != 0 || s.Violations != 0 || s.Entries != 1 {
		t.Errorf("stats after Close = %+v", s)
	}
	if len(r.Entries()) != 1 {
		t.Errorf("entries lost at Close")
	}
	// Close is safe from several goroutines at once.
	r2, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 4)
	for range 4 {
		go func() { done <- r2.Close() }()
	}
	for range 4 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

func TestModeString(t *testing.T) {
	for m, want := range map[Mode]string{
		Message: "Message", Forward: "Forward", PackedForward: "PackedForward",
		CompressedPackedForward: "CompressedPackedForward", 0: "Mode(0)", 9: "Mode(9)",
	} {
		if got := m.String(); got != want {
			t.Errorf("Mode(%d).String() = %q, want %q", int(m), got, want)
		}
	}
}

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

func TestNegativeRatesAndDelaysAreRefused(t *testing.T) {
	for name, opt := range map[string]Option{
		"conn read rate": WithConnReadRate(-1),
		"ack delay":      WithAckDelay(-time.Millisecond),
	} {
		if r, err := Start(opt); err == nil {
			r.Close()
			t.Errorf("%s: Start accepted a negative value", name)
		}
	}
}
