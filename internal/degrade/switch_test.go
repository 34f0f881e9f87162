package degrade

import (
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
)

// defaults sets what cfg leaves unset to the root's defaults (DegradeConfig.withDefaults).
func defaults(cfg SwitchConfig) SwitchConfig {
	if cfg.High == 0 {
		cfg.High = 0.75
	}
	if cfg.Low == 0 {
		cfg.Low = 0.25
	}
	if cfg.Hold == 0 {
		cfg.Hold = 5 * time.Second
	}
	if cfg.SampleInterval == 0 {
		cfg.SampleInterval = time.Second
	}
	if cfg.SampleFirst == 0 {
		cfg.SampleFirst = 10
	}
	if cfg.SampleThereafter == 0 {
		cfg.SampleThereafter = 100
	}
	return cfg
}

func TestDegraderEntersOnHighWatermarkAndLeavesAfterHold(t *testing.T) {
	d := degrader{cfg: defaults(SwitchConfig{Kind: DropAll})}
	t0 := time.Unix(1_000_000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

	if d.observe(at(0), 0.5, 0) || d.degraded {
		t.Fatal("degraded below the high watermark")
	}
	if !d.observe(at(10), 0.75, 0) || !d.degraded {
		t.Fatal("did not degrade at the high watermark")
	}
	// Between the watermarks: stays degraded, no transition (no flapping).
	for ms := 20; ms < 10_000; ms += 100 {
		if d.observe(at(ms), 0.5, 0) {
			t.Fatalf("transition at %dms with fill between the watermarks", ms)
		}
	}
	// Below the low watermark, but not yet for Hold (5s).
	if d.observe(at(10_000), 0.2, 0) || d.observe(at(14_999), 0.1, 0) || !d.degraded {
		t.Fatal("left degraded before the hold time")
	}
	// A spike above the low watermark restarts the hold.
	d.observe(at(15_000), 0.3, 0)
	if d.observe(at(16_000), 0.1, 0) || d.observe(at(20_999), 0.1, 0) {
		t.Fatal("hold was not restarted by the spike")
	}
	if !d.observe(at(21_000), 0.1, 0) || d.degraded {
		t.Fatal("did not recover after staying calm for the hold time")
	}
}

func TestDegraderDisconnection(t *testing.T) {
	d := degrader{cfg: defaults(SwitchConfig{Kind: DropAll, DisconnectedAfter: time.Second, Hold: time.Second})}
	t0 := time.Unix(1_000_000, 0)
	if d.observe(t0, 0, 999*time.Millisecond) {
		t.Fatal("degraded before DisconnectedAfter")
	}
	if !d.observe(t0, 0, time.Second) {
		t.Fatal("did not degrade after DisconnectedAfter")
	}
	// Empty buffers do not count as calm while still disconnected.
	if d.observe(t0.Add(5*time.Second), 0, 6*time.Second) || d.observe(t0.Add(10*time.Second), 0, 11*time.Second) {
		t.Fatal("recovered while disconnected")
	}
	d.observe(t0.Add(11*time.Second), 0, 0)
	if !d.observe(t0.Add(12*time.Second), 0, 0) {
		t.Fatal("did not recover one hold after reconnecting")
	}
}

// By default an outage alone degrades nothing: only the bytes buffered do, so entries the
// budget can hold are not shed.
func TestDegraderDefaultIgnoresDisconnection(t *testing.T) {
	d := degrader{cfg: defaults(SwitchConfig{Kind: DropAll})}
	t0 := time.Unix(1_000_000, 0)
	if d.observe(t0, 0.74, time.Hour) {
		t.Fatal("degraded on disconnection alone, under the high watermark")
	}
	if !d.observe(t0, 0.75, time.Hour) {
		t.Fatal("did not degrade at the high watermark")
	}
}

func TestOffNeverDegrades(t *testing.T) {
	d := degrader{cfg: defaults(SwitchConfig{Kind: Off})}
	if d.observe(time.Unix(1, 0), 1, time.Hour) || d.degraded {
		t.Fatal("Off degraded")
	}
}

func TestSamplerFirstThenEveryMth(t *testing.T) {
	s := newSampler(time.Second, 3, 10)
	now := time.Unix(1_000, 0).UnixNano()
	kept := 0
	var keptAt []int
	for i := 1; i <= 100; i++ {
		if s.keep(now, "cache miss") {
			kept++
			keptAt = append(keptAt, i)
		}
	}
	// 1, 2, 3, then the 13th, 23rd, ... 93rd.
	if kept != 3+9 || keptAt[3] != 13 || keptAt[len(keptAt)-1] != 93 {
		t.Fatalf("kept %d at %v", kept, keptAt)
	}
	// Another message has its own budget.
	if !s.keep(now, "order placed") {
		t.Fatal("a different message was sampled away")
	}
	// A new interval starts over: its first SampleFirst entries are kept again.
	next := now + int64(time.Second)
	for i := 0; i < 3; i++ {
		if !s.keep(next, "cache miss") {
			t.Fatalf("entry %d of the next interval was dropped", i+1)
		}
	}
	if s.keep(next, "cache miss") {
		t.Fatal("the next interval kept more than SampleFirst")
	}
}

// While degraded, Admit drops by the kind: everything, all but Warn and above, or what the
// sampler does not keep.
func TestSwitchAdmitsByKind(t *testing.T) {
	at := time.Unix(5, 0).UnixNano()
	cases := []struct {
		kind       Kind
		info, warn Verdict
	}{
		{DropAll, Dropped, Dropped},
		{KeepWarn, Dropped, Keep},
		{Off, Keep, Keep},
	}
	for _, c := range cases {
		s := NewSwitch(defaults(SwitchConfig{Kind: c.kind}))
		if v := s.Admit(zapcore.InfoLevel, 0, "m", at); v != c.info {
			t.Errorf("kind %d: info %d, want %d", c.kind, v, c.info)
		}
		if v := s.Admit(zapcore.WarnLevel, 0, "m", at); v != c.warn {
			t.Errorf("kind %d: warn %d, want %d", c.kind, v, c.warn)
		}
	}
	s := NewSwitch(defaults(SwitchConfig{Kind: Sample, SampleFirst: 1, SampleThereafter: 1000}))
	if v := s.Admit(zapcore.InfoLevel, 0, "m", at); v != Keep {
		t.Fatalf("the sampler's first entry: %d", v)
	}
	if v := s.Admit(zapcore.InfoLevel, 0, "m", at); v != Sampled {
		t.Fatalf("the sampler's second entry: %d, want Sampled", v)
	}
}

// Step reports the state machine's state, and Check asks Admit exactly while degraded.
func TestSwitchStepReportsTheMachine(t *testing.T) {
	s := NewSwitch(defaults(SwitchConfig{Kind: KeepWarn}))
	now := time.Unix(1_000, 0)
	if st := s.Step(func() Observation { return Observation{Now: now, Buffered: 50, Limit: 100} }); st != (State{Now: now}) {
		t.Fatalf("at half the budget: %+v", st)
	}
	if st := s.Step(func() Observation { return Observation{Now: now, Buffered: 75, Limit: 100} }); st != (State{Now: now, Degraded: true, Checking: true}) {
		t.Fatalf("at the high watermark: %+v", st)
	}
}
