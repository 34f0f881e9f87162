package fluentcore

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore/forwardtest"
	"github.com/fluentcore/fluentcore/internal/msgpenc"
	"github.com/fluentcore/fluentcore/internal/spill"
	"github.com/fluentcore/fluentcore/internal/testkit"
	"github.com/fluentcore/fluentcore/internal/zapenc"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// downAddr returns the address of a unix socket nobody listens on yet (dialling it fails at
// once), in a directory short enough for a socket path; a receiver started later with
// forwardtest.WithAddr on the same address brings it "back".
func downAddr(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "fcs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return "unix://" + filepath.Join(dir, "r.sock")
}

// segmentFiles lists the spill's segment files, in name order.
func segmentFiles(t *testing.T, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*"+spill.SegmentSuffix))
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func filesSize(t *testing.T, names []string) int64 {
	t.Helper()
	var n int64
	for _, name := range names {
		fi, err := os.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		n += fi.Size()
	}
	return n
}

// waitUntil is testkit.WaitUntil, under the name the tests of this package use.
var waitUntil = testkit.WaitUntil

// eventLog collects OnEvent calls.
type eventLog struct {
	mu     sync.Mutex
	events []Event
}

func (l *eventLog) add(e Event) {
	l.mu.Lock()
	l.events = append(l.events, e)
	l.mu.Unlock()
}

func (l *eventLog) of(kind EventKind) []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Event
	for _, e := range l.events {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// spillTestConfig is a core with small buffers and quick retries that spills to dir. Its
// err stream has two batches, hence one shard: entries logged one after the other are
// sealed, and so sent, in the order they were logged (with several shards, entries logged
// concurrently are ordered by batch, as always).
func spillTestConfig(addr, dir string, fb io.Writer, ev *eventLog) Config {
	return fastRetry(Config{
		Addr:      addr,
		Tag:       "shop",
		Spill:     SpillConfig{Dir: dir, After: 20 * time.Millisecond, Fallback: fb},
		Transport: TransportConfig{MaxBatchBytes: 2 << 10, FlushInterval: 2 * time.Millisecond, RetryMax: 10 * time.Millisecond},
		Err:       ErrConfig{BufferBytes: 4 << 10, MaxWait: MaxErrMaxWait},
		Timeouts:  TimeoutsConfig{Sync: 20 * time.Second},
		OnEvent:   ev.add,
	})
}

// checkInOrder checks that entries are the err entries 0..n-1, in order.
func checkInOrder(t *testing.T, got []forwardtest.Entry, n int) {
	t.Helper()
	if len(got) != n {
		t.Fatalf("receiver has %d entries, want %d", len(got), n)
	}
	for k, e := range got {
		if e.Tag != "shop.err" || e.Record["i"] != int64(k) {
			t.Fatalf("entry %d: tag %q record %v, want i=%d", k, e.Tag, e.Record, k)
		}
	}
}

// The receiver is down longer than Spill.After: the err batches go to segment files, the
// receiver comes back, and every entry arrives once, in order, acknowledged, before the
// segments are deleted; then err entries go straight from memory again.
func TestSpillOutageReplaysInOrderAndDeletesSegments(t *testing.T) {
	addr, dir := downAddr(t), t.TempDir()
	var fb testkit.Lines
	var ev eventLog
	cfg := spillTestConfig(addr, dir, &fb, &ev)
	cfg.Info.Acks = AcksOn
	cfg.Err.Acks = AcksOn          // a unix socket, where the err stream asks no acks unless told
	cfg.Spill.MaxBytes = 256 << 10 // 16 KiB segments: the outage fills several
	core := New(cfg)
	logger := zap.New(core)
	const n = 400
	for i := range n {
		logger.Error("outage", zap.Int("i", i), zap.String("pad", strings.Repeat("e", 100)))
	}
	if err := core.Sync(); err != nil { // every batch is delivered or spilled
		t.Fatal(err)
	}
	st := core.Stats().Err
	if st.Spilled != n || st.Delivered != 0 || st.DroppedTotal() != 0 {
		t.Fatalf("spilled %d delivered %d dropped %v, want all %d spilled", st.Spilled, st.Delivered, st.Dropped, n)
	}
	segs := segmentFiles(t, dir)
	if len(segs) < 2 {
		t.Fatalf("%d segment files, want several", len(segs))
	}
	if size := filesSize(t, segs); st.SpillBytes != size {
		t.Fatalf("SpillBytes %d, files hold %d", st.SpillBytes, size)
	}

	r := forwardtest.NewReceiver(t, forwardtest.WithAddr(addr))
	got, err := r.WaitForEntries(n, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	checkInOrder(t, got, n)
	waitUntil(t, "the spill is replayed and deleted", func() bool {
		s := core.Stats().Err
		return s.Replayed == n && s.SpillBytes == 0 && len(segmentFiles(t, dir)) == 0
	})
	if a := r.Stats().Acks; a == 0 {
		t.Fatal("no frame was acknowledged")
	}

	// Back to normal: new err entries are delivered from memory.
	for i := n; i < n+10; i++ {
		logger.Error("after", zap.Int("i", i))
	}
	if err := core.Sync(); err != nil {
		t.Fatal(err)
	}
	got, err = r.WaitForEntries(n+10, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	checkInOrder(t, got, n+10)
	if err := core.Close(); err != nil {
		t.Fatal(err)
	}
	st = core.Stats().Err
	if st.Delivered != 10 || st.Spilled != n || st.Replayed != n || fb.Records() != 0 {
		t.Fatalf("delivered %d spilled %d replayed %d fallback lines %d", st.Delivered, st.Spilled, st.Replayed, fb.Records())
	}
	if len(ev.of(EventSpillCorrupt))+len(ev.of(EventSpillFull))+len(ev.of(EventSpillFailed)) != 0 {
		t.Fatalf("unexpected events %v", ev.events)
	}
	identityHolds(t, core.Stats())
}

// Full err buffers move batches to the spill at once, whatever Spill.After says: err logging
// waits at most Err.MaxWait, nothing goes to Spill.Fallback, and everything arrives later.
func TestSpillWhenBuffersFullKeepsErrLoggingUnblocked(t *testing.T) {
	addr, dir := downAddr(t), t.TempDir()
	var fb testkit.Lines
	var ev eventLog
	const wait = 20 * time.Millisecond
	cfg := spillTestConfig(addr, dir, &fb, &ev)
	cfg.Spill.After = time.Hour
	cfg.Err.MaxWait = wait
	core := New(cfg)
	logger := zap.New(core)
	const goroutines, perG = 4, 300
	var slowest [goroutines]time.Duration
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perG {
				start := time.Now()
				logger.Error("flood", zap.Int("g", g), zap.Int("i", i), zap.String("pad", strings.Repeat("f", 300)))
				slowest[g] = max(slowest[g], time.Since(start))
			}
		}()
	}
	wg.Wait()
	for _, d := range slowest {
		// A functional bound, not a performance figure: a call that waited for the receiver
		// or for Spill.After would take an hour.
		if d > wait+2*time.Second {
			t.Fatalf("an err log call took %v; Err.MaxWait is %v", d, wait)
		}
	}
	if err := core.Sync(); err != nil {
		t.Fatal(err)
	}
	st := core.Stats().Err
	if st.Spilled != goroutines*perG || st.DroppedTotal() != 0 || fb.Records() != 0 {
		t.Fatalf("spilled %d of %d, dropped %v, fallback lines %d", st.Spilled, goroutines*perG, st.Dropped, fb.Records())
	}

	r := forwardtest.NewReceiver(t, forwardtest.WithAddr(addr))
	got, err := r.WaitForEntries(goroutines*perG, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[[2]int64]bool{}
	for _, e := range got {
		seen[[2]int64{e.Record["g"].(int64), e.Record["i"].(int64)}] = true
	}
	if len(got) != goroutines*perG || len(seen) != goroutines*perG {
		t.Fatalf("%d entries, %d distinct, want %d", len(got), len(seen), goroutines*perG)
	}
	// Each goroutine's entries keep their order unless one overflowed the buffers, which can
	// overtake batches still in memory (see docs/configuration.md); so only completeness is checked.
	waitUntil(t, "the spill is replayed", func() bool { return core.Stats().Err.Replayed == goroutines*perG })
	if err := core.Close(); err != nil {
		t.Fatal(err)
	}
	identityHolds(t, core.Stats())
}

// Beyond Spill.MaxBytes err entries are counted as dropped (spill_full), written to
// Spill.Fallback and reported by an event; what the spill did take is replayed.
func TestSpillFullIsCountedAndReported(t *testing.T) {
	addr, dir := downAddr(t), t.TempDir()
	var fb testkit.Lines
	var ev eventLog
	cfg := spillTestConfig(addr, dir, &fb, &ev)
	cfg.Spill.MaxBytes = 16 << 10
	core := New(cfg)
	logger := zap.New(core)
	const n = 300
	for i := range n {
		logger.Error("outage", zap.Int("i", i), zap.String("pad", strings.Repeat("x", 200)))
	}
	if err := core.Sync(); err != nil {
		t.Fatal(err)
	}
	st := core.Stats().Err
	full := st.Dropped["spill_full"]
	if full == 0 || st.Spilled+full != n || st.DroppedTotal() != full {
		t.Fatalf("spilled %d, dropped %v, of %d", st.Spilled, st.Dropped, n)
	}
	if uint64(fb.Records()) != full {
		t.Fatalf("%d entries refused by the full spill, %d reported in Spill.Fallback", full, fb.Records())
	}
	if st.SpillBytes > cfg.Spill.MaxBytes || st.SpillBytes != filesSize(t, segmentFiles(t, dir)) {
		t.Fatalf("SpillBytes %d (limit %d)", st.SpillBytes, cfg.Spill.MaxBytes)
	}
	evs := ev.of(EventSpillFull)
	if len(evs) != 1 || evs[0].Stream != "err" || !strings.Contains(evs[0].Err.Error(), "Spill.MaxBytes") {
		t.Fatalf("spill_full events %v", evs)
	}

	r := forwardtest.NewReceiver(t, forwardtest.WithAddr(addr))
	if _, err := r.WaitForEntries(int(st.Spilled), 20*time.Second); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the spill is replayed", func() bool { return core.Stats().Err.Replayed == st.Spilled })
	if err := core.Close(); err != nil {
		t.Fatal(err)
	}
	if got := r.Len(); got != int(st.Spilled) {
		t.Fatalf("receiver has %d entries, %d were spilled", got, st.Spilled)
	}
	identityHolds(t, core.Stats())
}

// errEntryRange encodes err entries from..to-1 (field "i") as one batch.
func errEntryRange(from, to int) []byte {
	enc := zapenc.New(settingsFor(Config{}).stream.Enc)
	var buf []byte
	for i := from; i < to; i++ {
		buf = enc.EncodeEntry(buf, nil, &zapcore.Entry{Level: zapcore.ErrorLevel, Time: time.Unix(1700000000, int64(i)), Message: "m"},
			[]zapcore.Field{zap.Int("i", i)}, msgpenc.Budget{}, nil)
	}
	return buf
}

// writeSegments opens the spill in dir, appends one frame per batch [from, to) and closes
// it again: one new segment.
func writeSegments(t *testing.T, dir string, batches ...[2]int) {
	t.Helper()
	d, err := spill.Open(dir, 1<<20, 1024, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range batches {
		if err := d.Append("shop.err", errEntryRange(b[0], b[1]), b[1]-b[0]); err != nil {
			t.Fatal(err)
		}
	}
	d.Close()
}

// A segment cut in the middle of a frame with garbage after it, a segment of garbage, an
// empty one: the good frames are replayed in order, each damaged segment is reported once,
// the receiver sees nothing invalid, and nothing is left on disk.
func TestSpillCorruptSegmentsAreSkippedAndReported(t *testing.T) {
	dir := t.TempDir()
	writeSegments(t, dir, [2]int{0, 2}, [2]int{2, 4}, [2]int{100, 102}) // 1: the third frame gets cut
	writeSegments(t, dir, [2]int{4, 6})                                 // 2: intact
	writeSegments(t, dir, [2]int{200, 203})                             // 3: overwritten with garbage
	writeSegments(t, dir, [2]int{6, 7}, [2]int{7, 9})                   // 4: intact
	segs := segmentFiles(t, dir)
	if len(segs) != 4 {
		t.Fatalf("%d segments", len(segs))
	}
	third := int64(len(errEntryRange(100, 102)) + 20)
	fi, _ := os.Stat(segs[0])
	if err := os.Truncate(segs[0], fi.Size()-third/2); err != nil {
		t.Fatal(err)
	}
	appendFile(t, segs[0], []byte("\x93\xa8shop.err\xc4\xff garbage"))
	if err := os.WriteFile(segs[2], []byte(strings.Repeat("\xff\x00garbage", 50)), 0o600); err != nil {
		t.Fatal(err)
	}
	// Not a segment name: ignored, and left alone.
	if err := os.WriteFile(filepath.Join(dir, spill.SegmentName(3)+".tmp"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A segment created by a process killed before its first frame.
	if err := os.WriteFile(filepath.Join(dir, spill.SegmentName(5)), nil, 0o600); err != nil {
		t.Fatal(err)
	}

	r := forwardtest.NewReceiver(t)
	var ev eventLog
	cfg := spillTestConfig(r.Addr(), dir, io.Discard, &ev)
	core := New(cfg)
	got, err := r.WaitForEntries(9, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	checkInOrder(t, got, 9)
	waitUntil(t, "the spill is replayed", func() bool {
		return core.Stats().Err.SpillBytes == 0 && len(segmentFiles(t, dir)) == 0
	})
	st := core.Stats().Err
	if st.Replayed != 9 || st.SpillCorruptSegments != 2 {
		t.Fatalf("replayed %d, corrupt segments %d", st.Replayed, st.SpillCorruptSegments)
	}
	want := `
# HELP fluentcore_replayed_entries_total Spilled entries delivered from the durable spill (already counted as spilled).
# TYPE fluentcore_replayed_entries_total counter
fluentcore_replayed_entries_total{stream="err"} 9
# HELP fluentcore_spill_bytes Bytes of the durable spill's segment files.
# TYPE fluentcore_spill_bytes gauge
fluentcore_spill_bytes{stream="err"} 0
# HELP fluentcore_spill_corrupt_segments_total Spill segments whose damaged tail was skipped on replay.
# TYPE fluentcore_spill_corrupt_segments_total counter
fluentcore_spill_corrupt_segments_total{stream="err"} 2
`
	if err := testutil.CollectAndCompare(core.metrics, strings.NewReader(want), "fluentcore_replayed_entries_total",
		"fluentcore_spill_bytes", "fluentcore_spill_corrupt_segments_total"); err != nil {
		t.Fatal(err)
	}
	evs := ev.of(EventSpillCorrupt)
	if len(evs) != 2 || !strings.Contains(evs[0].Err.Error(), filepath.Base(segs[0])) ||
		!strings.Contains(evs[1].Err.Error(), filepath.Base(segs[2])) {
		t.Fatalf("corrupt events %v", evs)
	}
	if err := core.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, spill.SegmentName(3)+".tmp")); err != nil {
		t.Fatalf("a file that is not a segment was touched: %v", err)
	}
	if r.Len() != 9 {
		t.Fatalf("receiver has %d entries", r.Len())
	}
}

func appendFile(t *testing.T, name string, p []byte) {
	t.Helper()
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(p); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// A second core on the same Spill.Dir runs without a spill and says so (Close's error and an
// event); its err entries go to Spill.Fallback, counted as spilled. A Spill.Dir that is a file
// is a Validate error, and the core still works.
func TestSpillDirConflictsAreReported(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	dir := t.TempDir()
	var ev1, ev2 eventLog
	first := New(spillTestConfig(r.Addr(), dir, io.Discard, &ev1))
	var fb testkit.Lines
	cfg2 := spillTestConfig(downAddr(t), dir, &fb, &ev2)
	cfg2.Timeouts.Close = 50 * time.Millisecond
	second := New(cfg2)
	zap.New(second).Error("goes to the fallback")
	if err := second.Close(); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second core's Close: %v", err)
	}
	if evs := ev2.of(EventSpillDisabled); len(evs) != 1 || !strings.Contains(evs[0].Err.Error(), strconv.Itoa(os.Getpid())) {
		t.Fatalf("second core's events %v", ev2.events)
	}
	if st := second.Stats().Err; st.Spilled != 1 || fb.Records() != 1 {
		t.Fatalf("second core: spilled %d, fallback lines %d", st.Spilled, fb.Records())
	}
	if err := first.Close(); err != nil {
		t.Fatalf("first core: %v", err)
	}
	if len(ev1.events) != 0 {
		t.Fatalf("first core's events %v", ev1.events)
	}
	// Once the first core is closed, the directory is free again.
	third := New(spillTestConfig(r.Addr(), dir, io.Discard, &ev1))
	if err := third.Close(); err != nil {
		t.Fatalf("third core: %v", err)
	}

	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := spillTestConfig(r.Addr(), file, io.Discard, &ev1)
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Fatalf("Validate: %v", err)
	}
	for _, bad := range []Config{{Spill: SpillConfig{After: -1}}, {Spill: SpillConfig{MaxBytes: -1}}, {Spill: SpillConfig{MaxBytes: 1000}}} {
		if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "Spill") {
			t.Errorf("Validate(%+v): %v", bad, err)
		}
	}
	core := New(cfg)
	zap.New(core).Error("still delivered")
	if _, err := r.WaitForEntries(1, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := core.Close(); err == nil || !strings.Contains(err.Error(), "Spill.Dir") {
		t.Fatalf("Close: %v", err)
	}
}

const (
	childDirEnv  = "FLUENTCORE_SPILL_CHILD_DIR"
	childAddrEnv = "FLUENTCORE_SPILL_CHILD_ADDR"
	childEntries = 300
)

// TestSpillHelperProcess is the child of TestSpillSurvivesKill9, not a test of its own: it
// logs err entries with the receiver unreachable, says on stdout once they are all on disk,
// and waits to be killed.
func TestSpillHelperProcess(t *testing.T) {
	dir := os.Getenv(childDirEnv)
	if dir == "" {
		t.Skip("the child process of TestSpillSurvivesKill9")
	}
	var ev eventLog
	core := New(spillTestConfig(os.Getenv(childAddrEnv), dir, os.Stderr, &ev))
	logger := zap.New(core)
	for i := range childEntries {
		logger.Error("before the crash", zap.Int("i", i))
	}
	if err := core.Sync(); err != nil {
		fmt.Println("FAILED", err)
		os.Exit(1)
	}
	fmt.Printf("SPILLED %d\n", core.Stats().Err.Spilled)
	_, _ = io.Copy(io.Discard, os.Stdin) // until SIGKILL, or the parent going away
	os.Exit(3)
}

// The logging process is killed with SIGKILL during an outage; a new process on the same
// Spill.Dir delivers every err entry the old one spilled, in order.
func TestSpillSurvivesKill9(t *testing.T) {
	addr, dir := downAddr(t), t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestSpillHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), childDirEnv+"="+dir, childAddrEnv+"="+addr)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	lines := make(chan string, 1)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "SPILLED") || strings.HasPrefix(sc.Text(), "FAILED") {
				lines <- sc.Text()
			}
		}
	}()
	var line string
	select {
	case line = <-lines:
	case <-time.After(60 * time.Second):
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL: no deferred code, no Close
		t.Fatal(err)
	}
	werr := cmd.Wait()
	for range lines { // the reader ends with the child's stdout
	}
	if line != fmt.Sprintf("SPILLED %d", childEntries) {
		t.Fatalf("child said %q; stderr:\n%s", line, stderr.String())
	}
	var exit *exec.ExitError
	if !errors.As(werr, &exit) || exit.ExitCode() != -1 {
		t.Fatalf("child did not die by the signal: %v", werr)
	}
	if len(segmentFiles(t, dir)) == 0 {
		t.Fatal("the child left no segment")
	}

	r := forwardtest.NewReceiver(t, forwardtest.WithAddr(addr))
	var ev eventLog
	core := New(spillTestConfig(addr, dir, io.Discard, &ev))
	got, err := r.WaitForEntries(childEntries, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	checkInOrder(t, got, childEntries)
	for _, e := range got {
		if e.Record["msg"] != "before the crash" {
			t.Fatalf("entry %v", e.Record)
		}
	}
	waitUntil(t, "the spill is replayed", func() bool {
		return core.Stats().Err.SpillBytes == 0 && len(segmentFiles(t, dir)) == 0
	})
	if err := core.Close(); err != nil {
		t.Fatal(err)
	}
	st := core.Stats().Err
	if st.Replayed != childEntries || st.Entries != 0 || len(segmentFiles(t, dir)) != 0 {
		t.Fatalf("replayed %d, entries %d, segments left %v", st.Replayed, st.Entries, segmentFiles(t, dir))
	}
}

