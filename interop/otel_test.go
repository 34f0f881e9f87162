package interop

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"sync"
	"testing"

	"github.com/fluentcore/fluentcore"
)

// The OpenTelemetry receiver is built once per run from ./otelrecv, a module of its own
// (without the race detector: it is the peer, not the code under test).
var (
	buildOnce sync.Once
	buildDir  string
	otelBin   string
	buildErr  error
)

func otelBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if buildDir, buildErr = os.MkdirTemp("", "fluentcore-interop-"); buildErr != nil {
			return
		}
		otelBin = filepath.Join(buildDir, "otelrecv")
		cmd := exec.Command("go", "build", "-o", otelBin, ".")
		cmd.Dir = "otelrecv"
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			buildErr = fmt.Errorf("go build ./otelrecv: %v\n%s", err, out.Bytes())
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return otelBin
}

func removeBuilds() {
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
}

// startOTel runs the OpenTelemetry Collector's fluentforwardreceiver on 127.0.0.1 at a
// free port, or on a unix socket if unixPath is set.
func startOTel(t *testing.T, unixPath string) *peer {
	t.Helper()
	bin := otelBinary(t)
	args := []string{}
	if unixPath != "" {
		args = append(args, "-unix", unixPath)
	}
	return startPeer(t, "otelrecv", exec.Command(bin, args...))
}

// otelRecord is a log record as the OpenTelemetry receiver hands it to its consumer.
type otelRecord struct {
	TimeUnixNano         uint64    `json:"time_unix_nano"`
	ObservedTimeUnixNano uint64    `json:"observed_time_unix_nano"`
	SeverityNumber       int32     `json:"severity_number"`
	SeverityText         string    `json:"severity_text"`
	Body                 otelValue `json:"body"`
	Attributes           otelValue `json:"attributes"`
	// Decoded forms of Body and Attributes.
	body  any
	attrs map[string]any
}

// otelValue is a pcommon.Value with its type, as otelrecv prints it.
type otelValue struct {
	Type  string          `json:"type"`
	Value json.RawMessage `json:"value"`
}

