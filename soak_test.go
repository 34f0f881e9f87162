package fluentcore

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"maps"
	"math/bits"
	"net"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore/forwardtest"
	"github.com/fluentcore/fluentcore/internal/testkit"
	"go.uber.org/zap"
)

var soakFor = flag.Duration("soak", 0, "run TestSoak for this long (0 skips it; `make soak` runs it for 60s)")

// soakSample is one second of the soak.
type soakSample struct {
	at         time.Duration
	rss        int64
	goroutines int
	logged     uint64
}

// rss is the process's resident set size, from /proc/self/statm.
func rss(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Skipf("no /proc/self/statm: %v", err)
	}
	f := strings.Fields(string(b))
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return pages * int64(os.Getpagesize())
}

// errIDs is a set of err entry ids (goroutine, sequence) with a count of duplicates.
type errIDs struct {
	seen  [][]uint64 // per goroutine, a bitset of sequence numbers
	total int
}

func (s *errIDs) add(g, seq int) {
	for len(s.seen) <= g {
		s.seen = append(s.seen, nil)
	}
	w := seq / 64
	if w >= len(s.seen[g]) {
		s.seen[g] = slices.Grow(s.seen[g], w+1-len(s.seen[g]))[:w+1]
	}
	s.seen[g][w] |= 1 << (seq % 64)
	s.total++
}

func (s *errIDs) distinct() int {
	n := 0
	for _, set := range s.seen {
		for _, w := range set {
			n += bits.OnesCount64(w)
		}
	}
	return n
}

// missing counts the sequence numbers below logged[g] that are not in the set.
func (s *errIDs) missing(logged []int) int {
	n := 0
	for g, l := range logged {
		for seq := range l {
			if g >= len(s.seen) || seq/64 >= len(s.seen[g]) || s.seen[g][seq/64]&(1<<(seq%64)) == 0 {
				n++
			}
		}
	}
	return n
}

// tagRouter listens for a core's connections and joins each to its stream's receiver, told
// by the tag of its first frame: err frames to errAddr, the others to infoAddr. A receiver
// that refuses or closes closes the core's connection with it. It returns its address.
func tagRouter(t *testing.T, infoAddr, errAddr string) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	route := func(c net.Conn) {
		defer c.Close()
		in := bufio.NewReader(c)
		head, err := in.Peek(16) // the frame's array header, its tag, its payload's header
		if err != nil {
			return
		}
		to := infoAddr
		if bytes.Contains(head, []byte(".err")) {
			to = errAddr
		}
		out, err := net.Dial("tcp", to)
		if err != nil {
			return
		}
		defer out.Close()
		go func() {
			_, _ = io.Copy(c, out) // the acks
			_ = c.Close()
		}()
		_, _ = io.Copy(out, in)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go route(c)
		}
	}()
	return "tcp://" + ln.Addr().String()
}

