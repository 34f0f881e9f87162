package fluentcore

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.yaml.in/yaml/v3"
)

// wantFromFile is the Config that every source below describes.
func wantFromFile() Config {
	return Config{
		Addr: "tls://logs.internal:24224", Tag: "shop", Level: zapcore.DebugLevel, ErrLevel: zapcore.WarnLevel,
		Info:          StreamConfig{Tag: "shop.access", BufferBytes: 16 << 20},
		Err:           StreamConfig{BufferBytes: 2 << 20},
		FlushInterval: 250 * time.Millisecond, ErrMaxWait: 20 * time.Millisecond, SpillDir: "/var/spool/fluentcore",
		SpillAfter: 3 * time.Second, SpillMaxBytes: 1 << 30, RequireAck: true, AckTimeout: time.Minute,
		Compression: "gzip", SharedKey: "s3cret", Username: "app", Password: "pw",
		Servers:     []Server{{Addr: "a:24224", Weight: 30}, {Addr: "b:24224", Standby: true}},
		Degrade:     DegradeConfig{Policy: DegradeKeepWarn, Hold: 10 * time.Second, HighWatermark: 0.8},
		ConstLabels: map[string]string{"core": "main", "team": "shop"},
	}
}

func TestConfigFromJSON(t *testing.T) {
	src := `{
		"addr": "tls://logs.internal:24224", "tag": "shop", "level": "debug", "err_level": "warn",
		"info": {"tag": "shop.access", "buffer_bytes": 16777216}, "err": {"buffer_bytes": 2097152},
		"flush_interval": "250ms", "err_max_wait": 20000000, "spill_dir": "/var/spool/fluentcore",
		"spill_after": "3s", "spill_max_bytes": 1073741824, "require_ack": true, "ack_timeout": "1m",
		"compression": "gzip", "shared_key": "s3cret", "username": "app", "password": "pw",
		"servers": [{"addr": "a:24224", "weight": 30}, {"addr": "b:24224", "standby": true}],
		"degrade": {"policy": "keep_warn", "hold": "10s", "high_watermark": 0.8},
		"const_labels": {"core": "main", "team": "shop"}
	}`
	var got Config
	if err := json.Unmarshal([]byte(src), &got); err != nil {
		t.Fatal(err)
	}
	if want := wantFromFile(); !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
}

func TestConfigFromYAML(t *testing.T) {
	src := `
addr: tls://logs.internal:24224
tag: shop
level: debug
err_level: warn
info: {tag: shop.access, buffer_bytes: 16777216}
err: {buffer_bytes: 2097152}
flush_interval: 250ms
err_max_wait: 20ms
spill_dir: /var/spool/fluentcore
spill_after: 3s
spill_max_bytes: 1073741824
require_ack: true
ack_timeout: 1m
compression: gzip
shared_key: s3cret
username: app
password: pw
servers:
  - {addr: "a:24224", weight: 30}
  - {addr: "b:24224", standby: true}
degrade: {policy: keep_warn, hold: 10s, high_watermark: 0.8}
const_labels: {core: main, team: shop}
`
	var got Config
	if err := yaml.Unmarshal([]byte(src), &got); err != nil {
		t.Fatal(err)
	}
	if want := wantFromFile(); !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
}

func TestConfigFromEnv(t *testing.T) {
	env := map[string]string{
		"FLUENT_ADDR": "tls://logs.internal:24224", "FLUENT_TAG": "shop", "FLUENT_LEVEL": "debug",
		"FLUENT_ERR_LEVEL": "warn", "FLUENT_INFO_TAG": "shop.access", "FLUENT_INFO_BUFFER_BYTES": "16777216",
		"FLUENT_ERR_BUFFER_BYTES": "2097152", "FLUENT_FLUSH_INTERVAL": "250ms", "FLUENT_ERR_MAX_WAIT": "20ms",
		"FLUENT_SPILL_DIR": "/var/spool/fluentcore", "FLUENT_SPILL_AFTER": "3s", "FLUENT_SPILL_MAX_BYTES": "1073741824",
		"FLUENT_REQUIRE_ACK": "true", "FLUENT_ACK_TIMEOUT": "1m", "FLUENT_COMPRESSION": "gzip",
		"FLUENT_SHARED_KEY": "s3cret", "FLUENT_USERNAME": "app", "FLUENT_PASSWORD": "pw",
		"FLUENT_SERVERS":        "a:24224;weight=30, b:24224;standby",
		"FLUENT_DEGRADE_POLICY": "keep_warn", "FLUENT_DEGRADE_HOLD": "10s", "FLUENT_DEGRADE_HIGH_WATERMARK": "0.8",
		"FLUENT_CONST_LABELS": "core=main,team=shop",
	}
	// Variables of other tools that share the prefix are left alone.
	environ := []string{"PATH=/bin", "FLUENT_ELASTICSEARCH_HOST=es", "FLUENT_BIT_VERSION=3"}
	for k, v := range env {
		environ = append(environ, k+"="+v)
	}
	got, err := configFromEnv(environ)
	if err != nil {
		t.Fatal(err)
	}
	if want := wantFromFile(); !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
	// Every variable used above is one ConfigFromEnv knows.
	known := strings.Join(envNames(), " ")
	for k := range env {
		if !strings.Contains(" "+known+" ", " "+k+" ") {
			t.Errorf("%s is not in envNames", k)
		}
	}
}

