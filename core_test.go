package fluentcore_test

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore"
	"github.com/fluentcore/fluentcore/forwardtest"
	"github.com/fluentcore/fluentcore/internal/testkit"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// jsonTwin is zap's own JSON encoder with fluentcore's default record layout plus the time as
// epoch nanoseconds under "ts", so each entry's record and EventTime can be checked against
// what zap itself writes.
func jsonTwin(buf *bytes.Buffer) zapcore.Core {
	ec := zap.NewProductionEncoderConfig()
	ec.TimeKey = "ts"
	ec.EncodeTime = zapcore.EpochNanosTimeEncoder
	return zapcore.NewCore(zapcore.NewJSONEncoder(ec), zapcore.AddSync(buf), zapcore.DebugLevel)
}

// newTestCore returns a core for a receiver at addr (or, with addr "", Config.Servers),
// closed when the test ends: tag "shop", every level, a quick flush and quick retries,
// metrics on reg (a new registry if nil); then each mod, in order, changes its Config (a nil mod is skipped). It
// fails the test if the Config does not validate.
func newTestCore(t *testing.T, addr string, reg prometheus.Registerer, mods ...func(*fluentcore.Config)) *fluentcore.Core {
	t.Helper()
	cfg := fluentcore.Config{
		Addr:      addr,
		Tag:       "shop",
		Level:     zapcore.DebugLevel,
		Transport: fluentcore.TransportConfig{FlushInterval: 10 * time.Millisecond, RetryMin: 5 * time.Millisecond, RetryMax: 50 * time.Millisecond},
		Metrics:   fluentcore.MetricsConfig{Registerer: reg},
	}
	if reg == nil { // a registry of its own: tests running in parallel share no series
		cfg.Metrics.Registerer = prometheus.NewRegistry()
	}
	for _, mod := range mods {
		if mod != nil {
			mod(&cfg)
		}
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	core := fluentcore.New(cfg)
	t.Cleanup(func() { _ = core.Close() })
	return core
}

// quiet is a newTestCore mod whose failures stay short and out of the test's output.
func quiet(c *fluentcore.Config) {
	c.Timeouts.Sync = 150 * time.Millisecond
	c.Timeouts.Close = 150 * time.Millisecond
	c.Spill.Fallback = new(testkit.Lines)
}

type user struct{ Name, Email string }

func (u user) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddString("name", u.Name)
	enc.AddString("email", u.Email)
	return nil
}