// Without Spill.Dir, err batches that have failed for Spill.After go to Spill.Fallback, in the
// order logged, and so does every entry logged after that while the receiver stays down:
// none waits in memory for the receiver. Once it is back, err entries are sent again.
func TestErrGoesToFallbackAfterSpillAfterWithoutSpillDir(t *testing.T) {
	addr := downAddr(t)
	fb := new(fallbackLog)
	core := New(fastRetry(Config{
		Addr:      addr,
		Tag:       "shop",
		Spill:     SpillConfig{Fallback: fb, After: 50 * time.Millisecond},
		Transport: TransportConfig{FlushInterval: 10 * time.Millisecond, RetryMax: 20 * time.Millisecond},
	}))
	defer core.Close()
	logger := zap.New(core)
	for i := range 20 {
		logger.Error("down", zap.Int64("id", faultID(0, i)))
	}
	waitUntil(t, "the first 20 err entries in Spill.Fallback", func() bool { return fb.count() == 20 })
	// Logged while the stream is already spilling: each reaches the fallback within about a
	// Transport.FlushInterval, not at the next attempt to send.
	logger.Error("down", zap.Int64("id", faultID(0, 20)))
	waitUntil(t, "an entry logged in the outage in Spill.Fallback", func() bool { return fb.count() == 21 })
	if bad := fb.unordered(); bad != "" {
		t.Errorf("Spill.Fallback got entries out of order: %s", bad)
	}
	if st := core.Stats().Err; st.Spilled != 21 || st.Delivered != 0 {
		t.Errorf("spilled %d, delivered %d; want 21 and 0", st.Spilled, st.Delivered)
	}

	// Until an attempt to send goes through, what is sealed still goes to the fallback.
	r := forwardtest.NewReceiver(t, forwardtest.WithAddr(addr))
	logged := 21
	for deadline := time.Now().Add(20 * time.Second); r.Len() == 0; logged++ {
		if time.Now().After(deadline) {
			t.Fatalf("nothing sent in 20 s once the receiver was back (stats %+v)", core.Stats().Err)
		}
		logger.Error("back", zap.Int64("id", faultID(0, logged)))
		time.Sleep(5 * time.Millisecond) // the pace of the entries, not a wait for a result
	}
	if err := core.Close(); err != nil {
		t.Fatal(err)
	}
	st := core.Stats()
	identityHolds(t, st)
	waitUntil(t, "the receiver has what was delivered", func() bool { return r.Len() == int(st.Err.Delivered) })
	if int(st.Err.Delivered)+fb.count() != logged {
		t.Errorf("delivered %d (the receiver has %d), in Spill.Fallback %d; logged %d", st.Err.Delivered, r.Len(), fb.count(), logged)
	}
	if bad := fb.unordered(); bad != "" {
		t.Errorf("Spill.Fallback got entries out of order: %s", bad)
	}
}

