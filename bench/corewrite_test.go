package bench

import (
	"io"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
)

// BenchmarkCoreWrite calls Core.Write directly with a prebuilt entry and field slice, so
// that allocs/op counts our code only (zap's Logger allocates the variadic field slice in
// every zap-based row of the scenarios). Flush and delivery are inside the timer, as in the
// scenarios. Target: 0 allocs/op.
func BenchmarkCoreWrite(b *testing.B) {
	fields := ContextFields()
	b.Run("contender=fluentcore", func(b *testing.B) {
		r := mustStartReceiver(b, KindForward)
		defer r.Close()
		core := newFluentcore(r.Addr(), nil)
		defer core.Close()
		cl := &client{
			log: func() {
				_ = core.Write(zapcore.Entry{Level: zapcore.InfoLevel, Time: time.Now(), Message: Message}, fields)
			},
			finish:  core.Sync,
			refused: func() uint64 { return core.Stats().Info.DroppedTotal() },
			recv:    r,
			close:   func() {},
		}
		measure(b, cl, single)
	})
	b.Run("contender="+refName, func(b *testing.B) {
		enc := zapcore.NewJSONEncoder(newZapJSONConfig())
		core := zapcore.NewCore(enc, zapcore.AddSync(io.Discard), zapcore.InfoLevel)
		cl := &client{
			log: func() {
				_ = core.Write(zapcore.Entry{Level: zapcore.InfoLevel, Time: time.Now(), Message: Message}, fields)
			},
			finish:  core.Sync,
			refused: func() uint64 { return 0 },
			close:   func() {},
		}
		measure(b, cl, single)
	})
}
