package fluentcore

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	"go.yaml.in/yaml/v3"
)

// wantFromFile is the Config that every source below describes.
func wantFromFile() Config {
	return Config{
		Addr: "tls://logs.internal:24224", Tag: "shop", Level: zapcore.DebugLevel,
		Servers:   []Server{{Addr: "a:24224", Weight: 30}, {Addr: "b:24224", Standby: true}},
		Spill:     SpillConfig{Dir: "/var/spool/fluentcore", After: 3 * time.Second, MaxBytes: 1 << 30},
		Security:  SecurityConfig{SharedKey: NewSecret("s3cret"), Username: "app", Password: NewSecret("pw")},
		Metrics:   MetricsConfig{ConstLabels: map[string]string{"core": "main", "team": "shop"}},
		Info:      InfoConfig{Tag: "shop.access", BufferBytes: 16 << 20, Acks: AcksOn},
		Err:       ErrConfig{Level: zapcore.WarnLevel, BufferBytes: 2 << 20, MaxWait: 20 * time.Millisecond},
		Timeouts:  TimeoutsConfig{Ack: time.Minute},
		Transport: TransportConfig{FlushInterval: 250 * time.Millisecond, Compression: "gzip"},
		Degrade:   DegradeConfig{Policy: DegradeKeepWarn, Hold: 10 * time.Second, HighWatermark: 0.8},
	}
}

// sameConfig is reflect.DeepEqual for Configs, with the secrets compared by their text: a
// Secret holds a function, which DeepEqual never finds equal to another.
func sameConfig(a, b Config) bool {
	if a.Security.SharedKey.Reveal() != b.Security.SharedKey.Reveal() || a.Security.Password.Reveal() != b.Security.Password.Reveal() {
		return false
	}
	a.Security.SharedKey, a.Security.Password, b.Security.SharedKey, b.Security.Password = Secret{}, Secret{}, Secret{}, Secret{}
	return reflect.DeepEqual(a, b)
}

func TestConfigFromJSON(t *testing.T) {
	src := `{
		"addr": "tls://logs.internal:24224", "tag": "shop", "level": "debug",
		"info": {"tag": "shop.access", "buffer_bytes": 16777216, "acks": "on"},
		"err": {"level": "warn", "buffer_bytes": 2097152, "max_wait": "20ms"},
		"spill": {"dir": "/var/spool/fluentcore", "after": "3s", "max_bytes": 1073741824},
		"transport": {"flush_interval": "250ms", "compression": "gzip"}, "timeouts": {"ack": "1m"},
		"security": {"shared_key": "s3cret", "username": "app", "password": "pw"},
		"servers": [{"addr": "a:24224", "weight": 30}, {"addr": "b:24224", "standby": true}],
		"degrade": {"policy": "keep_warn", "hold": "10s", "high_watermark": 0.8},
		"metrics": {"const_labels": {"core": "main", "team": "shop"}}
	}`
	var got Config
	if err := json.Unmarshal([]byte(src), &got); err != nil {
		t.Fatal(err)
	}
	if want := wantFromFile(); !sameConfig(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
}

func TestConfigFromYAML(t *testing.T) {
	src := `
addr: tls://logs.internal:24224
tag: shop
level: debug
info: {tag: shop.access, buffer_bytes: 16777216, acks: "on"}
err: {level: warn, buffer_bytes: 2097152, max_wait: 20ms}
spill:
  dir: /var/spool/fluentcore
  after: 3s
  max_bytes: 1073741824
transport: {flush_interval: 250ms, compression: gzip}
timeouts: {ack: 1m}
security: {shared_key: s3cret, username: app, password: pw}
servers:
  - {addr: "a:24224", weight: 30}
  - {addr: "b:24224", standby: true}
degrade: {policy: keep_warn, hold: 10s, high_watermark: 0.8}
metrics:
  const_labels: {core: main, team: shop}
`
	var got Config
	if err := yaml.Unmarshal([]byte(src), &got); err != nil {
		t.Fatal(err)
	}
	if want := wantFromFile(); !sameConfig(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
}

func TestConfigSourcesReportBadValuesByName(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{`{"transport": {"flush_interval": "soon"}}`, "transport.flush_interval"},
		{`{"shared_key": "k"}`, `unknown key "shared_key": its setting is "security.shared_key"`},
		{`{"require_ack": true}`, `its setting is "info.acks"`},
		{`{"level": "loud"}`, "level"},
		{`{"degrade": {"policy": "panic"}}`, "degrade.policy"},
		{`{"info": {"buffer_bytes": "big"}}`, "info.buffer_bytes"},
		{`{"servers": [{"addr": "a:1", "wieght": 3}]}`, "wieght"},
		{`{"adress": "x:1"}`, `fluentcore: config: unknown key "adress"`}, //nolint:misspell // the misspelt key is the point
		{`{"degrade": {"sample_first": 0}}`, "degrade.sample_first: 0"},
		{`{"degrade": {"sample_interval": "0s"}}`, "degrade.sample_interval: 0"},
	} {
		var cfg Config
		err := json.Unmarshal([]byte(c.src), &cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one naming %q", c.src, err, c.want)
		}
	}
	_, err := configFromEnv([]string{"FLUENT_TRANSPORT_FLUSH_INTERVAL=soon", "FLUENT_INFO_ACKS=maybe", "FLUENT_DEGRADE_SAMPLE_FIRST=0"})
	for _, name := range []string{"FLUENT_TRANSPORT_FLUSH_INTERVAL", "FLUENT_INFO_ACKS", "FLUENT_DEGRADE_SAMPLE_FIRST"} {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Fatalf("env error %v does not name %s", err, name)
		}
	}
	// A typo of a known variable is an error that names both; it was ignored.
	cfg, err := configFromEnv([]string{"FLUENT_TRANSPORT_FLUSH_INTERVALL=1s", "FLUENT_TAG=shop"})
	if err == nil || !strings.Contains(err.Error(), "FLUENT_TRANSPORT_FLUSH_INTERVALL") || !strings.Contains(err.Error(), "did you mean FLUENT_TRANSPORT_FLUSH_INTERVAL?") {
		t.Fatalf("typo: error %v", err)
	}
	if cfg.Tag != "shop" {
		t.Fatalf("the variables next to the typo were not read: %+v", cfg)
	}
}

