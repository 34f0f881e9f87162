// Command otelrecv runs the OpenTelemetry Collector's fluentforwardreceiver alone, for
// fluentcore's interop tests: it listens on 127.0.0.1 at a free port (or on a unix socket)
// and prints every log record the receiver hands to its consumer as one JSON line on
// stdout, with OpenTelemetry's types kept, so that tests can assert what the collector
// really exposes.
//
// Output, one JSON object per line:
//
//	{"listening":"127.0.0.1:40123"}                          once, when ready
//	{"time_unix_nano":..,"observed_time_unix_nano":..,"severity_number":..,
//	 "severity_text":"..","body":V,"attributes":V}            per log record
//
// where V is {"type":"Empty|Str|Int|Double|Bool|Bytes|Map|Slice","value":..}: Int as a
// JSON number (int64), Bytes as base64, Map as an object of V, Slice as an array of V.
// Connection-level messages of the receiver (parse errors) go to stderr.
//
// It stops when stdin reaches EOF (so it never outlives the test that started it) or on
// SIGTERM/SIGINT. It is a separate module so that the collector's dependency tree stays
// out of the interop tests' module and is compiled once, without the race detector.
package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"

	"github.com/open-telemetry/opentelemetry-collector-contrib/receiver/fluentforwardreceiver"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

func main() {
	unixPath := flag.String("unix", "", "listen on this unix socket path instead of TCP")
	flag.Parse()
	if err := run(*unixPath); err != nil {
		fmt.Fprintln(os.Stderr, "otelrecv:", err)
		os.Exit(1)
	}
}

func run(unixPath string) error {
	out := &printer{w: bufio.NewWriter(os.Stdout)}
	factory := fluentforwardreceiver.NewFactory()
	set := receivertest.NewNopSettings(factory.Type())
	// Debug level: the receiver reports why it closed a connection only at debug.
	set.Logger = zap.New(zapcore.NewCore(
		zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()),
		zapcore.Lock(os.Stderr), zapcore.DebugLevel))
	logs, err := consumer.NewLogs(out.consume)
	if err != nil {
		return err
	}

	var (
		rcv  receiver.Logs
		addr string
	)
	// The receiver does not report the port it got, so pick a free one and retry if
	// another process takes it first. It also listens on UDP at the same port.
	for attempt := 0; ; attempt++ {
		if unixPath != "" {
			addr = "unix://" + unixPath
		} else if addr, err = freePort(); err != nil {
			return err
		}
		cfg := factory.CreateDefaultConfig().(*fluentforwardreceiver.Config)
		cfg.ListenAddress = addr
		rcv, err = factory.CreateLogs(context.Background(), set, cfg, logs)
		if err != nil {
			return err
		}
		if err = rcv.Start(context.Background(), componenttest.NewNopHost()); err == nil {
			break
		}
		_ = rcv.Shutdown(context.Background())
		if unixPath != "" || attempt == 20 {
			return fmt.Errorf("start receiver on %s: %w", addr, err)
		}
	}
	out.line(map[string]string{"listening": addr})

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	eof := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(eof)
	}()
	select {
	case <-stop:
	case <-eof:
	}
	return rcv.Shutdown(context.Background())
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		return "", err
	}
	return addr, nil
}

// printer writes JSON lines; the consumer may be called from several goroutines.
type printer struct {
	mu sync.Mutex
	w  *bufio.Writer
}

func (p *printer) line(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(map[string]string{"error": err.Error()})
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	_, _ = p.w.Write(append(b, '\n'))
	_ = p.w.Flush() // before returning to the receiver, which then acks
}

// record is one log record as printed.
type record struct {
	TimeUnixNano         uint64 `json:"time_unix_nano"`
	ObservedTimeUnixNano uint64 `json:"observed_time_unix_nano"`
	SeverityNumber       int32  `json:"severity_number"`
	SeverityText         string `json:"severity_text"`
	Body                 value  `json:"body"`
	Attributes           value  `json:"attributes"`
}

func (p *printer) consume(_ context.Context, ld plog.Logs) error {
	rls := ld.ResourceLogs()
	for i := 0; i < rls.Len(); i++ {
		sls := rls.At(i).ScopeLogs()
		for j := 0; j < sls.Len(); j++ {
			lrs := sls.At(j).LogRecords()
			for k := 0; k < lrs.Len(); k++ {
				lr := lrs.At(k)
				attrs := pcommon.NewValueMap()
				lr.Attributes().CopyTo(attrs.Map())
				p.line(record{
					TimeUnixNano:         uint64(lr.Timestamp()),
					ObservedTimeUnixNano: uint64(lr.ObservedTimestamp()),
					SeverityNumber:       int32(lr.SeverityNumber()),
					SeverityText:         lr.SeverityText(),
					Body:                 toValue(lr.Body()),
					Attributes:           toValue(attrs),
				})
			}
		}
	}
	return nil
}

// value is a pcommon.Value with its type, so that Int and Double stay apart in JSON.
type value struct {
	Type  string `json:"type"`
	Value any    `json:"value,omitempty"`
}

func toValue(v pcommon.Value) value {
	out := value{Type: v.Type().String()}
	switch v.Type() {
	case pcommon.ValueTypeEmpty:
	case pcommon.ValueTypeStr:
		out.Value = v.Str()
	case pcommon.ValueTypeInt:
		out.Value = json.Number(strconv.FormatInt(v.Int(), 10))
	case pcommon.ValueTypeDouble:
		out.Value = v.Double()
	case pcommon.ValueTypeBool:
		out.Value = v.Bool()
	case pcommon.ValueTypeBytes:
		out.Value = base64.StdEncoding.EncodeToString(v.Bytes().AsRaw())
	case pcommon.ValueTypeMap:
		m := make(map[string]value, v.Map().Len())
		for k, e := range v.Map().All() {
			m[k] = toValue(e)
		}
		out.Value = m
	case pcommon.ValueTypeSlice:
		s := make([]value, 0, v.Slice().Len())
		for _, e := range v.Slice().All() {
			s = append(s, toValue(e))
		}
		out.Value = s
	default:
		out.Value = errors.New("unknown type").Error()
	}
	return out
}