func TestEndToEndRecordsMatchZapJSON(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	reg := prometheus.NewRegistry()
	core := newTestCore(t, r.Addr(), reg)

	var twinOut bytes.Buffer
	logger := zap.New(zapcore.NewTee(core, jsonTwin(&twinOut)), zap.AddCaller()).Named("checkout")
	ctxLogger := logger.With(zap.String("service", "shop"), zap.Namespace("request")).
		With(zap.String("route", "/orders"))
	sugar := ctxLogger.Sugar()

	const nInfo, nErr = 300, 40
	var wantInfo, wantErr int
	for i := 0; i < nInfo; i++ {
		switch i % 3 {
		case 0:
			ctxLogger.Info("order placed", zap.Int("i", i), zap.String("id", fmt.Sprint("o-", i)),
				zap.Duration("took", time.Duration(i)*time.Millisecond), zap.Object("user", user{"ann", "a@x"}),
				zap.Binary("raw", []byte{0, 1, byte(i)}), zap.Float64("ratio", float64(i)/7))
		case 1:
			sugar.Infow("cache miss", "i", i, "key", fmt.Sprint("k", i), "hit", false, "sizes", []int{1, 2, i})
		default:
			ctxLogger.Debug("debug line", zap.Int("i", i), zap.Strings("tags", []string{"a", "b"}))
		}
		wantInfo++
	}
	for i := nInfo; i < nInfo+nErr; i++ {
		if i%2 == 0 {
			ctxLogger.Error("payment failed", zap.Int("i", i), zap.Error(errors.New("card declined")))
		} else {
			sugar.Errorw("payment failed", "i", i, "err", errors.New("timeout"))
		}
		wantErr++
	}
	if err := core.Sync(); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	got, err := r.WaitForEntries(nInfo+nErr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}

	// zap's JSON for the same entries, indexed by the "i" field.
	want := map[int]map[string]any{}
	dec := json.NewDecoder(&twinOut)
	dec.UseNumber()
	for dec.More() {
		var rec map[string]any
		if err := dec.Decode(&rec); err != nil {
			t.Fatal(err)
		}
		i, _ := rec["request"].(map[string]any)["i"].(json.Number).Int64()
		want[int(i)] = rec
	}
	if len(want) != nInfo+nErr {
		t.Fatalf("twin wrote %d entries", len(want))
	}

	tags := map[string]int{}
	for _, e := range got {
		tags[e.Tag]++
		req, ok := e.Record["request"].(map[string]any)
		if !ok {
			t.Fatalf("record without the request namespace: %v", e.Record)
		}
		i := int(req["i"].(int64))
		w := want[i]
		ts, _ := w["ts"].(json.Number).Int64()
		if e.Time.UnixNano() != ts {
			t.Errorf("entry %d: time %d, zap says %d", i, e.Time.UnixNano(), ts)
		}
		delete(w, "ts")
		if d := fluentcore.DiffValues(fluentcore.NormMsgp(e.Record), fluentcore.NormJSON(w), ""); d != "" {
			t.Errorf("entry %d: %s\n got %v\nwant %v", i, d, e.Record, w)
		}
		wantTag := "shop.info"
		if i >= nInfo {
			wantTag = "shop.err"
		}
		if e.Tag != wantTag {
			t.Errorf("entry %d: tag %q, want %q", i, e.Tag, wantTag)
		}
	}
	if tags["shop.info"] != wantInfo || tags["shop.err"] != wantErr {
		t.Fatalf("tags: %v", tags)
	}

	if v := testkit.Metric(t, reg, "fluentcore_entries_total", map[string]string{"stream": "info"}); v != nInfo {
		t.Errorf("entries_total{info} = %v", v)
	}
	if v := testkit.Metric(t, reg, "fluentcore_delivered_entries_total", map[string]string{"stream": "err"}); v != nErr {
		t.Errorf("delivered_entries_total{err} = %v", v)
	}
	if err := core.Close(); err != nil {
		t.Fatal(err)
	}
	fluentcore.IdentityHolds(t, core.Stats())
}

func TestStalledReceiverDropsInfoKeepsErr(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	reg := prometheus.NewRegistry()
	var fallback testkit.Lines
	core := newTestCore(t, r.Addr(), reg, func(c *fluentcore.Config) {
		c.Transport.MaxBatchBytes = 16 << 10
		c.Info.BufferBytes = 64 << 10
		c.Err.BufferBytes = 4 << 20
		c.Timeouts.Write = 100 * time.Millisecond
		c.Spill.Fallback = &fallback
		c.Degrade.Policy = fluentcore.DegradeOff // this test is about queue_full; degrade has its own
	})
	logger := zap.New(core)

	r.Stall()
	const nInfo, nErr = 200_000, 500
	done := make(chan struct{})
	go func() {
		defer close(done)
		pad := strings.Repeat("x", 200)
		for i := 0; i < nInfo; i++ {
			logger.Info("flood", zap.Int("i", i), zap.String("pad", pad))
			if i%(nInfo/nErr) == 0 {
				logger.Error("must arrive", zap.Int("i", i))
			}
		}
	}()
	// The logger finishes while the receiver reads nothing: logging does not wait on I/O.
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("logging goroutine blocked by a stalled receiver")
	}
	dropped := testkit.Metric(t, reg, "fluentcore_dropped_entries_total", map[string]string{"stream": "info", "reason": "queue_full"})
	if dropped == 0 {
		t.Fatal("no info entries counted as dropped while the receiver was stalled")
	}

	r.Resume()
	if err := core.Sync(); err != nil {
		t.Fatalf("Sync after resume: %v", err)
	}
	if err := core.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	st := core.Stats()
	if st.Err.Delivered != nErr || st.Err.Spilled != 0 || fallback.Len() != 0 {
		t.Fatalf("err delivered %d spilled %d of %d", st.Err.Delivered, st.Err.Spilled, nErr)
	}
	err := r.WaitFor(func(s forwardtest.Stats) bool { return s.Entries >= int64(st.Info.Delivered+st.Err.Delivered) }, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	errSeen := map[int64]bool{}
	for _, e := range r.Entries() {
		if e.Tag == "shop.err" {
			errSeen[e.Record["i"].(int64)] = true
		}
	}
	if len(errSeen) != nErr {
		t.Fatalf("receiver has %d distinct err entries, want %d", len(errSeen), nErr)
	}
	if float64(st.Info.Dropped["queue_full"]) < dropped {
		t.Fatal("stats and metrics disagree")
	}
	fluentcore.IdentityHolds(t, st)
}