func TestConfigSourcesReportBadValuesByName(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{`{"flush_interval": "soon"}`, "flush_interval"},
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
	_, err := configFromEnv([]string{"FLUENT_FLUSH_INTERVAL=soon", "FLUENT_REQUIRE_ACK=maybe", "FLUENT_DEGRADE_SAMPLE_FIRST=0"})
	for _, name := range []string{"FLUENT_FLUSH_INTERVAL", "FLUENT_REQUIRE_ACK", "FLUENT_DEGRADE_SAMPLE_FIRST"} {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Fatalf("env error %v does not name %s", err, name)
		}
	}
	// A typo of a known variable is an error that names both; it was ignored.
	cfg, err := configFromEnv([]string{"FLUENT_FLUSH_INTERVALL=1s", "FLUENT_TAG=shop"})
	if err == nil || !strings.Contains(err.Error(), "FLUENT_FLUSH_INTERVALL") || !strings.Contains(err.Error(), "did you mean FLUENT_FLUSH_INTERVAL?") {
		t.Fatalf("typo: error %v", err)
	}
	if cfg.Tag != "shop" {
		t.Fatalf("the variables next to the typo were not read: %+v", cfg)
	}
}

// The README documents every environment variable.
func TestReadmeListsEveryEnvVariable(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range envNames() {
		if !strings.Contains(string(readme), "`"+name+"`") {
			t.Errorf("README.md does not document %s", name)
		}
	}
}

// Every rendering of a Config redacts the shared key and the password: fmt's verbs, JSON,
// YAML, zap.Any and slog. What is read from files and the environment is unchanged.
func TestConfigRenderingsRedactSecrets(t *testing.T) {
	const key, password = "s3cret-shared-key", "p4ssw0rd-of-app"
	cfg := Config{Addr: "tls://fluentd:24224", SharedKey: key, Username: "app", Password: password,
		Level: zap.NewAtomicLevelAt(zapcore.WarnLevel), FlushInterval: time.Second}
	var zapOut, slogOut bytes.Buffer
	zl := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(&zapOut), zapcore.DebugLevel))
	zl.Info("config", zap.Any("cfg", cfg))
	slog.New(slog.NewTextHandler(&slogOut, nil)).Info("config", "cfg", cfg)
	slog.New(slog.NewJSONHandler(&slogOut, nil)).Info("config", "cfg", cfg)
	js, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ym, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	renderings := map[string]string{
		"%v": fmt.Sprintf("%v", cfg), "%+v": fmt.Sprintf("%+v", cfg), "%#v": fmt.Sprintf("%#v", cfg),
		"String": cfg.String(), "pointer %+v": fmt.Sprintf("%+v", &cfg), "%s": fmt.Sprintf("%s", cfg),
		"%d": fmt.Sprintf("%d", cfg), "%q": fmt.Sprintf("%q", cfg),
		"json": string(js), "yaml": string(ym), "zap.Any": zapOut.String(), "slog": slogOut.String(),
	}
	for name, out := range renderings {
		if strings.Contains(out, key) || strings.Contains(out, password) {
			t.Errorf("%s shows a secret: %s", name, out)
		}
		if !strings.Contains(out, "[redacted]") || !strings.Contains(out, "fluentd:24224") {
			t.Errorf("%s does not show the config with its secrets redacted: %s", name, out)
		}
	}
	// YAML writes durations as whole nanoseconds, which it reads back.
	if !strings.Contains(string(ym), "flush_interval: 1000000000") {
		t.Errorf("YAML: %s", ym)
	}
	// JSON written is JSON read, secrets aside.
	var back Config
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	if back.Addr != cfg.Addr || back.FlushInterval != time.Second || back.Username != "app" || zapcore.LevelOf(back.Level) != zapcore.WarnLevel {
		t.Fatalf("round trip: %+v", back)
	}
	// The secrets themselves are still read from files and the environment.
	env, err := configFromEnv([]string{"FLUENT_SHARED_KEY=" + key, "FLUENT_PASSWORD=" + password})
	if err != nil || env.SharedKey != key || env.Password != password {
		t.Fatalf("from the environment: %v", err)
	}
}