// goValue turns v into Go values that keep OpenTelemetry's types apart: Str string,
// Int int64, Double float64, Bool bool, Bytes []byte, Map map[string]any, Slice []any,
// Empty nil.
func (v otelValue) goValue() (any, error) {
	switch v.Type {
	case "Empty":
		return nil, nil
	case "Str":
		var s string
		return s, json.Unmarshal(v.Value, &s)
	case "Int":
		var i int64
		return i, json.Unmarshal(v.Value, &i)
	case "Double":
		var f float64
		return f, json.Unmarshal(v.Value, &f)
	case "Bool":
		var b bool
		return b, json.Unmarshal(v.Value, &b)
	case "Bytes":
		var b []byte
		return b, json.Unmarshal(v.Value, &b)
	case "Map":
		var m map[string]otelValue
		if err := json.Unmarshal(v.Value, &m); err != nil {
			return nil, err
		}
		out := make(map[string]any, len(m))
		for k, e := range m {
			var err error
			if out[k], err = e.goValue(); err != nil {
				return nil, err
			}
		}
		return out, nil
	case "Slice":
		var s []otelValue
		if err := json.Unmarshal(v.Value, &s); err != nil {
			return nil, err
		}
		out := make([]any, len(s))
		for i, e := range s {
			var err error
			if out[i], err = e.goValue(); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("unknown OpenTelemetry value type %q", v.Type)
}

func parseOTel(lines []json.RawMessage) ([]otelRecord, error) {
	out := make([]otelRecord, len(lines))
	for i, l := range lines {
		r := &out[i]
		if err := json.Unmarshal(l, r); err != nil {
			return nil, fmt.Errorf("line %d: %v: %s", i, err, l)
		}
		var err error
		if r.body, err = r.Body.goValue(); err != nil {
			return nil, fmt.Errorf("line %d body: %v", i, err)
		}
		a, err := r.Attributes.goValue()
		if err != nil {
			return nil, fmt.Errorf("line %d attributes: %v", i, err)
		}
		if r.attrs, _ = a.(map[string]any); r.attrs == nil {
			return nil, fmt.Errorf("line %d: attributes are %s, not a Map", i, r.Attributes.Type)
		}
	}
	return out, nil
}

// otelView maps a logged record to what the OpenTelemetry receiver exposes: the values of
// keys "message" and "log" become the body (the last one wins), every other key an
// attribute, plus "fluent.tag"; msgpack bin becomes Str, as does a uint64 above
// MaxInt64 (in decimal); the rest keeps its type.
func otelView(s sent) (body any, attrs map[string]any) {
	attrs = map[string]any{"fluent.tag": s.tag}
	for k, v := range s.record {
		if k == "message" || k == "log" {
			body = otelConvert(v)
			continue
		}
		attrs[k] = otelConvert(v)
	}
	return body, attrs
}

func otelConvert(v any) any {
	switch v := v.(type) {
	case uint64:
		if v > math.MaxInt64 {
			return strconv.FormatUint(v, 10)
		}
		return int64(v)
	case []byte:
		return string(v)
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = otelConvert(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = otelConvert(e)
		}
		return out
	}
	return v
}

// checkOTel waits for every logged entry at the receiver and compares each with what
// was logged: tag, time to the nanosecond, body and attributes with their types.
func checkOTel(t *testing.T, p *peer, want []sent) {
	t.Helper()
	lines, err := p.waitLines(len(want), deliverTimeout)
	if err != nil {
		t.Fatal(err)
	}
	got, err := parseOTel(lines)
	if err != nil {
		t.Fatal(err)
	}
	problems := matchBySeq(want, got, func(r otelRecord) (int64, bool) {
		seq, ok := r.attrs["seq"].(int64)
		return seq, ok
	}, func(s sent, r otelRecord) string {
		wantBody, wantAttrs := otelView(s)
		switch {
		case r.TimeUnixNano != uint64(s.time.UnixNano()):
			return fmt.Sprintf("time %d, want %d (%v)", r.TimeUnixNano, s.time.UnixNano(), s.time)
		case !reflect.DeepEqual(r.body, wantBody):
			return fmt.Sprintf("body %#v, want %#v", r.body, wantBody)
		case !reflect.DeepEqual(r.attrs, wantAttrs):
			return fmt.Sprintf("attributes\n got %#v\nwant %#v", r.attrs, wantAttrs)
		case r.ObservedTimeUnixNano != 0 || r.SeverityNumber != 0 || r.SeverityText != "":
			return fmt.Sprintf("observed time %d, severity %d %q; the receiver sets none of them",
				r.ObservedTimeUnixNano, r.SeverityNumber, r.SeverityText)
		}
		return ""
	})
	for _, pr := range problems {
		t.Error(pr)
	}
}

// TestOTelModes sends the scenario to the OpenTelemetry receiver in every mode the core
// sends (PackedForward by default, CompressedPackedForward with gzip), with and without
// acks, through a tap that checks the mode on the wire.
func TestOTelModes(t *testing.T) {
	for _, tc := range []struct {
		name        string
		compression string
		ack         bool
		mode        string
	}{
		{"PackedForward", "", false, "PackedForward"},
		{"PackedForward/ack", "", true, "PackedForward"},
		{"CompressedPackedForward", "gzip", false, "CompressedPackedForward"},
		{"CompressedPackedForward/ack", "gzip", true, "CompressedPackedForward"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startOTel(t, "")
			tp := newTap(t, p.addr)
			fallback := &syncBuffer{}
			cfg := baseConfig("tcp://"+tp.addr(), fallback)
			cfg.Transport.Compression = tc.compression
			if tc.ack {
				cfg.Info.Acks = fluentcore.AcksOn
			}
			core := fluentcore.New(cfg)
			want := logScenario(core, "")
			syncAndClose(t, core)
			checkAllDelivered(t, core, want, fallback)
			checkOTel(t, p, want)
			checkFrames(t, tp, tc.mode, tc.ack, len(want))
		})
	}
}

// TestOTelUnixSocket sends over a unix socket, with acks.
func TestOTelUnixSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "fwd.sock")
	p := startOTel(t, sock)
	fallback := &syncBuffer{}
	cfg := baseConfig("unix://"+sock, fallback)
	cfg.Info.Acks = fluentcore.AcksOn
	core := fluentcore.New(cfg)
	want := logScenario(core, "")
	syncAndClose(t, core)
	checkAllDelivered(t, core, want, fallback)
	checkOTel(t, p, want)
}

// TestOTelMessageBody shows how to get zap's message into the OpenTelemetry log body:
// the receiver takes the body from the key "message" (fluentd) or "log" (fluent-bit),
// not from zap's default "msg".
func TestOTelMessageBody(t *testing.T) {
	p := startOTel(t, "")
	fallback := &syncBuffer{}
	cfg := baseConfig("tcp://"+p.addr, fallback)
	cfg.Info.Acks = fluentcore.AcksOn
	cfg.EncoderConfig = fluentcoreEncoderConfig("message")
	core := fluentcore.New(cfg)
	want := logScenario(core, "message")
	syncAndClose(t, core)
	checkAllDelivered(t, core, want, fallback)
	checkOTel(t, p, want)
	// Spelled out once, beyond the generic comparison.
	lines, err := p.waitLines(1, deliverTimeout)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := parseOTel(lines)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.attrs["seq"] == int64(1) {
			if r.body != "order placed" || r.attrs["message"] != nil || r.attrs["fluent.tag"] != "interop.info" {
				t.Errorf("seq 1: body %#v, attributes %#v; want body \"order placed\" and tag interop.info", r.body, r.attrs)
			}
		}
	}
}
