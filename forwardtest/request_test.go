package forwardtest

import (
	"bytes"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tinylib/msgp/msgp"
)

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
