package main

import (
	"bytes"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const sampleRaw = `goversion: go1.26.8
ncpu: 2
date: 2026-11-25T16:23Z
count: 5
commit: af56ed5
loadavg-start: 1.00 1.00 1.00
goos: linux
goarch: amd64
pkg: github.com/fluentcore/fluentcore/bench
cpu: Test CPU
fluent#write: a client's diagnostic that looks like configuration
BenchmarkAddingFields/mode=single/contender=fluentcore-2 	1000	300.0 ns/op	100 delivered	1000 events/s	0 lost	0 rejected	0 B/op	0 allocs/op
BenchmarkAddingFields/mode=single/contender=fluentcore-2 	1000	500.0 ns/op	100 delivered	3000 events/s	0 lost	0 rejected	0 B/op	0 allocs/op
BenchmarkAddingFields/mode=single/contender=fluentcore-2 	1000	400.0 ns/op	100 delivered	2000 events/s	0 lost	0 rejected	0 B/op	0 allocs/op
BenchmarkAddingFields/mode=single/contender=zap-json-discard-2 	1000	800.0 ns/op	100 delivered	9000 events/s	0 lost	0 rejected	704 B/op	1 allocs/op
BenchmarkAddingFields/mode=single/contender=fluent-logger-async-2 	1000	4000 ns/op	90 delivered	500 events/s	0 lost	100 rejected	2800 B/op	38 allocs/op
loadavg-end: 2.00 2.00 2.00
`

func TestRunGeneratesTablesAndChart(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "raw.txt"), []byte(sampleRaw), 0o644); err != nil {
		t.Fatal(err)
	}
	readme := filepath.Join(dir, "README.md")
	top := filepath.Join(dir, "TOP.md")
	targets := filepath.Join(dir, "TARGETS.md")
	chart := filepath.Join(dir, "chart.png")
	if err := os.WriteFile(readme, []byte("intro\n<!-- benchtable:begin -->\nold\n<!-- benchtable:end -->\nend\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(top, []byte("x\n<!-- benchtable:summary:begin -->\n<!-- benchtable:summary:end -->\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(targets, []byte("y\n<!-- benchtable:targets:begin -->\n<!-- benchtable:targets:end -->\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(dir, outputs{readme: readme, top: top, targets: targets, chart: chart}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(readme)
	got := string(b)
	for _, want := range []string{
		"intro\n", "end\n",
		"Test CPU, 2 cores",
		"go1.26.8; `-count 5`.",
		// median 400 ns, 0.5 × zap's 800 ns
		"| `fluentcore` | 400 ns | 0.50× | 0 | 2.00 k/s | 0 | 0 |",
		"| `fluent-logger-async` | 4.00 µs | 5.00× | 38 | 500 /s | 0 | 10.0% |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("README lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "old") || strings.Contains(got, "fluent#write") {
		t.Errorf("README kept the old section or a diagnostic line:\n%s", got)
	}
	// The run's details stay in the raw file: a reader of the tables needs the machine.
	for _, raw := range []string{"2026-11-25", "16:23", "af56ed5", "1.00 1.00 1.00", "2.00 2.00 2.00"} {
		if strings.Contains(got, raw) {
			t.Errorf("README shows the run detail %q:\n%s", raw, got)
		}
	}
	b, _ = os.ReadFile(top)
	if !strings.Contains(string(b), "AddingFields, single") || strings.Contains(string(b), "| target |") {
		t.Errorf("the summary lacks its tables or carries the targets:\n%s", b)
	}
	b, _ = os.ReadFile(targets)
	for _, want := range []string{
		"y\n<!-- benchtable:targets:begin -->\nMachine: Test CPU",
		"| AddingFields single: ≤ 0.6 × zap→Discard ns/op, all delivered, 0 lost | 0.50× (400 ns vs 800 ns); lost 0, dropped 0 | **met** |",
		"10.0× fewer (400 ns vs 4.00 µs)",
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("the targets lack %q:\n%s", want, b)
		}
	}
	b, _ = os.ReadFile(chart)
	if _, err := png.Decode(bytes.NewReader(b)); err != nil {
		t.Errorf("chart is not a PNG: %v", err)
	}
}

func TestRunNeedsMarkers(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "raw.txt"), []byte(sampleRaw), 0o644); err != nil {
		t.Fatal(err)
	}
	readme := filepath.Join(dir, "README.md")
	if err := os.WriteFile(readme, []byte("no markers\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(dir, outputs{readme: readme}); err == nil {
		t.Fatal("run succeeded on a README without markers")
	}
}

// The acks rows compare each policy's acked run with its own no-ack run: the adaptive cases
// must not stand in for the degrade-off ones, which carry no degrade key.
func TestAcksRowsKeepThePoliciesApart(t *testing.T) {
	// The adaptive cases first, so a lookup that does not tell them apart finds them.
	const lines = `BenchmarkMaxInflight/degrade=adaptive/acks=on-2 	1	1 ns/op	40000 delivered/s	0.3 of-R
BenchmarkMaxInflight/degrade=adaptive/acks=off-2 	1	1 ns/op	50000 delivered/s	0.3 of-R
BenchmarkMaxInflight/acks=on/inflight=32-2 	1	1 ns/op	90000 delivered/s	0.6 of-R
BenchmarkMaxInflight/acks=off-2 	1	1 ns/op	100000 delivered/s	0.7 of-R
`
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "raw.txt"), []byte(sampleRaw+lines), 0o644); err != nil {
		t.Fatal(err)
	}
	rs := &results{}
	if err := rs.read("main", filepath.Join(dir, "raw.txt"), false); err != nil {
		t.Fatal(err)
	}
	got := (&doc{rs: rs}).targets()
	for _, want := range []string{
		"without acks, degrade off | Transport.MaxInflight 32 (the default): 0.90× (90.0 k/s vs 100 k/s) | **met** |",
		"(the default policy) | Transport.MaxInflight 32 (the default): 0.80× (40.0 k/s vs 50.0 k/s) | **not met** |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("targets lack %q:\n%s", want, got)
		}
	}
}