func TestDPanicIsDeliveredBeforeWriteReturns(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	core := newTestCore(t, r.Addr(), nil, func(c *fluentcore.Config) { c.Transport.FlushInterval = time.Hour })
	zap.New(core).DPanic("about to crash", zap.Int("code", 7))
	if d := core.Stats().Err.Delivered; d != 1 {
		t.Fatalf("delivered %d entries when DPanic returned, want 1", d)
	}
	got, err := r.WaitForEntries(1, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Tag != "shop.err" || got[0].Record["level"] != "dpanic" {
		t.Fatalf("got %+v", got[0])
	}
}

// A Fatal entry (or Panic, DPanic) that the receiver cannot take in time does not go down
// with the process: before Write returns, it goes to the spill (here Spill.Fallback) with every
// other err entry not yet delivered, and Write says so, within Timeouts.Sync.
func TestFatalEntryIsSpilledWhenTheReceiverIsDown(t *testing.T) {
	for _, durable := range []bool{false, true} {
		t.Run(fmt.Sprintf("Spill.Dir=%v", durable), func(t *testing.T) {
			var fallback testkit.Lines
			cfg := fluentcore.Config{
				Addr:      "tcp://127.0.0.1:1",
				Spill:     fluentcore.SpillConfig{Fallback: &fallback},
				Timeouts:  fluentcore.TimeoutsConfig{Sync: 2 * time.Second, Close: 100 * time.Millisecond},
				Transport: fluentcore.TransportConfig{RetryMin: 5 * time.Millisecond, RetryMax: 20 * time.Millisecond},
			}
			if durable {
				cfg.Spill.Dir = t.TempDir()
			}
			core := fluentcore.New(cfg)
			zap.New(core).Error("pre-fatal")
			start := time.Now()
			// logger.Fatal would end the test: call what it calls, the core's Write.
			err := core.Write(zapcore.Entry{Level: zapcore.FatalLevel, Time: time.Now(), Message: "fatal!"}, nil)
			if took := time.Since(start); err == nil || !strings.Contains(err.Error(), "went to the spill") || took > 3*time.Second {
				t.Fatalf("Write: %v after %v", err, took)
			}
			if st := core.Stats().Err; st.Spilled != 2 || st.Entries != 2 {
				t.Fatalf("err stats when Write returned: %+v", st)
			}
			out := fallback.String()
			if durable {
				segs, _ := filepath.Glob(filepath.Join(cfg.Spill.Dir, "*.fwd"))
				if len(segs) == 0 || out != "" {
					t.Fatalf("segments %v, fallback %q", segs, out)
				}
			} else if !strings.Contains(out, `"msg":"pre-fatal"`) || !strings.Contains(out, `"msg":"fatal!"`) {
				t.Fatalf("Spill.Fallback when Write returned: %q", out)
			}
			_ = core.Close()
		})
	}
}

func TestBadAddressIsReportedAndErrIsNotLost(t *testing.T) {
	cfg := fluentcore.Config{Addr: "ftp://somewhere:1"}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "scheme") {
		t.Fatalf("Validate: %v", err)
	}
	var fallback testkit.Lines
	cfg.Spill.Fallback = &fallback
	cfg.Timeouts.Close = 50 * time.Millisecond
	cfg.Timeouts.Sync = 50 * time.Millisecond
	cfg.Transport.RetryMin = time.Millisecond
	core := fluentcore.New(cfg)
	logger := zap.New(core)
	logger.Info("lost, but counted")
	logger.Error("kept", zap.String("why", "fallback"))
	if err := core.Sync(); err == nil {
		t.Fatal("Sync did not report the bad address")
	}
	if err := core.Close(); err == nil || !strings.Contains(err.Error(), "scheme") {
		t.Fatalf("Close: %v", err)
	}
	st := core.Stats()
	if st.Err.Spilled != 1 || !strings.Contains(fallback.String(), `"why":"fallback"`) {
		t.Fatalf("err entry not in the fallback: spilled=%d out=%q", st.Err.Spilled, fallback.String())
	}
	if st.Info.Dropped["shutdown"] != 1 {
		t.Fatalf("info entry not counted: %v", st.Info.Dropped)
	}
	fluentcore.IdentityHolds(t, st)
}

