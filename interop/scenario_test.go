package interop

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Timeouts of the tests: generous, they bound waits that normally end in milliseconds.
const (
	deliverTimeout = 10 * time.Second // Sync's deadline, and the wait for the peer's output
	closeTimeout   = 5 * time.Second  // after a successful Sync, Close has nothing left to send
	failSyncAfter  = 2 * time.Second  // Sync's deadline in tests that expect no delivery
)

// sent is one entry as logged: what every receiver must report, before its own mapping.
// Record values are in the form msgpack decodes to: string, int64, uint64 (above
// MaxInt64 only), float64, bool, []byte, map[string]any, []any.
type sent struct {
	tag    string
	time   time.Time
	record map[string]any
}

// fixedClock gives zap the time of the next entry, so that each entry's time is known
// to the nanosecond.
type fixedClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fixedClock) set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

func (c *fixedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fixedClock) NewTicker(d time.Duration) *time.Ticker { return time.NewTicker(d) }

// syncBuffer is a Spill.Fallback the test can read while the core writes to it.
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

const baseTag = "interop"

// baseConfig is the Config every interop test starts from: small batches so that one
// scenario spans several frames (and several acks) per stream, a short flush interval,
// a Spill.Fallback the test can inspect.
func baseConfig(addr string, fallback *syncBuffer) fluentcore.Config {
	return fluentcore.Config{
		Addr:      addr,
		Tag:       baseTag,
		Info:      fluentcore.InfoConfig{BufferBytes: 1 << 20},
		Err:       fluentcore.ErrConfig{BufferBytes: 1 << 20},
		Transport: fluentcore.TransportConfig{MaxBatchBytes: 4096, FlushInterval: 20 * time.Millisecond, RetryMin: 50 * time.Millisecond, RetryMax: 500 * time.Millisecond},
		Timeouts:  fluentcore.TimeoutsConfig{Sync: deliverTimeout, Close: closeTimeout, Ack: deliverTimeout},
		Spill:     fluentcore.SpillConfig{Fallback: fallback},
	}
}

// bulkEntries is how many small info entries each scenario adds to fill several batches.
const bulkEntries = 150

// logScenario logs, through zap, entries of every level the core sends with fields of
// every kind a zap record carries, then bulkEntries small ones, half of them and an err
// entry through a logger tag (fluentcore.Tag("audit"): tags interop.audit.info and
// interop.audit.err, docs/tags.md), and returns what each receiver must see. Every record carries a unique "seq" to match it on arrival (entries
// of one stream may arrive out of order: each shard fills its own batches).
func logScenario(core *fluentcore.Core, messageKey string) []sent {
	if messageKey == "" {
		messageKey = "msg"
	}
	clock := &fixedClock{}
	logger := zap.New(core, zap.WithClock(clock)).Named("interop").With(zap.String("svc", "shop"))
	// Nanoseconds that are not a multiple of 1000: a µs-precision path would show.
	base := time.Date(2025, 3, 4, 5, 6, 7, 123456789, time.UTC)

	audit := logger.With(fluentcore.Tag("audit"))
	var out []sent
	seq := int64(0)
	tagged := false // log through audit
	log := func(level zapcore.Level, msg string, want map[string]any, fields ...zap.Field) {
		seq++
		at := base.Add(time.Duration(seq) * (time.Second + 1001))
		clock.set(at)
		fields = append(fields, zap.Int64("seq", seq))
		tag := baseTag
		if tagged {
			audit.Log(level, msg, fields...)
			tag = baseTag + ".audit"
		} else {
			logger.Log(level, msg, fields...)
		}

		rec := map[string]any{
			"level": level.String(), "logger": "interop", messageKey: msg, "svc": "shop", "seq": seq,
		}
		for k, v := range want {
			rec[k] = v
		}
		stream := "info"
		if level >= zapcore.ErrorLevel {
			stream = "err"
		}
		out = append(out, sent{tag: tag + "." + stream, time: at, record: rec})
	}

	log(zapcore.InfoLevel, "order placed", map[string]any{
		"id": "A-1", "items": int64(3), "big": int64(-1 << 40), "ratio": 0.25, "paid": true,
	}, zap.String("id", "A-1"), zap.Int("items", 3), zap.Int64("big", -1<<40),
		zap.Float64("ratio", 0.25), zap.Bool("paid", true))
	log(zapcore.WarnLevel, "slow request", map[string]any{
		"took":    1.5,
		"skus":    []any{"a", "b"},
		"raw":     []byte{0, 1, 'z'},
		"unicode": "héllo ✓ 日本",
		"empty":   "",
		"huge":    uint64(math.MaxUint64),
	}, zap.Duration("took", 1500*time.Millisecond), zap.Strings("skus", []string{"a", "b"}),
		zap.Binary("raw", []byte{0, 1, 'z'}), zap.String("unicode", "héllo ✓ 日本"), zap.String("empty", ""),
		zap.Uint64("huge", math.MaxUint64))
	log(zapcore.ErrorLevel, "payment failed", map[string]any{
		"error": "card declined",
		"ctx":   map[string]any{"k": "v", "n": int64(7), "nested": map[string]any{"ok": false}},
	}, zap.Error(errors.New("card declined")),
		zap.Dict("ctx", zap.String("k", "v"), zap.Int("n", 7), zap.Dict("nested", zap.Bool("ok", false))))
	log(zapcore.ErrorLevel, "second error", map[string]any{"attempt": int64(2)}, zap.Int("attempt", 2))
	tagged = true
	log(zapcore.ErrorLevel, "refund denied", map[string]any{"attempt": int64(3)}, zap.Int("attempt", 3))
	pad := strings.Repeat("x", 100)
	for i := 0; i < bulkEntries; i++ {
		tagged = i%2 == 1
		log(zapcore.InfoLevel, "bulk", map[string]any{"i": int64(i), "pad": pad}, zap.Int("i", i), zap.String("pad", pad))
	}
	return out
}

