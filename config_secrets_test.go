package fluentcore

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// A secret of the wrong type in a file is an error that names the key and the type it has,
// never its value, whatever that type: numbers in every form, lists, objects.
func TestSecretOfAWrongTypeIsNeverShownInAnError(t *testing.T) {
	const secretText = "S3KRIT"
	for _, c := range []struct {
		format, src, key, kind string
		shown                  []string // what the error must not hold
	}{
		{"yaml", "security: {shared_key: 123456}\n", "security.shared_key", "a number", []string{"123456"}},
		{"yaml", "security: {shared_key: 0x1E240}\n", "security.shared_key", "a number", []string{"123456", "1E240", "1e240"}},
		{"yaml", "security: {shared_key: 123456.0}\n", "security.shared_key", "a number", []string{"123456"}},
		{"yaml", "security: {password: [S3KRIT]}\n", "security.password", "a list", []string{secretText}},
		{"yaml", "security: {password: {v: S3KRIT}}\n", "security.password", "an object", []string{secretText}},
		{"yaml", "security: {shared_key: true}\n", "security.shared_key", "a boolean", []string{"true"}},
		{"yaml", "security: {shared_key: .nan}\n", "security.shared_key", "NaN or an infinity", []string{"NaN:", "NaN\n", ": NaN"}},
		{"yaml", "info: {tag: a}\nsecurity: {password: -.inf}\n", "security.password", "NaN or an infinity", []string{"Inf"}},
		{"json", `{"security": {"password": 987654}}`, "security.password", "a number", []string{"987654"}},
		{"json", `{"security": {"shared_key": 123456.0}}`, "security.shared_key", "a number", []string{"123456"}},
		{"json", `{"security": {"shared_key": 1.23456e5}}`, "security.shared_key", "a number", []string{"123456", "1.23456e5"}},
		{"json", `{"security": {"shared_key": ["S3KRIT"]}}`, "security.shared_key", "a list", []string{secretText}},
		{"json", `{"security": {"password": {"v": "S3KRIT"}}}`, "security.password", "an object", []string{secretText}},
	} {
		var cfg Config
		var err error
		if c.format == "yaml" {
			err = yaml.Unmarshal([]byte(c.src), &cfg)
		} else {
			err = json.Unmarshal([]byte(c.src), &cfg)
		}
		if err == nil {
			t.Errorf("%s %q: no error", c.format, c.src)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, c.key) || !strings.Contains(msg, c.kind) {
			t.Errorf("%s %q: error %q, want one naming %s and %s", c.format, c.src, msg, c.key, c.kind)
		}
		for _, s := range c.shown {
			if strings.Contains(msg, s) {
				t.Errorf("%s %q: error %q shows the secret's value %q", c.format, c.src, msg, s)
			}
		}
	}
}

// The environment reader shows a variable's value in its errors, except a secret's.
func TestEnvErrorsNeverShowASecret(t *testing.T) {
	if got := valueInError(secretType, "hunter2", false); strings.Contains(got, "hunter2") {
		t.Errorf("valueInError shows an environment secret: %q", got)
	}
	for _, name := range []string{"FLUENT_SECURITY_SHARED_KEY", "FLUENT_SECURITY_PASSWORD"} {
		_, err := configFromEnv([]string{name + "=" + redactedSecret})
		if err == nil || !strings.Contains(err.Error(), name) || strings.Contains(err.Error(), name+`="`) {
			t.Errorf("%s: error %v, want one naming the variable without showing its value", name, err)
		}
	}
	_, err := configFromEnv([]string{"FLUENT_TAGS_MAX=many"})
	if err == nil || !strings.Contains(err.Error(), `FLUENT_TAGS_MAX="many"`) {
		t.Errorf("a plain variable's error %v does not show its value", err)
	}
}

// A Config rendered as JSON or YAML and read back does not carry "[redacted]" as its
// secrets: reading it is an error that names the key, and so is Validate of a Config whose
// secret is that text (set in code, or read from a file).
func TestRedactedPlaceholderReadBackIsRefused(t *testing.T) {
	cfg := Config{Security: SecurityConfig{SharedKey: NewSecret("s3cret"), Password: NewSecret("pw"), Username: "app"}}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var back Config
	err = json.Unmarshal(b, &back)
	if err == nil || !strings.Contains(err.Error(), "password") && !strings.Contains(err.Error(), "shared_key") ||
		!strings.Contains(err.Error(), "placeholder") {
		t.Fatalf("JSON round trip: error %v, want one naming the key and the placeholder", err)
	}
	y, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(y, &back); err == nil || !strings.Contains(err.Error(), "placeholder") {
		t.Fatalf("YAML round trip: error %v", err)
	}
	if _, err := configFromEnv([]string{"FLUENT_SECURITY_SHARED_KEY=[redacted]"}); err == nil || !strings.Contains(err.Error(), "FLUENT_SECURITY_SHARED_KEY") {
		t.Fatalf("environment: error %v", err)
	}
	for _, c := range []Config{
		{Security: SecurityConfig{SharedKey: NewSecret(redactedSecret)}},
		{Security: SecurityConfig{SharedKey: NewSecret("k"), Password: NewSecret(redactedSecret), Username: "u"}},
	} {
		if err := c.Validate(); !errors.Is(err, errRedactedSecret) {
			t.Errorf("Validate: %v, want errRedactedSecret", err)
		}
	}
	file := filepath.Join(t.TempDir(), "shared_key")
	if err := os.WriteFile(file, []byte(redactedSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := (Config{Security: SecurityConfig{SharedKeyFile: file}}).Validate(); !errors.Is(err, errRedactedSecret) || !strings.Contains(err.Error(), "SharedKey") {
		t.Errorf("Validate of a secret file holding the placeholder: %v", err)
	}
	if err := (Config{Security: SecurityConfig{SharedKey: NewSecret("k"), Password: NewSecret("p"), Username: "u"}}).Validate(); err != nil {
		t.Errorf("real secrets: %v", err)
	}
}