// Close's error says what it did with what it could not deliver, and only that: with no
// err entry left, it says nothing of one.
func TestCloseSaysWhatWasLeft(t *testing.T) {
	for _, tc := range []struct {
		name      string
		logErr    bool
		want, not []string
	}{
		{"info only", false, []string{"info entries dropped (shutdown): 1"}, []string{"err entries"}},
		{"info and err", true, []string{"info entries dropped (shutdown): 1", "err entries spilled to Spill.Fallback: 1"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var fallback testkit.Lines
			cfg := fluentcore.Config{
				Addr:      "ftp://somewhere:1",
				Spill:     fluentcore.SpillConfig{Fallback: &fallback},
				Timeouts:  fluentcore.TimeoutsConfig{Close: 50 * time.Millisecond, Sync: 50 * time.Millisecond},
				Transport: fluentcore.TransportConfig{RetryMin: time.Millisecond},
			}
			core := fluentcore.New(cfg)
			logger := zap.New(core)
			logger.Info("left behind")
			if tc.logErr {
				logger.Error("spilled")
			}
			err := core.Close()
			if err == nil {
				t.Fatal("Close: no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Close: %v; want it to say %q", err, w)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(err.Error(), n) {
					t.Errorf("Close: %v; it should not say %q", err, n)
				}
			}
		})
	}
}

