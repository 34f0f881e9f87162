package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The demo runs to completion against its embedded receiver, degrades while the receiver is
// stalled, and its final table adds up.
func TestDemoRunsAndPrintsItsTable(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-d", "2s", "-workers", "4", "-stall", "600ms"}, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	rows := regexp.MustCompile(`(?m)^\s*(info|err)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)`).FindAllStringSubmatch(out.String(), -1)
	if len(rows) != 2 {
		t.Fatalf("no summary table in:\n%s", out.String())
	}
	for _, r := range rows {
		n := make([]int, 4)
		for i := range n {
			n[i], _ = strconv.Atoi(r[i+2])
		}
		if n[0] == 0 || n[0] != n[1]+n[2]+n[3] {
			t.Errorf("%s row does not add up: logged %d, delivered %d, dropped %d, spilled %d", r[1], n[0], n[1], n[2], n[3])
		}
	}
	// The closing line reads right: one entry per request served, and the receiver has what
	// was delivered.
	m := regexp.MustCompile(`(\d+) requests served in \S+, each logging one entry: (\d+) logged, (\d+) delivered; the embedded receiver counted (\d+) entries`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no closing line in:\n%s", out.String())
	}
	if delivered, received := atoi(m[3]), atoi(m[4]); m[1] != m[2] || received < delivered {
		t.Errorf("closing line does not add up: %s", m[0])
	}
	// Each handler's tag has its row, and the receiver has what was delivered under it (the
	// stall may drop info entries, never put them under another tag).
	tags := regexp.MustCompile(`(?m)^\s*(demo\.\w+\.\w+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)`).FindAllStringSubmatch(out.String(), -1)
	seen := map[string]bool{}
	for _, r := range tags {
		seen[r[1]] = true
		if logged, delivered, dropped, spilled, received := atoi(r[2]), atoi(r[3]), atoi(r[4]), atoi(r[5]), atoi(r[6]); logged != delivered+dropped+spilled || received != delivered {
			t.Errorf("tag %s: logged %d, delivered %d, dropped %d, spilled %d, received %d", r[1], logged, delivered, dropped, spilled, received)
		}
	}
	for _, tag := range []string{"demo.orders.info", "demo.orders.err", "demo.cache.info"} {
		if !seen[tag] {
			t.Errorf("no row for tag %s in:\n%s", tag, out.String())
		}
	}
	// Every progress line is per second: no column is a running total.
	if !regexp.MustCompile(`requests/s\s+logged/s\s+delivered/s\s+dropped/s\s+spilled/s`).Match(out.Bytes()) {
		t.Errorf("no per-second header in:\n%s", out.String())
	}
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// -h is a request, not a mistake: the demo prints its flags and succeeds (exit status 0).
// A flag it does not know is still an error.
func TestHelpSucceeds(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-h"}, &out); err != nil {
		t.Fatalf("run -h: %v", err)
	}
	if !bytes.Contains(out.Bytes(), []byte("-fluent")) {
		t.Errorf("run -h printed no usage:\n%s", out.String())
	}
	if err := run(context.Background(), []string{"-no-such-flag"}, &out); err == nil {
		t.Error("run -no-such-flag: no error")
	}
}

// -metrics on a port already taken is an error that names the flag and the address, and
// the demo stops before it drives any load (it does not carry on without its metrics).
func TestMetricsPortTakenIsAnError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var out bytes.Buffer
	err = run(context.Background(), []string{"-d", "1s", "-metrics", ln.Addr().String()}, &out)
	if err == nil {
		t.Fatalf("run -metrics %s (taken): no error\n%s", ln.Addr(), out.String())
	}
	if !strings.Contains(err.Error(), "-metrics "+ln.Addr().String()) {
		t.Errorf("error does not name the flag and address: %v", err)
	}
	if strings.Contains(out.String(), "requests/s") {
		t.Errorf("the demo drove load although its metrics port was taken:\n%s", out.String())
	}
}

// -metrics on a free port serves the library's metrics while the demo runs.
func TestMetricsServed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	done := make(chan error, 1)
	var out bytes.Buffer
	go func() {
		done <- run(context.Background(), []string{"-d", "1500ms", "-workers", "2", "-metrics", addr}, &out)
	}()
	var body []byte
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			continue
		}
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		break
	}
	if err := <-done; err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	if !bytes.Contains(body, []byte("fluentcore_entries_total")) {
		t.Errorf("/metrics did not serve fluentcore's metrics:\n%.2000s", body)
	}
}

// -spill shows the durable err spill at work: an outage (-down) longer than the demo's
// Spill.After moves err batches to the directory, and they are replayed once the receiver is
// back.
func TestSpillFlagShowsSpillAndReplay(t *testing.T) {
	if testing.Short() {
		t.Skip("a 4 s demo run")
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-d", "4s", "-workers", "4", "-down", "2s", "-spill", t.TempDir()}, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	m := regexp.MustCompile(`(?m)^\s*err\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no err row in:\n%s", out.String())
	}
	if spilled, replayed := atoi(m[4]), atoi(m[5]); spilled == 0 || replayed == 0 {
		t.Errorf("err spilled %d, replayed %d; want both, the outage outlasting Spill.After:\n%s", spilled, replayed, out.String())
	}
}

// syncBuffer is a bytes.Buffer that the demo writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// -d 0 runs until interrupted: the demo keeps serving (and logging) past its default
// duration, and an interrupt (its context done) closes the core and prints a table that adds
// up.
func TestRunsUntilInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out syncBuffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"-d", "0", "-workers", "2"}, &out) }()
	// Wait for more progress lines than the default 5 s run prints, so the run is known not
	// to have ended by itself.
	progress := regexp.MustCompile(`(?m)^\s+(\d+)s\s+\d+`)
	deadline := time.Now().Add(30 * time.Second)
	for len(progress.FindAllString(out.String(), -1)) < 6 {
		select {
		case err := <-done:
			t.Fatalf("run ended by itself (%v):\n%s", err, out.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("fewer than 6 progress lines in 30 s:\n%s", out.String())
		}
	}
	if !strings.Contains(out.String(), "until interrupted") {
		t.Errorf("the first line does not say the demo runs until interrupted:\n%s", out.String())
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v\n%s", err, out.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run did not return within 30 s of the interrupt")
	}
	if !regexp.MustCompile(`\d+ requests served in \S+, each logging one entry: (\d+) logged`).MatchString(out.String()) {
		t.Errorf("no closing line after the interrupt:\n%s", out.String())
	}
}

// A negative duration is a mistake, said as one.
func TestNegativeDurationIsAnError(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-d", "-1s"}, &out); err == nil || !strings.Contains(err.Error(), "-d") {
		t.Errorf("run -d -1s: %v, want an error naming -d", err)
	}
}