// While every err connection fails, an Error() that finds the err buffers full does not
// wait out Err.MaxWait: it has the sender move the queued batches to the spill at once
// (Spill.After is an hour here), and waits only for that.
func TestErrDoesNotWaitOutErrMaxWaitWhileSendsFail(t *testing.T) {
	var fb testkit.Lines
	const maxWait = MaxErrMaxWait
	core := New(fastRetry(Config{
		Addr: downAddr(t), Spill: SpillConfig{Fallback: &fb, After: time.Hour},
		Transport: TransportConfig{MaxBatchBytes: 2 << 10}, Err: ErrConfig{BufferBytes: 8 << 10, MaxWait: maxWait},
	}))
	defer core.Close()
	logger := zap.New(core)
	logger.Error("first")
	errSt := sinkOf(core).streams[errStream]
	waitUntil(t, "the err stream sees the receiver down", errSt.Senders.Failing)
	pad := strings.Repeat("e", 200)
	var slowest time.Duration
	for i, start := 0, time.Now(); core.Stats().Err.Spilled < 40; i++ {
		if time.Since(start) > 20*maxWait {
			t.Fatalf("40 err entries not spilled in %v (%d logged into an 8 KiB buffer): %+v", 20*maxWait, i, core.Stats().Err)
		}
		t0 := time.Now()
		logger.Error("down", zap.Int("i", i), zap.String("pad", pad))
		slowest = max(slowest, time.Since(t0))
	}
	if n := errSt.Counts.WaitsOut.Load(); n != 0 || slowest >= maxWait {
		t.Errorf("%d Error() calls waited out Err.MaxWait (%v); the slowest took %v", n, maxWait, slowest)
	}
	if err := core.Close(); err != nil && !strings.Contains(err.Error(), "not delivered") {
		t.Fatal(err)
	}
	st := core.Stats().Err
	if int(st.Spilled) != fb.Records() || st.DroppedTotal() != 0 {
		t.Errorf("spilled %d, fallback lines %d, dropped %v", st.Spilled, fb.Records(), st.Dropped)
	}
}