// TLS settings with a plain address never send in plain text: no connection reaches a plain
// receiver, and the err entry is not lost (it goes to Spill.Fallback, as with any address
// that cannot be used).
func TestTLSSettingsNeverSendPlainText(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	var fallback testkit.Lines
	core := fluentcore.New(fluentcore.Config{
		Addr:      r.Addr(),
		Security:  fluentcore.SecurityConfig{TLS: &tls.Config{}},
		Spill:     fluentcore.SpillConfig{Fallback: &fallback},
		Timeouts:  fluentcore.TimeoutsConfig{Close: 50 * time.Millisecond, Sync: 50 * time.Millisecond},
		Transport: fluentcore.TransportConfig{RetryMin: time.Millisecond},
	})
	zap.New(core).Error("payment", zap.String("card", "4111111111111111"))
	if err := core.Close(); err == nil || !strings.Contains(err.Error(), "plain TCP") {
		t.Errorf("Close: %v; want the plain address named", err)
	}
	if st := r.Stats(); st.Connections != 0 || st.Entries != 0 {
		t.Errorf("the plain receiver got %d connections and %d entries", st.Connections, st.Entries)
	}
	if !strings.Contains(fallback.String(), "4111111111111111") {
		t.Errorf("the err entry is not in Spill.Fallback: %q", fallback.String())
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name string
		cfg  fluentcore.Config
		want string // "" means valid
	}{
		{"zero value", fluentcore.Config{}, ""},
		{"host:port", fluentcore.Config{Addr: "fluentd:24224"}, ""},
		{"unix", fluentcore.Config{Addr: "unix:///var/run/fluent.sock"}, ""},
		{"tls", fluentcore.Config{Addr: "tls://logs.example.com:24224"}, ""},
		{"TLS settings, tls address", fluentcore.Config{Addr: "tls://logs.example.com:24224", Security: fluentcore.SecurityConfig{TLS: &tls.Config{ServerName: "logs"}}}, ""},
		{"TLS settings, bare address", fluentcore.Config{Addr: "logs.example.com:24224", Security: fluentcore.SecurityConfig{TLS: &tls.Config{}}}, "logs.example.com:24224 is plain TCP"},
		{"TLS settings, tcp address", fluentcore.Config{Addr: "tcp://logs.example.com:24224", Security: fluentcore.SecurityConfig{TLS: &tls.Config{}}}, "is plain TCP"},
		{"TLS settings, default address", fluentcore.Config{Security: fluentcore.SecurityConfig{TLS: &tls.Config{}}}, "is plain TCP"},
		{"TLS settings, one plain server", fluentcore.Config{Security: fluentcore.SecurityConfig{TLS: &tls.Config{}}, Servers: []fluentcore.Server{{Addr: "tls://a:24224"}, {Addr: "b:24224"}}}, "b:24224 is plain TCP"},
		{"Security.TLSFiles, bare address", fluentcore.Config{Addr: "logs:24224", Security: fluentcore.SecurityConfig{TLSFiles: fluentcore.TLSFiles{ServerName: "logs"}}}, "is plain TCP"},
		{"TLS settings, unix only", fluentcore.Config{Addr: "unix:///var/run/fluent.sock", Security: fluentcore.SecurityConfig{TLS: &tls.Config{}}}, "nothing would use it"},
		{"no port", fluentcore.Config{Addr: "tcp://fluentd"}, "fluentd"},
		{"empty unix path", fluentcore.Config{Addr: "unix://"}, "socket path"},
		{"bad scheme", fluentcore.Config{Addr: "http://x:1"}, "scheme"},
		{"tiny batch", fluentcore.Config{Transport: fluentcore.TransportConfig{MaxBatchBytes: 100}}, "Transport.MaxBatchBytes"},
		{"huge batch", fluentcore.Config{Transport: fluentcore.TransportConfig{MaxBatchBytes: 7 << 20}}, "Transport.MaxBatchBytes"},
		{"entry over batch", fluentcore.Config{Transport: fluentcore.TransportConfig{MaxBatchBytes: 4096, MaxEntryBytes: 8192}}, "Transport.MaxEntryBytes"},
		{"small buffer", fluentcore.Config{Info: fluentcore.InfoConfig{BufferBytes: 1000}}, "Info.BufferBytes"},
		{"negative duration", fluentcore.Config{Transport: fluentcore.TransportConfig{FlushInterval: -1}}, "Transport.FlushInterval"},
		{"watermarks", fluentcore.Config{Degrade: fluentcore.DegradeConfig{LowWatermark: 0.9, HighWatermark: 0.5}}, "watermarks"},
		{"negative sample_first", fluentcore.Config{Degrade: fluentcore.DegradeConfig{SampleFirst: -3}}, "negative"},
		{"port too large", fluentcore.Config{Addr: "fluentd:99999"}, "1 to 65535"},
		{"port zero", fluentcore.Config{Addr: "fluentd:0"}, "1 to 65535"},
		{"negative port", fluentcore.Config{Addr: "fluentd:-5"}, "1 to 65535"},
		{"server port", fluentcore.Config{Servers: []fluentcore.Server{{Addr: "tls://a:65536"}}}, "1 to 65535"},
		{"highest port", fluentcore.Config{Addr: "fluentd:65535"}, ""},
	}
	for _, c := range cases {
		err := c.cfg.Validate()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: unexpected error %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: error %v, want one mentioning %q", c.name, err, c.want)
		}
	}
}

