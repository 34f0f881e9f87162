package fluentcore

import (
	"os"
	"reflect"
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
