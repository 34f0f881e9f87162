package fluentcore

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestConfigFromEnv(t *testing.T) {
	env := map[string]string{
		"FLUENT_ADDR": "tls://logs.internal:24224", "FLUENT_TAG": "shop", "FLUENT_LEVEL": "debug",
		"FLUENT_ERR_LEVEL": "warn", "FLUENT_INFO_TAG": "shop.access", "FLUENT_INFO_BUFFER_BYTES": "16777216",
		"FLUENT_ERR_BUFFER_BYTES": "2097152", "FLUENT_TRANSPORT_FLUSH_INTERVAL": "250ms", "FLUENT_ERR_MAX_WAIT": "20ms",
		"FLUENT_SPILL_DIR": "/var/spool/fluentcore", "FLUENT_SPILL_AFTER": "3s", "FLUENT_SPILL_MAX_BYTES": "1073741824",
		"FLUENT_INFO_ACKS": "on", "FLUENT_TIMEOUTS_ACK": "1m", "FLUENT_TRANSPORT_COMPRESSION": "gzip",
		"FLUENT_SECURITY_SHARED_KEY": "s3cret", "FLUENT_SECURITY_USERNAME": "app", "FLUENT_SECURITY_PASSWORD": "pw",
		"FLUENT_SERVERS":        "a:24224;weight=30, b:24224;standby",
		"FLUENT_DEGRADE_POLICY": "keep_warn", "FLUENT_DEGRADE_HOLD": "10s", "FLUENT_DEGRADE_HIGH_WATERMARK": "0.8",
		"FLUENT_METRICS_CONST_LABELS": "core=main,team=shop",
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
	if want := wantFromFile(); !sameConfig(got, want) {
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

// The README, or a page of docs/, documents every environment variable.
func TestReadmeListsEveryEnvVariable(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	docs, _ := filepath.Glob("docs/*.md")
	for _, d := range docs {
		b, err := os.ReadFile(d)
		if err != nil {
			t.Fatal(err)
		}
		readme = append(readme, b...)
	}
	for _, name := range envNames() {
		if !strings.Contains(string(readme), "`"+name+"`") {
			t.Errorf("neither README.md nor docs/ documents %s", name)
		}
	}
}

// A variable that looks meant for fluentcore but is not one it reads (another library's
// name, another case, an unknown FLUENT_ name) was ignored without a word. ConfigFromEnv
// now names each on one line on stderr, with the variable it probably means, and still
// reads the rest without an error: such a variable may be another tool's.
func TestEnvNamesNotReadAreNamedOnce(t *testing.T) {
	meant := map[string]string{ // variable: the one it probably means
		"FLUENT_HOST": "FLUENT_ADDR", "FLUENT_PORT": "FLUENT_ADDR", "FLUENTD_ADDR": "FLUENT_ADDR",
		"FLUENTD_HOST": "FLUENT_ADDR", "fluent_addr": "FLUENT_ADDR", "Fluent_Security_Shared_Key": "FLUENT_SECURITY_SHARED_KEY",
		"FLUENTD_INFO_ACKS": "FLUENT_INFO_ACKS", "fluent_shared_key": "FLUENT_SECURITY_SHARED_KEY",
	}
	for k := range meant {
		t.Setenv(k, "fluentd:24224")
	}
	t.Setenv("FLUENT_BATCH_SIZE", "100") // a FLUENT_ name fluentcore has nothing like
	t.Setenv("FLUENT_TAG", "shop")
	t.Setenv("FLUENTD_CONF", "fluent.conf") // another prefix, nothing like ours: not named

	out, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	stderr := os.Stderr
	os.Stderr = out
	cfg, err := ConfigFromEnv()
	os.Stderr = stderr
	if err != nil || cfg.Tag != "shop" {
		t.Fatalf("ConfigFromEnv() = %+v, %v: want the Tag read and no error", cfg, err)
	}
	b, err := os.ReadFile(out.Name())
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "fluentcore: environment: ") {
		t.Fatalf("stderr %q: want one line from fluentcore", b)
	}
	for name, want := range meant {
		if !strings.Contains(lines[0], name+" is not read: did you mean "+want) {
			t.Errorf("the notice does not point %s to %s: %s", name, want, lines[0])
		}
	}
	if !strings.Contains(lines[0], "FLUENT_BATCH_SIZE is not read") {
		t.Errorf("the notice does not name FLUENT_BATCH_SIZE: %s", lines[0])
	}
	if strings.Contains(lines[0], "FLUENTD_CONF") || strings.Contains(lines[0], "FLUENT_TAG") {
		t.Errorf("the notice names a variable it should leave alone: %s", lines[0])
	}
}

// The variable of a key whose setting is now under another (FLUENT_SHARED_KEY, of
// security.shared_key) is not read and not ignored either: it is an error naming the
// variable to set, so that no setting is lost without a word.
func TestMovedEnvVariablesAreRefused(t *testing.T) {
	for name, now := range map[string]string{
		"FLUENT_SHARED_KEY": "FLUENT_SECURITY_SHARED_KEY", "FLUENT_FLUSH_INTERVAL": "FLUENT_TRANSPORT_FLUSH_INTERVAL",
		"FLUENT_REQUIRE_ACK": "FLUENT_INFO_ACKS", "FLUENT_NO_METRICS": "FLUENT_METRICS_DISABLED",
		"FLUENT_TLS_CA_FILE": "FLUENT_SECURITY_TLS_CA_FILE", "FLUENT_TAG_TEMPLATE": "FLUENT_TAGS_TEMPLATE",
	} {
		cfg, err := configFromEnv([]string{name + "=x", "FLUENT_TAG=shop"})
		if err == nil || !strings.Contains(err.Error(), name+" is not read: its setting is "+now) {
			t.Errorf("%s: error %v, want one naming %s", name, err, now)
		}
		if cfg.Tag != "shop" {
			t.Errorf("%s: the other variables were not read: %+v", name, cfg)
		}
	}
	// The variables whose names stayed the same are read.
	cfg, err := configFromEnv([]string{"FLUENT_SPILL_DIR=/var/spool/x", "FLUENT_ERR_LEVEL=warn", "FLUENT_ERR_MAX_WAIT=20ms"})
	if err != nil || cfg.Spill.Dir != "/var/spool/x" || cfg.Err.MaxWait != 20*time.Millisecond {
		t.Errorf("unchanged names: %+v, %v", cfg, err)
	}
}