// syncAndClose syncs the core, then closes it. If Sync fails nothing else is worth
// checking: it closes the core and stops the test with what the core counted.
func syncAndClose(t *testing.T, core *fluentcore.Core) {
	t.Helper()
	if err := core.Sync(); err != nil {
		closeErr := core.Close()
		st := core.Stats()
		t.Fatalf("Sync: %v (Close: %v)\ninfo: delivered %d of %d, send errors %d\nerr: delivered %d of %d, send errors %d",
			err, closeErr, st.Info.Delivered, st.Info.Entries, st.Info.SendErrors,
			st.Err.Delivered, st.Err.Entries, st.Err.SendErrors)
	}
	if err := core.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// checkAllDelivered checks the core's own account after Close: every entry delivered,
// nothing dropped or spilled.
func checkAllDelivered(t *testing.T, core *fluentcore.Core, want []sent, fallback *syncBuffer) {
	t.Helper()
	var info, errs uint64
	for _, s := range want {
		if strings.HasSuffix(s.tag, ".err") {
			errs++
		} else {
			info++
		}
	}
	st := core.Stats()
	for _, c := range []struct {
		name string
		s    fluentcore.StreamStats
		want uint64
	}{{"info", st.Info, info}, {"err", st.Err, errs}} {
		if c.s.Entries != c.want || c.s.Delivered != c.want || c.s.DroppedTotal() != 0 || c.s.Spilled != 0 {
			t.Errorf("%s stream: entries %d, delivered %d, dropped %v, spilled %d; want %d entries all delivered",
				c.name, c.s.Entries, c.s.Delivered, c.s.Dropped, c.s.Spilled, c.want)
		}
	}
	if out := fallback.String(); out != "" {
		t.Errorf("Spill.Fallback got %q, want nothing", out)
	}
}

// matchBySeq pairs received entries with sent ones by their "seq" and reports the
// differences: missing, duplicated, unknown, or different entries. seqOf extracts the
// seq of a received entry; diff compares one pair and returns "" if they agree.
func matchBySeq[R any](want []sent, got []R, seqOf func(R) (int64, bool), diff func(sent, R) string) []string {
	bySeq := make(map[int64]sent, len(want))
	for _, s := range want {
		bySeq[s.record["seq"].(int64)] = s
	}
	var problems []string
	seen := make(map[int64]bool, len(got))
	for i, g := range got {
		seq, ok := seqOf(g)
		s, known := bySeq[seq]
		switch {
		case !ok || !known:
			problems = append(problems, fmt.Sprintf("entry %d: no known seq: %+v", i, g))
		case seen[seq]:
			problems = append(problems, fmt.Sprintf("seq %d received twice", seq))
		default:
			seen[seq] = true
			if d := diff(s, g); d != "" {
				problems = append(problems, fmt.Sprintf("seq %d: %s", seq, d))
			}
		}
	}
	for _, s := range want {
		if seq := s.record["seq"].(int64); !seen[seq] {
			problems = append(problems, fmt.Sprintf("seq %d (%s %q) never received", seq, s.tag, s.record["msg"]))
		}
	}
	if len(problems) > 10 {
		problems = append(problems[:10], fmt.Sprintf("... and %d more", len(problems)-10))
	}
	return problems
}

// waitUntil polls cond until it holds or timeout passes; it reports whether it held.
func waitUntil(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		<-tick.C
	}
	return true
}

// fluentcoreEncoderConfig is the core's default EncoderConfig (zap's production one
// without a time key) with the message under messageKey.
func fluentcoreEncoderConfig(messageKey string) zapcore.EncoderConfig {
	ec := zap.NewProductionEncoderConfig()
	ec.TimeKey = ""
	ec.MessageKey = messageKey
	return ec
}
