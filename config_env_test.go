package fluentcore

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

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
		"FLUENTD_HOST": "FLUENT_ADDR", "fluent_addr": "FLUENT_ADDR", "Fluent_Shared_Key": "FLUENT_SHARED_KEY",
		"FLUENTD_REQUIRE_ACK": "FLUENT_REQUIRE_ACK",
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
