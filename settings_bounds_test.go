package fluentcore

import (
	"strings"
	"testing"
	"time"
)

// ceilingOf is the documented ceiling of the duration field at path (durationFields).
func ceilingOf(path string) time.Duration {
	switch {
	case path == "Err.MaxWait":
		return MaxErrMaxWait
	case strings.HasPrefix(path, "Timeouts."):
		return MaxTimeout
	}
	return MaxInterval
}

// Every duration has a ceiling, a documented constant: the ceiling itself is accepted, one
// nanosecond over it is a Validate error naming the field and the ceiling, and New uses
// the ceiling. Err.MaxWait's is a second: no logging call waits longer for room.
func TestDurationsHaveACeiling(t *testing.T) {
	for path, set := range durationFields() {
		most := ceilingOf(path)
		var cfg Config
		set(&cfg, most)
		if err := cfg.Validate(); err != nil {
			t.Errorf("%s at its ceiling %v: %v", path, most, err)
		}
		set(&cfg, most+1)
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "maximum of "+most.String()) {
			t.Errorf("%s %v: error %v, want one naming it and its maximum %v", path, most+1, err, most)
		}
	}
	s, err := resolve(Config{Err: ErrConfig{MaxWait: 20 * time.Second}, Timeouts: TimeoutsConfig{Close: 1000 * time.Hour, Write: 365 * 24 * time.Hour}})
	if err == nil || s.spill.MaxWait != MaxErrMaxWait || s.closeTimeout != MaxTimeout || s.conn.writeTimeout != MaxTimeout {
		t.Errorf("over the ceilings: %v; in use: Err.MaxWait %v, Timeouts.Close %v, Timeouts.Write %v", err, s.spill.MaxWait, s.closeTimeout, s.conn.writeTimeout)
	}
	if MaxErrMaxWait != time.Second {
		t.Errorf("MaxErrMaxWait %v, documented as 1s", MaxErrMaxWait)
	}
}

// Validate names every problem, each on its own: one wrong setting does not hide another.
func TestValidateNamesEveryProblem(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want []string
	}{
		{Config{Transport: TransportConfig{MaxBatchBytes: 100, MaxEntryBytes: -5}}, []string{"Transport.MaxBatchBytes 100", "Transport.MaxEntryBytes -5"}},
		{Config{Transport: TransportConfig{RetryMin: time.Hour, RetryMax: time.Second}}, []string{"Transport.RetryMin 1h0m0s is above Transport.RetryMax 1s"}},
		{Config{Timeouts: TimeoutsConfig{Close: 1000 * time.Hour}, Err: ErrConfig{MaxWait: 10 * time.Hour}}, []string{"Timeouts.Close 1000h0m0s", "Err.MaxWait 10h0m0s"}},
		{Config{Tag: "my app!"}, []string{`Tag "my app!"`}},
		{Config{Addr: " tcp://127.0.0.1:24224 "}, []string{"leading or trailing spaces"}},
		{Config{Servers: []Server{{Addr: "tcp://127.0.0.1:24224\n"}}}, []string{"leading or trailing spaces"}},
		{Config{Addr: "http://fluentd:24224"}, []string{"tcp, tls, unix or srv"}},
	} {
		err := c.cfg.Validate()
		for _, w := range c.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%+v: error %v, want one with %q", c.cfg, err, w)
			}
		}
	}
	if err := (Config{Transport: TransportConfig{RetryMin: time.Second, RetryMax: time.Second}}).Validate(); err != nil {
		t.Errorf("Transport.RetryMin equal to Transport.RetryMax: %v", err)
	}
}