func TestCloseWhileLoggingAccountsForEverything(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	var fallback testkit.Lines
	core := newTestCore(t, r.Addr(), nil, func(c *fluentcore.Config) { c.Spill.Fallback = &fallback })
	logger := zap.New(core)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				if i%10 == 0 {
					logger.Error("e", zap.Int("i", i))
				} else {
					logger.Info("i", zap.Int("i", i))
				}
			}
		}()
	}
	if err := core.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if err := core.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	st := core.Stats()
	if st.Info.Entries+st.Err.Entries != 8*2000 {
		t.Fatalf("entries %d + %d", st.Info.Entries, st.Err.Entries)
	}
	fluentcore.IdentityHolds(t, st)
	if err := r.WaitFor(func(s forwardtest.Stats) bool {
		return s.Entries == int64(st.Info.Delivered+st.Err.Delivered)
	}, 10*time.Second); err != nil {
		t.Fatal(err)
	}
}

func TestMetricsLintAndTwoCoresOnOneRegistry(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	reg := prometheus.NewRegistry()
	a := newTestCore(t, r.Addr(), reg, func(c *fluentcore.Config) { c.Metrics.ConstLabels = prometheus.Labels{"core": "a"} })
	newTestCore(t, r.Addr(), reg, func(c *fluentcore.Config) { c.Metrics.ConstLabels = prometheus.Labels{"core": "b"} })
	if err := a.Sync(); err != nil {
		t.Fatal(err)
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil || len(problems) != 0 {
		t.Fatalf("lint: %v %v", err, problems)
	}
	// Every drop reason a stream can have is exported at zero before anything is dropped:
	// 7 for info, 3 for err, per core.
	n, err := testutil.GatherAndCount(reg, "fluentcore_dropped_entries_total")
	if err != nil || n != 2*(7+3) {
		t.Fatalf("dropped series: %d, %v", n, err)
	}
	// A core whose metrics the Registerer refuses (another collector has their names)
	// reports it from Close, and its Close leaves the registered cores' series alone.
	other := prometheus.NewRegistry()
	other.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "fluentcore_entries_total", Help: "not ours"}))
	refused := fluentcore.New(fluentcore.Config{Addr: r.Addr(), Metrics: fluentcore.MetricsConfig{Registerer: other}})
	if err := refused.Close(); err == nil || !strings.Contains(err.Error(), "register metrics") {
		t.Fatalf("refused registration not reported: %v", err)
	}
	if n, err := testutil.GatherAndCount(other, "fluentcore_entries_total"); err != nil || n != 1 {
		t.Fatalf("the other collector's series after the refused core's Close: %d, %v", n, err)
	}
}

// A config reload: Close, then New on the same Registerer. Close unregisters the metrics,
// so the new core registers cleanly and exports its own numbers.
func TestCloseUnregistersMetricsForAReload(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	reg := prometheus.NewRegistry()
	for round := range 3 {
		core := fluentcore.New(fluentcore.Config{Addr: r.Addr(), Metrics: fluentcore.MetricsConfig{Registerer: reg}})
		zap.New(core).Info("reloaded", zap.Int("round", round))
		if err := core.Sync(); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if got := testkit.Metric(t, reg, "fluentcore_delivered_entries_total", map[string]string{"stream": "info"}); got != 1 {
			t.Fatalf("round %d: delivered %v, want the new core's 1", round, got)
		}
		if err := core.Close(); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if n, err := testutil.GatherAndCount(reg); err != nil || n != 0 {
			t.Fatalf("round %d: %d series left after Close, %v", round, n, err)
		}
	}
}