// With the err buffers full and the receiver stalled, an err entry waits at most Err.MaxWait
// and then goes to the fallback, counted as spilled; after the receiver resumes, everything
// not spilled is delivered.
func TestErrWaitsBoundedThenSpills(t *testing.T) {
	r := forwardtest.NewReceiver(t, forwardtest.CountOnly())
	var fb testkit.Lines
	const wait = 20 * time.Millisecond
	core := New(fastRetry(Config{
		Addr:      r.Addr(),
		Transport: TransportConfig{MaxBatchBytes: 2 << 10, FlushInterval: time.Millisecond},
		Err:       ErrConfig{BufferBytes: 8 << 10, MaxWait: wait},
		Timeouts:  TimeoutsConfig{Write: 20 * time.Millisecond},
		Spill:     SpillConfig{Fallback: &fb},
	}))
	logger := zap.New(core)
	r.Stall()
	var slowest time.Duration
	for i := 0; core.Stats().Err.Spilled < 5; i++ {
		if i > 1_000_000 {
			t.Fatal("err entries never spilled with the receiver stalled")
		}
		start := time.Now()
		logger.Error("outage", zap.Int("i", i), zap.String("pad", strings.Repeat("e", 400)))
		slowest = max(slowest, time.Since(start))
	}
	// Every call above returned while the receiver was stalled, so none waited for it. The
	// bound below only catches a hang: on a loaded 2-core machine with the race detector a
	// call that waited exactly Err.MaxWait can still be descheduled for a second or more, so
	// a tight bound here would measure the machine, not the code.
	t.Logf("slowest err log call: %v (Err.MaxWait %v)", slowest, wait)
	if slowest > wait+5*time.Second {
		t.Fatalf("an err log call took %v; Err.MaxWait is %v", slowest, wait)
	}
	r.Resume()
	if err := core.Close(); err != nil {
		t.Fatal(err)
	}
	st := core.Stats()
	if int(st.Err.Spilled) != fb.Records() || st.Err.DroppedTotal() != 0 {
		t.Fatalf("spilled %d, fallback lines %d, dropped %v", st.Err.Spilled, fb.Records(), st.Err.Dropped)
	}
	identityHolds(t, st)
}

