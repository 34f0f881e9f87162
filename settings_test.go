package fluentcore

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fluentcore/fluentcore/internal/wire"
)

// durationFields returns the Go path ("Transport.FlushInterval", "Degrade.Hold") of every
// time.Duration field of Config, and a setter for it.
func durationFields() map[string]func(*Config, time.Duration) {
	out := map[string]func(*Config, time.Duration){}
	var walk func(t reflect.Type, path string, index []int)
	walk = func(t reflect.Type, path string, index []int) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			idx := append(append([]int(nil), index...), i)
			switch {
			case f.Type == durationType:
				out[path+f.Name] = func(c *Config, d time.Duration) {
					reflect.ValueOf(c).Elem().FieldByIndex(idx).SetInt(int64(d))
				}
			case f.Type.Kind() == reflect.Struct && f.IsExported() && fieldKey(f) != "":
				walk(f.Type, path+f.Name+".", idx)
			}
		}
	}
	walk(reflect.TypeFor[Config](), "", nil)
	return out
}

// Every interval has a floor, MinInterval: a value under it (500ns, what a bare number
// in a file used to give) is a Validate error naming the field and the floor, and New uses
// the default instead; the floor itself is accepted.
func TestIntervalsHaveALowerBound(t *testing.T) {
	fields := durationFields()
	if len(fields) < 14 {
		t.Fatalf("found %d duration fields, want every one of Config's: %v", len(fields), fields)
	}
	for name, set := range fields {
		var cfg Config
		set(&cfg, 500*time.Nanosecond)
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), name+" ") || !strings.Contains(err.Error(), MinInterval.String()) {
			t.Errorf("%s = 500ns: Validate() = %v, want an error naming it and %v", name, err, MinInterval)
		}
		cfg = Config{}
		set(&cfg, MinInterval)
		if err := cfg.Validate(); err != nil {
			t.Errorf("%s = %v: Validate() = %v, want nil", name, MinInterval, err)
		}
	}
	// What New uses instead of a value under the floor: the default.
	s, _ := resolve(Config{Transport: TransportConfig{FlushInterval: 500, RetryMin: 1}, Degrade: DegradeConfig{Hold: 10, SampleInterval: 10, DisconnectedAfter: 10}})
	def := DegradeConfig{}.withDefaults()
	if s.flushInterval != DefaultFlushInterval || s.conn.retryMin != DefaultRetryMin || s.degrade.Hold != def.Hold ||
		s.degrade.SampleInterval != def.SampleInterval || s.degrade.DisconnectedAfter != 0 {
		t.Errorf("under the floor: flush %v, retryMin %v, degrade %+v; want the defaults", s.flushInterval, s.conn.retryMin, s.degrade)
	}
}

// A secret file is read as editors and tools write it: a leading UTF-8 byte-order mark and
// every trailing space, tab, CR and LF are not part of the secret (they made the handshake
// fail with only "shared_key mismatch"). What is left must not be empty.
func TestSecretFilesAreTrimmed(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	for i, content := range []string{"k3y", "k3y\n", "k3y\n\n", "k3y \n", "k3y\r\n", "k3y\t \r\n\n", "\ufeffk3y\n", "\ufeffk3y \r\n"} {
		f := write("ok"+string(rune('a'+i)), content)
		s, err := resolve(Config{Security: SecurityConfig{SharedKeyFile: f, Username: "app", PasswordFile: f}})
		if err != nil {
			t.Errorf("%q: %v", content, err)
			continue
		}
		if c := s.conn.creds; c == nil || c.SharedKey != "k3y" || c.Password != "k3y" {
			t.Errorf("%q: read %q and %q, want k3y", content, cfgSecret(c, true), cfgSecret(c, false))
		}
	}
	// Inside the secret, and before it, spaces are the secret's own.
	s, err := resolve(Config{Security: SecurityConfig{SharedKeyFile: write("inner", " a b \n")}})
	if err != nil || cfgSecret(s.conn.creds, true) != " a b" {
		t.Errorf("inner spaces: %v, read %q", err, cfgSecret(s.conn.creds, true))
	}
	for i, content := range []string{"", "\n", " \t\r\n", "\ufeff", "\ufeff\n"} {
		f := write("empty"+string(rune('a'+i)), content)
		err := Config{Security: SecurityConfig{SharedKeyFile: f}}.Validate()
		if err == nil || !strings.Contains(err.Error(), "empty") {
			t.Errorf("%q: Validate() = %v, want an error saying the file is empty", content, err)
		}
	}
}

// cfgSecret is the shared key (key) or the password of c, "" if there are no credentials.
func cfgSecret(c *wire.Credentials, key bool) string {
	switch {
	case c == nil:
		return ""
	case key:
		return c.SharedKey
	}
	return c.Password
}

// Which streams ask for acks: the err stream unless Err.Acks is AcksOff (by default not
// when every server is a unix socket), the info stream only with Info.Acks on.
func TestAcksPerStream(t *testing.T) {
	for _, tc := range []struct {
		name            string
		cfg             Config
		infoAck, errAck bool
	}{
		{"default", Config{}, false, true},
		{"Err.Acks off", Config{Err: ErrConfig{Acks: AcksOff}}, false, false},
		{"Info.Acks off", Config{Info: InfoConfig{Acks: AcksOff}}, false, true},
		{"Info.Acks on", Config{Info: InfoConfig{Acks: AcksOn}}, true, true},
		{"Info.Acks on, Err.Acks off", Config{Info: InfoConfig{Acks: AcksOn}, Err: ErrConfig{Acks: AcksOff}}, true, false},
		{"unix socket", Config{Addr: "unix:///run/fluentd.sock"}, false, false},
		{"unix socket, Err.Acks on", Config{Addr: "unix:///run/fluentd.sock", Err: ErrConfig{Acks: AcksOn}}, false, true},
		{"unix socket, Info.Acks on", Config{Addr: "unix:///run/fluentd.sock", Info: InfoConfig{Acks: AcksOn}}, true, false},
		{"a unix socket and a tcp server", Config{Servers: []Server{{Addr: "unix:///run/fluentd.sock"}, {Addr: "tcp://127.0.0.1:24224"}}}, false, true},
	} {
		s := settingsFor(tc.cfg)
		if got := s.connFor(infoStream).requireAck; got != tc.infoAck {
			t.Errorf("%s: info asks for acks %v, want %v", tc.name, got, tc.infoAck)
		}
		if got := s.connFor(errStream).requireAck; got != tc.errAck {
			t.Errorf("%s: err asks for acks %v, want %v", tc.name, got, tc.errAck)
		}
	}
	if err := (Config{Err: ErrConfig{Acks: 7}}).Validate(); err == nil || !strings.Contains(err.Error(), "Err.Acks") {
		t.Errorf("Validate of Err.Acks 7: %v", err)
	}
}