// A duration is text with a unit. A bare number was read as nanoseconds ("flush_interval":
// 500 became 500ns, and the idle core ticked without pause); it is refused wherever a
// Config is read from text, with an error that names the key and shows the form to write.
func TestBareNumberDurationsAreRefused(t *testing.T) {
	for _, c := range []struct{ src, key string }{
		{`{"transport": {"flush_interval": 500}}`, "transport.flush_interval"},
		{`{"err": {"max_wait": 20000000}}`, "err.max_wait"},
		{`{"transport": {"retry_min": 1.5}}`, "transport.retry_min"},
		{`{"degrade": {"hold": 10}}`, "degrade.hold"},
	} {
		var cfg Config
		err := json.Unmarshal([]byte(c.src), &cfg)
		if err == nil || !strings.Contains(err.Error(), c.key) || !strings.Contains(err.Error(), `"500ms"`) {
			t.Errorf("JSON %s: error %v, want one naming %s and showing \"500ms\"", c.src, err, c.key)
		}
	}
	for _, c := range []struct{ src, key string }{
		{"transport: {flush_interval: 500}\n", "transport.flush_interval"},
		{"degrade: {policy: keep_warn, hold: 10}\n", "degrade.hold"},
	} {
		var cfg Config
		err := yaml.Unmarshal([]byte(c.src), &cfg)
		if err == nil || !strings.Contains(err.Error(), c.key) || !strings.Contains(err.Error(), `"500ms"`) {
			t.Errorf("YAML %q: error %v, want one naming %s and showing \"500ms\"", c.src, err, c.key)
		}
	}
	_, err := configFromEnv([]string{"FLUENT_TRANSPORT_FLUSH_INTERVAL=500"})
	if err == nil || !strings.Contains(err.Error(), "FLUENT_TRANSPORT_FLUSH_INTERVAL") || !strings.Contains(err.Error(), `"500ms"`) {
		t.Errorf("environment: error %v, want one naming FLUENT_TRANSPORT_FLUSH_INTERVAL and showing \"500ms\"", err)
	}
	// Durations with a unit, and zero (no unit needed), read as before.
	var cfg Config
	if err := json.Unmarshal([]byte(`{"transport": {"flush_interval": "500ms", "retry_min": "0"}, "degrade": {"hold": "10s"}}`), &cfg); err != nil ||
		cfg.Transport.FlushInterval != 500*time.Millisecond || cfg.Degrade.Hold != 10*time.Second {
		t.Errorf("durations with units: %v, %+v", err, cfg)
	}
}