// Err entries do not wait for Transport.FlushInterval: with an hour-long Transport.FlushInterval an Error entry
// still reaches the receiver (no Sync), while an Info entry logged before it stays batched.
// (Entries may arrive out of order: the buffers are sharded.)
func TestErrSentWithoutWaitingForFlushInterval(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	core := New(Config{Addr: r.Addr(), Tag: "shop", Transport: TransportConfig{FlushInterval: time.Hour}})
	defer core.Close()
	logger := zap.New(core)
	logger.Info("batched")
	for i := range 3 {
		logger.Error("prompt", zap.Int("i", i))
	}
	got, err := r.WaitForEntries(3, 20*time.Second)
	if err != nil {
		t.Fatalf("err entries not sent before Transport.FlushInterval: %v (stats %+v)", err, core.Stats().Err)
	}
	seen := map[any]bool{}
	for _, e := range got {
		if e.Tag != "shop.err" || e.Record["msg"] != "prompt" {
			t.Fatalf("entry: %s %v", e.Tag, e.Record)
		}
		seen[e.Record["i"]] = true
	}
	if len(seen) != 3 {
		t.Fatalf("got %v", got)
	}
	// The receiver may have read the frame before the sender's write returned and counted it.
	waitUntil(t, "err delivered 3", func() bool { return core.Stats().Err.Delivered == 3 })
	if st := core.Stats(); st.Info.Delivered != 0 {
		t.Fatalf("info delivered %d (want 0: still batched)", st.Info.Delivered)
	}
}