// A config reload that swaps cores: the new core is made on the same Registerer, with the
// same Metrics.ConstLabels, before the old one is closed. Both come up without an error, the two
// share the series (counters summed over both, gauges over the live one), and a scraper
// gathering all through the swap always finds them and never sees a counter go backwards.
func TestReloadSwapKeepsTheSeriesExported(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	reg := prometheus.NewRegistry()
	labels := prometheus.Labels{"app": "shop"}
	makeCore := func() *fluentcore.Core {
		return newTestCore(t, r.Addr(), reg, func(c *fluentcore.Config) { c.Metrics.ConstLabels = labels })
	}
	info := map[string]string{"stream": "info"}
	delivered := func() float64 { return testkit.Metric(t, reg, "fluentcore_delivered_entries_total", info) }
	budget := func() float64 { return testkit.Metric(t, reg, "fluentcore_buffer_capacity_bytes", info) }

	old := makeCore()
	for i := range 3 {
		zap.New(old).Info("before the reload", zap.Int("i", i))
	}
	if err := old.Sync(); err != nil {
		t.Fatal(err)
	}
	one := budget()

	// The scraper: every gather must have the series, each no lower than the one before.
	var scrapes atomic.Int64
	stop, scraped := make(chan struct{}), make(chan error, 1)
	go func() {
		tick := time.NewTicker(time.Millisecond) // a scraper's pace, not a wait for a result
		defer tick.Stop()
		last := 0.0
		for {
			select {
			case <-stop:
				scraped <- nil
				return
			case <-tick.C:
			}
			mfs, err := reg.Gather()
			if err != nil {
				scraped <- err
				return
			}
			v, found := -1.0, false
			for _, mf := range mfs {
				if mf.GetName() != "fluentcore_delivered_entries_total" {
					continue
				}
				for _, m := range mf.GetMetric() {
					for _, lp := range m.GetLabel() {
						if lp.GetName() == "stream" && lp.GetValue() == "info" {
							v, found = m.GetCounter().GetValue(), true
						}
					}
				}
			}
			switch {
			case !found:
				scraped <- fmt.Errorf("scrape %d: no delivered series", scrapes.Load())
				return
			case v < last:
				scraped <- fmt.Errorf("scrape %d: delivered went back from %v to %v", scrapes.Load(), last, v)
				return
			}
			last = v
			scrapes.Add(1)
		}
	}()

	cur := makeCore()
	if err := cur.Sync(); err != nil {
		t.Fatalf("the new core, made before the old one is closed: %v", err)
	}
	for i := range 2 {
		zap.New(cur).Info("after the reload", zap.Int("i", i))
	}
	if err := cur.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := delivered(); got != 5 {
		t.Fatalf("delivered %v while both cores live, want 3 + 2", got)
	}
	if got := budget(); got != 2*one {
		t.Fatalf("buffer budget %v while both cores live, want the two budgets' sum %v", got, 2*one)
	}
	if err := old.Close(); err != nil {
		t.Fatalf("closing the old core: %v", err)
	}
	if got := delivered(); got != 5 {
		t.Fatalf("delivered %v after the old core closed, want still 5", got)
	}
	if got := budget(); got != one {
		t.Fatalf("buffer budget %v after the old core closed, want the new core's %v", got, one)
	}
	// A few scrapes after the old core's Close, then the scraper's verdict.
	after := scrapes.Load()
	deadline := time.Now().Add(10 * time.Second)
	for scrapes.Load() < after+3 && time.Now().Before(deadline) {
		select {
		case err := <-scraped:
			t.Fatal(err)
		default:
			runtime.Gosched()
		}
	}
	close(stop)
	if err := <-scraped; err != nil {
		t.Fatal(err)
	}
	if n := scrapes.Load(); n < after+3 {
		t.Fatalf("the scraper gathered only %d times", n)
	}
	if err := cur.Close(); err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 0 {
		t.Fatalf("%d series left once the last core closed, %v", n, err)
	}
}

