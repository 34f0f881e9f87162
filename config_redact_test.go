package fluentcore

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.yaml.in/yaml/v3"
)

// Every rendering of a Config redacts the shared key and the password: fmt's verbs, JSON,
// YAML, zap.Any and slog. What is read from files and the environment is unchanged.
func TestConfigRenderingsRedactSecrets(t *testing.T) {
	const key, password = "s3cret-shared-key", "p4ssw0rd-of-app"
	cfg := Config{Addr: "tls://fluentd:24224", Security: SecurityConfig{SharedKey: NewSecret(key), Username: "app", Password: NewSecret(password)},
		Level: zap.NewAtomicLevelAt(zapcore.WarnLevel), Transport: TransportConfig{FlushInterval: time.Second},
		Degrade: DegradeConfig{Hold: 1500 * time.Millisecond}}
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
	// Durations are written as text with a unit, the form they are read in.
	if !strings.Contains(string(ym), "flush_interval: 1s") || !strings.Contains(string(js), `"flush_interval":"1s"`) {
		t.Errorf("durations: YAML %s, JSON %s", ym, js)
	}
	// JSON written is JSON read, secrets aside (a placeholder read back as a secret is an
	// error: TestRedactedPlaceholderReadBackIsRefused).
	plain := cfg
	plain.Security.SharedKey, plain.Security.Password = Secret{}, Secret{}
	js, err = json.Marshal(plain)
	if err != nil {
		t.Fatal(err)
	}
	var back Config
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	if back.Addr != cfg.Addr || back.Transport.FlushInterval != time.Second || back.Security.Username != "app" || zapcore.LevelOf(back.Level) != zapcore.WarnLevel ||
		back.Degrade.Hold != cfg.Degrade.Hold {
		t.Fatalf("round trip: %+v", back)
	}
	// The secrets themselves are still read from files and the environment.
	env, err := configFromEnv([]string{"FLUENT_SECURITY_SHARED_KEY=" + key, "FLUENT_SECURITY_PASSWORD=" + password})
	if err != nil || env.Security.SharedKey.Reveal() != key || env.Security.Password.Reveal() != password {
		t.Fatalf("from the environment: %v", err)
	}
}

// A Config inside a caller's struct, in an unexported field, is printed by reflection: fmt
// calls none of its methods there. The secrets still do not show, with any verb, nested or
// behind a pointer, and a Secret on its own prints as "[redacted]" (nothing, when unset).
func TestSecretsDoNotPrintThroughACallersStruct(t *testing.T) {
	const key, password = "s3cret-shared-key", "p4ssw0rd-of-app"
	cfg := Config{Addr: "tls://fluentd:24224", Security: SecurityConfig{SharedKey: NewSecret(key), Password: NewSecret(password)}}
	type holder struct {
		cfg   Config
		ptr   *Config
		inner struct{ c Config }
	}
	h := holder{cfg: cfg, ptr: &cfg}
	h.inner.c = cfg
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x"} {
		for name, v := range map[string]any{"struct": h, "pointer": &h, "anonymous": struct{ c Config }{cfg}} {
			if out := fmt.Sprintf(verb, v); strings.Contains(out, key) || strings.Contains(out, password) ||
				strings.Contains(out, fmt.Sprintf("%x", key)) {
				t.Errorf("%s of a %s shows a secret: %s", verb, name, out)
			}
		}
	}
	var out bytes.Buffer
	slog.New(slog.NewTextHandler(&out, nil)).Info("held", "h", h)
	if strings.Contains(out.String(), key) {
		t.Errorf("slog's text handler shows a secret: %s", out.String())
	}
	if got := fmt.Sprint(NewSecret(key)); got != "[redacted]" {
		t.Errorf("a Secret prints as %q", got)
	}
	if got := fmt.Sprintf("%v|%#v", Secret{}, NewSecret("")); got != `|""` {
		t.Errorf("an unset Secret prints as %q", got)
	}
	if NewSecret(key).Reveal() != key || !NewSecret("").IsZero() {
		t.Error("Reveal or IsZero")
	}
}
