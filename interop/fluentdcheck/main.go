// Command fluentdcheck drives fluentcore against a real fluentd (or any Forward receiver)
// in the load shapes where its features meet, and prints what each stream logged,
// delivered, spilled, duplicated and dropped. It is a manual check: CI cannot fetch fluentd.
//
// Start fluentd with in_forward on 127.0.0.1:24224 (or in_unix for -mode errs) and an
// output that writes each tag to a file, e.g.
//
//	<source>
//	  @type forward
//	  port 24224
//	  bind 127.0.0.1
//	</source>
//	<match **>
//	  @type file
//	  path /tmp/fd/out/${tag}
//	  <buffer tag>
//	    flush_mode interval
//	    flush_interval 1s
//	  </buffer>
//	</match>
//
// then one of:
//
//	go run ./fluentdcheck -mode tags -tags 64   # 4 goroutines, 20 k entries/s in bursts of 100 over 64 logger tags, 3 s
//	go run ./fluentdcheck -mode quiet           # an info flood beside 7 quiet Tags.FromName loggers logging Info and Error
//	go run ./fluentdcheck -mode stall           # 30 s of Info and Error; stop fluentd (kill -STOP) from 5 s to 25 s
//	go run ./fluentdcheck -mode errs -addr unix:///tmp/fd/fd.sock   # 200 err entries to in_unix, then Sync
//
// and compare with what fluentd wrote.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fluentcore/fluentcore"
	"go.uber.org/zap"
)

type countWriter struct{ n atomic.Int64 }

func (w *countWriter) Write(p []byte) (int, error) {
	w.n.Add(int64(bytes.Count(p, []byte("\n"))))
	return len(p), nil
}

func main() {
	mode := flag.String("mode", "tags", "tags | quiet")
	ntags := flag.Int("tags", 64, "logger tags")
	addr := flag.String("addr", "tcp://127.0.0.1:24224", "")
	flag.Parse()
	fb := &countWriter{}
	cfg := fluentcore.Config{Addr: *addr, Tag: "chk", Metrics: fluentcore.MetricsConfig{Disabled: true}, Spill: fluentcore.SpillConfig{Fallback: fb}, Tags: fluentcore.TagsConfig{FromName: true}}
	core := fluentcore.New(cfg)
	logger := zap.New(core)
	start := time.Now()
	switch *mode {
	case "tags":
		// 4 goroutines, 20 k entries/s in all, bursts of 100, spread over ntags loggers, 3 s.
		var wg sync.WaitGroup
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				ls := make([]*zap.Logger, *ntags)
				for i := range ls {
					ls[i] = logger.With(fluentcore.Tag(fmt.Sprintf("t%d", i)))
				}
				next := time.Now()
				for b := 0; b < 150; b++ { // 150 bursts × 100 × 4 = 60 k in 3 s
					_ = b
					for i := 0; i < 100; i++ {
						ls[(b*100+i+g)%len(ls)].Info("burst entry", zap.Int("g", g), zap.Int("i", i))
					}
					next = next.Add(20 * time.Millisecond)
					time.Sleep(time.Until(next))
				}
			}(g)
		}
		wg.Wait()
	case "stall":
		// 30 s of 2,000 Info and 50 Error entries a second, from 4 goroutines; the receiver is
		// stopped (SIGSTOP) from 5 s to 25 s by the caller's script.
		var wg sync.WaitGroup
		var slowest atomic.Int64
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				next := time.Now()
				for i := 0; time.Since(start) < 30*time.Second; i++ {
					if i%40 == 0 {
						t0 := time.Now()
						logger.Error("stall error", zap.Int("g", g), zap.Int("i", i))
						if d := int64(time.Since(t0)); d > slowest.Load() {
							slowest.Store(d)
						}
					} else {
						logger.Info("stall info", zap.Int("g", g), zap.Int("i", i))
					}
					next = next.Add(2 * time.Millisecond)
					time.Sleep(time.Until(next))
				}
			}(g)
		}
		wg.Wait()
		fmt.Printf("stall: slowest Error() %v\n", time.Duration(slowest.Load()))
	case "errs":
		for i := 0; i < 200; i++ {
			logger.Error("unix error", zap.Int("i", i))
		}
		t0 := time.Now()
		err := logger.Sync()
		fmt.Printf("errs: sync took %v: %v\n", time.Since(t0).Round(time.Millisecond), err)
	case "quiet":
		var wg sync.WaitGroup
		stop := make(chan struct{})
		flood := logger.Named("flood")
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					flood.Info("flooding", zap.Int("n", 1))
				}
			}()
		}
		var qw sync.WaitGroup
		for q := 0; q < 7; q++ {
			qw.Add(1)
			go func(q int) {
				defer qw.Done()
				l := logger.Named(fmt.Sprintf("quiet%d", q))
				for i := 0; i < 420; i++ {
					if i%21 == 20 {
						l.Error("quiet error", zap.Int("i", i))
					} else {
						l.Info("quiet info", zap.Int("i", i))
					}
					time.Sleep(2 * time.Second / 420)
				}
			}(q)
		}
		qw.Wait()
		close(stop)
		wg.Wait()
	}
	syncErr := logger.Sync()
	closeErr := core.Close()
	st := core.Stats()
	fmt.Printf("mode=%s elapsed=%v sync=%v close=%v fallback_lines=%d\n", *mode, time.Since(start).Round(time.Millisecond), syncErr, closeErr, fb.n.Load())
	for _, s := range []struct {
		n string
		v fluentcore.StreamStats
	}{{"info", st.Info}, {"err", st.Err}} {
		fmt.Printf("%s: entries=%d delivered=%d spilled=%d duplicated=%d dropped=%v\n", s.n, s.v.Entries, s.v.Delivered, s.v.Spilled, s.v.Duplicated, s.v.Dropped)
	}
	if *mode == "quiet" {
		q := 0
		for name, t := range st.Info.Tags {
			if strings.Contains(name, "quiet") {
				q += int(t.Delivered)
			}
		}
		fmt.Printf("quiet info delivered=%d of %d tags=%v\n", q, 7*400, len(st.Info.Tags))
	}
	os.Exit(0)
}