// Metrics.ConstLabels that could not be registered are a Validate error, named: a built-in label
// (the series' own "stream", "reason", "server", and the histogram's "le"), a name that is
// not a Prometheus label name, or a value that is not UTF-8. New with them still gives a
// working core (it does not panic); it registers no metrics, and Sync reports the same
// problem.
func TestValidateRejectsBadConstLabels(t *testing.T) {
	cases := []struct {
		labels prometheus.Labels
		want   string // "" means valid
	}{
		{prometheus.Labels{"core": "a", "team": "shop"}, ""},
		{prometheus.Labels{"stream": "x"}, `"stream"`},
		{prometheus.Labels{"reason": "x"}, `"reason"`},
		{prometheus.Labels{"server": "x"}, `"server"`},
		{prometheus.Labels{"le": "x"}, `"le"`},
		{prometheus.Labels{"bad-label": "x"}, `"bad-label"`},
		{prometheus.Labels{"1st": "x"}, `"1st"`},
		{prometheus.Labels{"__meta": "x"}, `"__meta"`},
		{prometheus.Labels{"": "x"}, `""`},
		{prometheus.Labels{"core": "\xff"}, `"core"`},
	}
	for _, c := range cases {
		cfg := fluentcore.Config{Addr: "127.0.0.1:1", Metrics: fluentcore.MetricsConfig{ConstLabels: c.labels}}
		err := cfg.Validate()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%v: unexpected error %v", c.labels, err)
			continue
		case c.want == "":
			continue
		case err == nil || !strings.Contains(err.Error(), "Metrics.ConstLabels") || !strings.Contains(err.Error(), c.want):
			t.Errorf("%v: Validate() = %v, want an error naming Metrics.ConstLabels and %s", c.labels, err, c.want)
			continue
		}
		reg := prometheus.NewRegistry()
		cfg.Metrics.Registerer = reg
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("%v: New panicked: %v", c.labels, p)
				}
			}()
			core := fluentcore.New(cfg)
			defer core.Close()
			if serr := core.Sync(); serr == nil || serr.Error() != err.Error() {
				t.Errorf("%v: Sync() = %v, want Validate's %v", c.labels, serr, err)
			}
			if n, gerr := testutil.GatherAndCount(reg); gerr != nil || n != 0 {
				t.Errorf("%v: %d series registered, %v", c.labels, n, gerr)
			}
		}()
	}
}

type panicky struct{}

func (panicky) MarshalLogObject(zapcore.ObjectEncoder) error { panic("marshaler bug") }

// A marshaler that panics is an error, as a panicking Stringer is in zap: the entry is
// delivered with a "<key>Error" field, in Write and in With alike. A panic that no field
// can take (zap.Inline hands the marshaler the encoder itself) costs its own entry, counted
// as encode_error, never the shard: the lock is released and the half-written entry is
// rolled back, so later entries still arrive.
func TestPanickingMarshalerBecomesAnErrorField(t *testing.T) {
	r := forwardtest.NewReceiver(t)
	core := newTestCore(t, r.Addr(), nil)
	logger := zap.New(core).With(zap.Object("ctx", panicky{})) // panicked in the caller before
	for i := 0; i < 100; i++ {
		logger.Error("bad", zap.Object("obj", panicky{}), zap.Array("arr", panickyArray{}), zap.Int("i", i))
		logger.Info("inline", zap.Inline(panicky{}))
		logger.Info("good", zap.Int("i", i))
	}
	if err := core.Sync(); err != nil {
		t.Fatal(err)
	}
	got, err := r.WaitForEntries(200, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	bad := 0
	for _, e := range got {
		switch e.Record["msg"] {
		case "bad":
			bad++
			for _, k := range []string{"ctxError", "objError"} {
				if e.Record[k] != "PANIC=marshaler bug" {
					t.Fatalf("%s = %v in %v", k, e.Record[k], e.Record)
				}
			}
			if e.Record["arrError"] != "PANIC=array bug" || e.Record["i"] == nil {
				t.Fatalf("entry %v", e.Record)
			}
		case "good":
		default:
			t.Fatalf("unexpected entry %v", e.Record)
		}
	}
	if bad != 100 {
		t.Fatalf("%d of 100 entries with a panicking field delivered", bad)
	}
	if n := core.Stats().Info.Dropped["encode_error"]; n != 100 {
		t.Fatalf("encode_error drops = %d, want 100 (the zap.Inline entries)", n)
	}
}

type panickyArray struct{}

func (panickyArray) MarshalLogArray(zapcore.ArrayEncoder) error { panic("array bug") }