// TestSoak logs at full rate from several goroutines while the receivers restart every
// few seconds, sampling RSS and goroutines each second: both must stay flat, the
// accounting identity must hold, and no err entry may be lost. It runs only with -soak
// (`make soak`: 60s), not in `go test ./...`.
//
// Degrade is off, so that the info stream sends at full rate and drops only when its
// buffers are full. The info stream goes to a count-only receiver (it only counts: storing a minute of
// full-rate entries would measure the receiver, not the client); the err stream goes to
// receivers that decode every entry, so each err id is checked. The core sends to a router
// that joins each connection to its stream's receiver (tagRouter).
func TestSoak(t *testing.T) {
	if *soakFor <= 0 {
		t.Skip("a soak: run with -soak=DURATION (make soak)")
	}
	const (
		goroutines   = 4
		errEvery     = 1000
		restartEvery = 3 // seconds
		downFor      = 200 * time.Millisecond
	)
	infoRecv := forwardtest.NewReceiver(t, forwardtest.CountOnly(), forwardtest.WithLogf(nil))
	errAddr := testkit.FreePort(t)
	startErr := func() *forwardtest.Receiver {
		r, err := forwardtest.Start(forwardtest.WithAddr(errAddr))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	ids := &errIDs{}
	harvest := func(r *forwardtest.Receiver) {
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		if v := r.Violations(); len(v) > 0 {
			t.Fatalf("protocol violations: %v", v)
		}
		for _, e := range r.Entries() {
			id := e.Record["id"].(int64)
			ids.add(int(id>>32), int(id&(1<<32-1)))
		}
	}
	errRecv := startErr()

	fb := new(fallbackLog)
	cfg := Config{
		Addr: tagRouter(t, strings.TrimPrefix(infoRecv.Addr(), "tcp://"), errAddr), Tag: "soak", Info: InfoConfig{Acks: AcksOn}, Timeouts: TimeoutsConfig{Ack: 2 * time.Second, Close: 30 * time.Second},
		Spill: SpillConfig{Dir: t.TempDir(), After: time.Second, Fallback: fb}, OnEvent: (&eventLog{}).add,
		Transport: TransportConfig{RetryMin: 10 * time.Millisecond, RetryMax: 200 * time.Millisecond},
		// Degrading would drop most info entries in Check; the soak wants the send path
		// busy, so info entries are dropped only when the buffers are full.
		Degrade: DegradeConfig{Policy: DegradeOff},
	}
	core := New(cfg)
	logger := zap.New(core)

	var stop atomic.Bool
	var wg sync.WaitGroup
	errLogged := make([]int, goroutines)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errSeq := 0
			for i := 0; !stop.Load(); i++ {
				if i%errEvery == 0 {
					logger.Error("soak", zap.Int64("id", int64(g)<<32|int64(errSeq)), zap.Int("i", i))
					errSeq++
				} else {
					logger.Info("soak", zap.Int("g", g), zap.Int("i", i), zap.String("user", "u-8f3a2b9c"))
				}
			}
			errLogged[g] = errSeq
		}()
	}

	var samples []soakSample
	start := time.Now()
	tick := time.NewTicker(time.Second)
	restarts := 0
	for n := 1; time.Since(start) < *soakFor; n++ {
		<-tick.C
		st := core.Stats()
		samples = append(samples, soakSample{time.Since(start), rss(t), runtime.NumGoroutine(), st.Info.Entries + st.Err.Entries})
		if n%restartEvery == 0 {
			restarts++
			mustDo(t, infoRecv.SetRefuse(true))
			infoRecv.CloseConnections()
			harvest(errRecv)
			time.Sleep(downFor) // the receivers are down: the client retries meanwhile
			mustDo(t, infoRecv.SetRefuse(false))
			errRecv = startErr()
		}
	}
	tick.Stop()
	stop.Store(true)
	wg.Wait()

	waitUntil(t, "everything logged is delivered", func() bool {
		return core.Sync() == nil && core.Stats().Err.SpillBytes == 0
	})
	if err := core.Close(); err != nil {
		t.Fatal(err)
	}
	harvest(errRecv)
	st := core.Stats()
	identityHolds(t, st)

	var logged int
	for _, n := range errLogged {
		logged += n
	}
	lost := ids.missing(errLogged)
	elapsed := time.Since(start)
	for _, s := range samples {
		t.Logf("t=%3.0fs rss=%6.1f MiB goroutines=%3d logged=%d", s.at.Seconds(), float64(s.rss)/(1<<20), s.goroutines, s.logged)
	}
	t.Logf("soak %v: %d entries logged (%.0f/s), %d receiver restarts; info delivered %d, dropped %v; err logged %d, delivered %d, spilled %d, replayed %d, duplicates %d, lost %d",
		elapsed.Round(time.Second), st.Info.Entries+st.Err.Entries, float64(st.Info.Entries+st.Err.Entries)/elapsed.Seconds(), restarts,
		st.Info.Delivered, nonZero(st.Info.Dropped), logged, st.Err.Delivered, st.Err.Spilled, st.Err.Replayed, ids.total-ids.distinct(), lost)

	if lost != 0 || int(st.Err.Entries) != logged || st.Err.DroppedTotal() != 0 || len(fb.idSet()) != 0 {
		t.Errorf("err: %d lost of %d; core counted %d, dropped %v, fallback %d", lost, logged, st.Err.Entries, st.Err.Dropped, len(fb.idSet()))
	}
	if got := infoRecv.Stats().Entries; got < int64(st.Info.Delivered) {
		t.Errorf("info receiver counted %d entries; the core counted %d delivered", got, st.Info.Delivered)
	}
	if restarts < 2 || len(samples) < 4 {
		t.Fatalf("%d restarts and %d samples: too short to judge (-soak %v)", restarts, len(samples), *soakFor)
	}
	// Flat: the last quarter's peak is within 20% (plus a little) of the first quarter's.
	q := len(samples) / 4
	first, last := samples[:q], samples[len(samples)-q:]
	peak := func(s []soakSample, f func(soakSample) int64) int64 {
		var m int64
		for _, x := range s {
			m = max(m, f(x))
		}
		return m
	}
	rssOf := func(s soakSample) int64 { return s.rss }
	gOf := func(s soakSample) int64 { return int64(s.goroutines) }
	if a, b := peak(first, rssOf), peak(last, rssOf); b > a*12/10+16<<20 {
		t.Errorf("RSS grew: first quarter's peak %.1f MiB, last quarter's %.1f MiB", float64(a)/(1<<20), float64(b)/(1<<20))
	}
	if a, b := peak(first, gOf), peak(last, gOf); b > a*12/10+5 {
		t.Errorf("goroutines grew: first quarter's peak %d, last quarter's %d", a, b)
	}
}

// nonZero formats the non-zero counts of a map.
func nonZero(m map[string]uint64) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if m[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
		}
	}
	return "{" + strings.Join(parts, " ") + "}"
}
