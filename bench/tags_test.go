package bench

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore"
	"go.uber.org/zap/zapcore"
)

// BenchmarkTags calls Core.Write flat out from RunParallel's goroutines (64 per GOMAXPROCS),
// as BenchmarkCoreWrite does (so allocs/op counts our code only), degrade off, the
// goroutines' cores spread over tags logger tags (core.With(fluentcore.Tag(…)), goroutine g
// on tag g mod tags); tags=0 is the core without logger tags, every entry under the stream's
// tag. Flush and delivery are inside the timer. Target (issue 28): tags=8 delivers at least
// 0.9 × tags=1's events/s, with 0 allocs/op.
func BenchmarkTags(b *testing.B) {
	for _, tags := range []int{0, 1, 8} {
		b.Run(fmt.Sprintf("tags=%d", tags), func(b *testing.B) {
			r := mustStartReceiver(b, KindForward)
			core := newFluentcore(r.Addr(), func(c *fluentcore.Config) { c.Degrade.Policy = fluentcore.DegradeOff })
			fields := ContextFields()
			cores := []zapcore.Core{core}
			if tags > 0 {
				cores = cores[:0]
				for i := range tags {
					cores = append(cores, core.With([]zapcore.Field{fluentcore.Tag(fmt.Sprint("t", i))}))
				}
			}
			var next atomic.Int64
			cl := &client{
				log:     func() {},
				finish:  core.Sync,
				refused: func() uint64 { return core.Stats().Info.DroppedTotal() },
				recv:    r,
				extra: func(b *testing.B, calls int64) {
					st := core.Stats().Info
					b.ReportMetric(float64(st.Delivered)/max(1, float64(st.SentBatches)), "entries/frame")
				},
				close: func() {
					_ = core.Close()
					_ = r.Close()
				},
			}
			measure(b, cl, func(b *testing.B, _ func()) {
				b.SetParallelism(parallelism)
				b.RunParallel(func(pb *testing.PB) {
					c := cores[int(next.Add(1)-1)%len(cores)]
					for pb.Next() {
						_ = c.Write(zapcore.Entry{Level: zapcore.InfoLevel, Time: time.Now(), Message: Message}, fields)
					}
				})
			})
		})
	}
}