// The side-by-side row shows the control, degrade off against itself in the same rounds,
// beside the default's ratio when the results have it, and judges the default's alone.
func TestSideBySideRowShowsTheControl(t *testing.T) {
	const lines = `BenchmarkDegradeRule/scenario=flat-out-side-by-side/goroutines=8-2 	1	1 ns/op	0.95 control-ratio	0.88 delivered-ratio
BenchmarkDegradeRule/scenario=flat-out-side-by-side/goroutines=8-2 	1	1 ns/op	1.02 control-ratio	0.93 delivered-ratio
BenchmarkDegradeRule/scenario=flat-out-side-by-side/goroutines=8-2 	1	1 ns/op	0.99 control-ratio	0.97 delivered-ratio
`
	rs := &results{}
	if err := rs.readFrom("main", "raw.txt", strings.NewReader(sampleRaw+lines)); err != nil {
		t.Fatal(err)
	}
	got := (&doc{rs: rs}).targets()
	want := "side by side with degrade off: ≥ 0.9 × degrade off in every round | lowest 0.88×, median 0.93× of 3 rounds; degrade off against itself: lowest 0.95×, median 0.99× | **not met** |"
	if !strings.Contains(got, want) {
		t.Errorf("targets lack %q:\n%s", want, got)
	}
}

// The committed results, bench/README.md, docs/benchmarks.md and bench/TARGETS.md, from this directory.
const (
	committedResults = "../../results"
	committedReadme  = "../../README.md"
	committedTop     = "../../../docs/benchmarks.md"
	committedTargets = "../../TARGETS.md"
)

// committedDocs are the documents the generator writes a section of.
var committedDocs = []string{committedReadme, committedTop, committedTargets}

// history matches what a user page must not carry: an issue number, a date, a load average;
// hexRE a word that may be a commit hash, which is one if it has a digit and a letter.
var (
	history = regexp.MustCompile(`(?i)\bissues? #?\d+|\b\d{4}-\d{2}-\d{2}\b|load ?av`)
	hexRE   = regexp.MustCompile(`\b[0-9a-f]{7,40}\b`)
)

// historyIn returns what history and hexRE find in text, each with its line number.
func historyIn(text string) []string {
	var found []string
	for i, line := range strings.Split(text, "\n") {
		ms := history.FindAllString(line, -1)
		for _, m := range hexRE.FindAllString(line, -1) {
			if strings.ContainsAny(m, "0123456789") && strings.ContainsAny(m, "abcdef") {
				ms = append(ms, m)
			}
		}
		for _, m := range ms {
			found = append(found, fmt.Sprintf("%s (line %d)", m, i+1))
		}
	}
	return found
}

// generate runs the generator over the committed results into copies of the committed
// documents and returns the copies' text, by the committed document's path.
func generate(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	copies := map[string]string{}
	for _, src := range committedDocs {
		dst := filepath.Join(dir, filepath.Base(src))
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			t.Fatal(err)
		}
		copies[src] = dst
	}
	if err := run(committedResults, outputs{readme: copies[committedReadme], top: copies[committedTop], targets: copies[committedTargets]}); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for src, dst := range copies {
		b, _ := os.ReadFile(dst)
		out[src] = string(b)
	}
	return out
}

// The tables are written for their readers: every target named by what it measures, the
// machine by what a reader needs, and no issue number, commit, date or load average of the run.
func TestGeneratedTablesCarryNoHistory(t *testing.T) {
	for name, text := range generate(t) {
		if i := strings.Index(text, "<!-- benchtable"); i >= 0 {
			text = text[i:] // the generated section, last in each file
		}
		if found := historyIn(text); len(found) > 0 {
			t.Errorf("%s as generated names %q", name, found)
		}
	}
}

// The committed tables are the generator's output from the committed results: nothing in
// them is typed by hand.
func TestCommittedTablesAreCurrent(t *testing.T) {
	for path, got := range generate(t) {
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if got != string(want) {
			t.Errorf("%s differs from what cmd/benchtable generates from %s: run it (see run.sh) and commit", path, committedResults)
		}
	}
}

// The bench documents, hand-written parts included, carry no history: that stays in git log.
func TestBenchDocsCarryNoHistory(t *testing.T) {
	for _, path := range committedDocs {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if found := historyIn(string(b)); len(found) > 0 {
			t.Errorf("%s names %q", path, found)
		}
	}
}

// docs/benchmarks.md is for users: what was measured, not the project's targets and which
// of them are met, which bench/TARGETS.md keeps.
func TestUserBenchmarksCarryNoTargets(t *testing.T) {
	b, err := os.ReadFile(committedTop)
	if err != nil {
		t.Fatal(err)
	}
	for _, word := range []string{"not met", "**met**", "| target |"} {
		if strings.Contains(string(b), word) {
			t.Errorf("%s carries the targets' %q: they belong in %s", committedTop, word, committedTargets)
		}
	}
}

// bench/README.md is the method, how to reproduce, the results and short design notes: at
// most this many lines, generated tables included.
const readmeMaxLines = 300

func TestBenchReadmeIsShort(t *testing.T) {
	b, err := os.ReadFile(committedReadme)
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(b, []byte("\n")); n > readmeMaxLines {
		t.Errorf("%s has %d lines, more than %d: make the notes shorter, the history is in git log", committedReadme, n, readmeMaxLines)
	}
}
