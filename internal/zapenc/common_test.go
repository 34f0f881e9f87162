package zapenc

import (
	"bytes"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/fluentcore/fluentcore/internal/msgpenc"
)

// overBudgets counts its OverBudget calls.
type overBudgets int

func (o *overBudgets) OverBudget() { *o++ }

// oneByOne hands its fields to the encoder one Add call at a time, inline: each through
// its Add method's own checks, as a field of any other type goes.
func oneByOne(fields []zapcore.Field) zapcore.Field {
	return zap.Inline(objFunc(func(enc zapcore.ObjectEncoder) error {
		for _, f := range fields {
			f.AddTo(enc)
		}
		return nil
	}))
}

// The common fields' loop writes what their Add methods write, byte for byte, and stops where
// they stop: at every budget from nothing to more than the entry needs, cutting or not, with
// values of every length around the caps, non-ASCII and longer than a fixstr, a field of
// another type and a namespace among them, a weight, a stacktrace (whose room a cut entry
// keeps), and with and without a context that leaves a namespace open.
func TestCommonFieldsLoopWritesWhatTheAddMethodsWrite(t *testing.T) {
	_, std := standardRecord()
	mixed := append([]zapcore.Field{
		zap.String("é-key", "naïve"),
		zap.String("long", strings.Repeat("x", 40)),
		zap.String("exactly32", strings.Repeat("y", 32)),
		zap.String("bad", "a\xffb"),
		zap.Duration("took", 1500),
		zap.Namespace("ns"),
		zap.Bool("off", false),
		zap.Float64("neg", -0.5),
		zap.Int64("min", -1<<63),
	}, std...)
	for n := range 48 {
		mixed = append(mixed, zap.String("n", strings.Repeat("z", n)))
	}
	ent := zapcore.Entry{Level: zapcore.InfoLevel, Time: entTime, Message: "request handled", Stack: "goroutine 1 [running]:"}
	cfg := NewConfig(defaultCfg())
	fast, slow := New(cfg), New(cfg)
	fast.WeightKey, slow.WeightKey, fast.Weight, slow.Weight = appendStr(nil, "w"), appendStr(nil, "w"), 3, 3
	ctx := buildContext(cfg, [][]zapcore.Field{{zap.String("svc", "api"), zap.Namespace("req")}})
	for _, ctx := range []*Context{nil, ctx} {
		full := len(fast.EncodeEntry(nil, ctx, &ent, mixed, msgpenc.Budget{}, nil))
		for _, cut := range []bool{false, true} {
			for _, valueCap := range []int{0, 8, 32} {
				for limit := 1; limit <= full+16; limit++ {
					b := msgpenc.Budget{Limit: limit, ValueCap: valueCap, Cut: cut}
					var fastO, slowO overBudgets
					got := fast.EncodeEntry(make([]byte, 0, 4*full), ctx, &ent, mixed, b, &fastO)
					want := slow.EncodeEntry(make([]byte, 0, 4*full), ctx, &ent, []zapcore.Field{oneByOne(mixed)}, b, &slowO)
					if !bytes.Equal(got, want) || fast.Abandoned() != slow.Abandoned() || fastO != slowO {
						t.Fatalf("context %v, cut %v, value cap %d, limit %d: %x (abandoned %v, told %d), want %x (abandoned %v, told %d)",
							ctx != nil, cut, valueCap, limit, got, fast.Abandoned(), fastO, want, slow.Abandoned(), slowO)
					}
				}
			}
		}
	}
}
