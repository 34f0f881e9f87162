package bench

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// hotTurn is how long a contender of BenchmarkHotPath logs before the other takes over, and
// hotLength how long each logs in a round, both at ruleScale.
const (
	hotTurn   = 100 * time.Millisecond
	hotLength = 3 * time.Second
)

// BenchmarkHotPath is the hot path's cost target: the AddingFields entry through zap's
// logger, fluentcore's default against zap's JSON encoder writing to io.Discard, judged by
// the client's CPU per delivered entry (the process's CPU: the receiver runs in a child).
// The two contenders log in turns of hotTurn until each has logged for hotLength, in the
// order ABBA BAAB..., which the next round starts the other way round: this machine's speed
// drifts over a second by more than the target's margin, and turns this short put the
// drift on both. A fluentcore turn ends with Sync, so that its sender's work falls in its
// own turn. Each round reports cpu-ratio (fluentcore's CPU per delivered entry over zap's
// per call), each contender's CPU per entry, and fluentcore's lost and dropped entries.
// Timed by the clock, not by b.N: run it with -benchtime 1x.
func BenchmarkHotPath(b *testing.B) {
	for _, mode := range []string{"single", "parallel"} {
		b.Run("mode="+mode, func(b *testing.B) {
			g := 1
			if mode == "parallel" {
				g = parallelism * runtime.GOMAXPROCS(0)
			}
			hotRound(b, g)
		})
	}
}

// hotRounds counts each mode's rounds, so that its contenders take turns going first.
var hotRounds = map[string]int{}

// hotRound is one round of BenchmarkHotPath from g goroutines.
func hotRound(b *testing.B, g int) {
	fc := openFluentcore(b, addingFields, nil)
	defer fc.close()
	zap := openZapDiscard(b, addingFields)
	defer zap.close()
	clients := [2]*client{fc, zap}
	var calls [2]int64
	var cpu [2]time.Duration
	first := hotRounds[b.Name()] % 2
	hotRounds[b.Name()]++
	for t := range 2 * max(1, int(scaled(hotLength)/scaled(hotTurn))) {
		i := first ^ (t^t>>1)&1
		c := clients[i]
		cpu0 := processCPU()
		calls[i] += turn(c.log, g, scaled(hotTurn))
		if err := c.finish(); err != nil {
			b.Fatalf("flush: %v", err)
		}
		cpu[i] += processCPU() - cpu0
	}
	d := deliver(fc, calls[0], 0)
	fcPer := float64(cpu[0].Nanoseconds()) / float64(max(d.delivered, 1))
	zapPer := float64(cpu[1].Nanoseconds()) / float64(max(calls[1], 1))
	b.ReportMetric(fcPer/zapPer, "cpu-ratio")
	b.ReportMetric(fcPer, "fc-cpu-ns/entry")
	b.ReportMetric(zapPer, "zap-cpu-ns/entry")
	b.ReportMetric(float64(d.delivered), "delivered")
	b.ReportMetric(float64(d.lost), "lost")
	b.ReportMetric(float64(d.refused), "rejected")
}

// turn calls log from g goroutines until d has passed and returns how many calls they made.
// The goroutines look at the clock's flag every 64 calls, not at the clock.
func turn(log func(), g int, d time.Duration) int64 {
	const chunk = 64
	var stop atomic.Bool
	var n atomic.Int64
	var wg sync.WaitGroup
	timer := time.AfterFunc(d, func() { stop.Store(true) })
	defer timer.Stop()
	for range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine int64
			for !stop.Load() {
				for range chunk {
					log()
				}
				mine += chunk
			}
			n.Add(mine)
		}()
	}
	wg.Wait()
	return n.Load()
}
