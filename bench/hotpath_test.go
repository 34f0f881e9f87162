package bench

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore"
)

// hotTurn is how long a contender of BenchmarkHotPath logs before the other takes over, and
// hotLength how long each logs in a round, both at ruleScale.
const (
	hotTurn   = 100 * time.Millisecond
	hotLength = 3 * time.Second
)

// BenchmarkHotPath is the hot path's cost targets: the AddingFields entry through zap's
// logger, fluentcore's default against zap's JSON encoder writing to io.Discard and against
// fluentcore with degrade off, judged by the client's CPU per delivered entry (the process's
// CPU: the receivers run in children). The contenders log in turns of hotTurn until each
// has logged for hotLength (hotRound's order): this machine's speed drifts over a second by
// more than the targets' margins, and turns this short put the drift on all. A fluentcore
// turn ends with Sync, so that its sender's work falls in its own turn. Each round reports
// cpu-ratio (the default's CPU per delivered entry over zap's per call), off-ratio (over
// degrade off's per delivered entry), each contender's CPU per entry, the entries lost and
// those the default (rejected) and degrade off (off-rejected) dropped.
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

// hotOrder is the order of a round's turns: each contender as often first as last.
var hotOrder = [6]int{0, 1, 2, 2, 1, 0}

// hotRound is one round of BenchmarkHotPath from g goroutines: fluentcore's default, zap→
// Discard and fluentcore with degrade off in turns, in hotOrder, which each round starts
// a contender later.
func hotRound(b *testing.B, g int) {
	fc := openFluentcore(b, addingFields, nil)
	defer fc.close()
	zap := openZapDiscard(b, addingFields)
	defer zap.close()
	off := openFluentcore(b, addingFields, func(c *fluentcore.Config) { c.Degrade.Policy = fluentcore.DegradeOff })
	defer off.close()
	clients := [3]*client{fc, zap, off}
	var calls [3]int64
	var cpu [3]time.Duration
	shift := round(b)
	for t := range len(hotOrder) * max(1, int(scaled(hotLength)/scaled(hotTurn))/2) {
		i := (hotOrder[t%len(hotOrder)] + shift) % len(clients)
		c := clients[i]
		cpu0 := processCPU()
		calls[i] += turn(c.log, g, scaled(hotTurn))
		if err := c.finish(); err != nil {
			b.Fatalf("flush: %v", err)
		}
		cpu[i] += processCPU() - cpu0
	}
	d, doff := deliver(fc, calls[0], 0), deliver(off, calls[2], 0)
	fcPer := float64(cpu[0].Nanoseconds()) / float64(max(d.delivered, 1))
	zapPer := float64(cpu[1].Nanoseconds()) / float64(max(calls[1], 1))
	offPer := float64(cpu[2].Nanoseconds()) / float64(max(doff.delivered, 1))
	b.ReportMetric(fcPer/zapPer, "cpu-ratio")
	b.ReportMetric(fcPer/offPer, "off-ratio")
	b.ReportMetric(fcPer, "fc-cpu-ns/entry")
	b.ReportMetric(zapPer, "zap-cpu-ns/entry")
	b.ReportMetric(offPer, "off-cpu-ns/entry")
	b.ReportMetric(float64(d.delivered), "delivered")
	b.ReportMetric(float64(doff.delivered), "off-delivered")
	b.ReportMetric(float64(d.lost+doff.lost), "lost")
	b.ReportMetric(float64(d.refused), "rejected")
	b.ReportMetric(float64(doff.refused), "off-rejected")
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
