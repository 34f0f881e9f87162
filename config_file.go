package fluentcore

import (
	"encoding"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap/zapcore"
)

// Config from files and the environment. Keys are the snake_case names of the struct tags,
// the same three ways: JSON, YAML, and FLUENT_<KEY> environment variables. One reflective
// decoder serves all three, so they cannot drift apart.

var (
	durationType     = reflect.TypeFor[time.Duration]()
	levelEnablerType = reflect.TypeFor[zapcore.LevelEnabler]()
	textUnmarshaler  = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// UnmarshalJSON reads a Config from JSON. Keys are the snake_case names of the struct tags
// ("addr", "flush_interval", "info": {"buffer_bytes": ...}); durations are strings such as
// "500ms" or "2s" (or integer nanoseconds); "level" and "err_level" are zap level names
// ("debug", "error"); "degrade": {"policy": ...} is "sample", "keep_warn", "drop_all" or
// "off". An unknown key or a value of the wrong type is an error that names the key. Fields
// that cannot come from a file (EncoderConfig, ErrFallback, TLS, Registerer, OnEvent) keep
// the values they had.
func (cfg *Config) UnmarshalJSON(b []byte) error {
	return decodeJSON(reflect.ValueOf(cfg).Elem(), b, "")
}

// UnmarshalYAML reads a Config from YAML with the keys and value forms of UnmarshalJSON.
// It uses the function-style interface that gopkg.in/yaml.v2, yaml.v3 and go.yaml.in/yaml
// all call, so fluentcore depends on none of them.
func (cfg *Config) UnmarshalYAML(unmarshal func(any) error) error {
	var m map[string]any
	if err := unmarshal(&m); err != nil {
		return err
	}
	b, err := json.Marshal(jsonable(m))
	if err != nil {
		return fmt.Errorf("fluentcore: config: %w", err)
	}
	return cfg.UnmarshalJSON(b)
}

// jsonable turns the map[any]any that yaml.v2 produces into map[string]any.
func jsonable(v any) any {
	switch x := v.(type) {
	case map[any]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[fmt.Sprint(k)] = jsonable(e)
		}
		return m
	case map[string]any:
		for k, e := range x {
			x[k] = jsonable(e)
		}
	case []any:
		for i, e := range x {
			x[i] = jsonable(e)
		}
	}
	return v
}

// fieldKey returns the JSON key of a struct field, or "" if the field is not read from files.
func fieldKey(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if name == "-" || !f.IsExported() {
		return ""
	}
	return name
}

func decodeJSON(v reflect.Value, raw []byte, path string) error {
	bad := func(err error) error {
		return fmt.Errorf("fluentcore: config %s: %w", strings.TrimPrefix(path, "."), err)
	}
	t := v.Type()
	switch {
	case t == durationType || t == levelEnablerType || reflect.PointerTo(t).Implements(textUnmarshaler):
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			if t == durationType { // integer nanoseconds are accepted too
				var n int64
				if json.Unmarshal(raw, &n) == nil {
					v.SetInt(n)
					return nil
				}
			}
			return bad(fmt.Errorf("want a string, got %s", raw))
		}
		if err := setText(v, s); err != nil {
			return bad(err)
		}
		return nil
	case t.Kind() == reflect.Struct:
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			return bad(fmt.Errorf("want an object: %w", err))
		}
		for i := 0; i < t.NumField(); i++ {
			key := fieldKey(t.Field(i))
			if r, ok := m[key]; ok && key != "" {
				if err := decodeJSON(v.Field(i), r, path+"."+key); err != nil {
					return err
				}
				delete(m, key)
			}
		}
		for key := range m {
			return bad(fmt.Errorf("unknown key %q", key))
		}
		return nil
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct:
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return bad(fmt.Errorf("want a list: %w", err))
		}
		s := reflect.MakeSlice(t, len(items), len(items))
		for i, r := range items {
			if err := decodeJSON(s.Index(i), r, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		v.Set(s)
		return nil
	}
	if err := json.Unmarshal(raw, v.Addr().Interface()); err != nil {
		return bad(err)
	}
	return nil
}

// setText sets a duration, a level or a TextUnmarshaler from its text form.
func setText(v reflect.Value, s string) error {
	switch v.Type() {
	case durationType:
		d, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		v.SetInt(int64(d))
	case levelEnablerType:
		l, err := zapcore.ParseLevel(s)
		if err != nil {
			return err
		}
		v.Set(reflect.ValueOf(l))
	default:
		return v.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(s))
	}
	return nil
}

// EnvPrefix starts the names of the environment variables ConfigFromEnv reads.
const EnvPrefix = "FLUENT_"

// ConfigFromEnv returns a Config read from environment variables, for twelve-factor
// services. Each key of the JSON form becomes FLUENT_ plus the key in upper case, nested
// keys joined by "_": FLUENT_ADDR, FLUENT_TAG, FLUENT_LEVEL, FLUENT_FLUSH_INTERVAL=500ms,
// FLUENT_INFO_BUFFER_BYTES, FLUENT_DEGRADE_POLICY=keep_warn, FLUENT_SHARED_KEY, ... (README
// lists them all). FLUENT_SERVERS is a comma-separated list of addresses, each optionally
// followed by ";weight=N" and ";standby"; FLUENT_CONST_LABELS is "k=v,k2=v2". Unset
// variables leave a field at its zero value, which New reads as the default. The error names
// every variable it could not parse; the Config returned with an error holds what could be
// read. Safe for concurrent use.
func ConfigFromEnv() (Config, error) {
	return configFromEnv(os.LookupEnv)
}

func configFromEnv(lookup func(string) (string, bool)) (Config, error) {
	var cfg Config
	var errs []string
	walkEnv(reflect.ValueOf(&cfg).Elem(), EnvPrefix, func(name string, v reflect.Value) {
		s, ok := lookup(name)
		if !ok {
			return
		}
		if err := setEnv(v, s); err != nil {
			errs = append(errs, fmt.Sprintf("%s=%q: %v", name, s, err))
		}
	})
	if len(errs) > 0 {
		return cfg, fmt.Errorf("fluentcore: environment: %s", strings.Join(errs, "; "))
	}
	return cfg, nil
}

// envNames lists the environment variables ConfigFromEnv reads, in field order.
func envNames() []string {
	var names []string
	var cfg Config
	walkEnv(reflect.ValueOf(&cfg).Elem(), EnvPrefix, func(name string, _ reflect.Value) {
		names = append(names, name)
	})
	return names
}

// walkEnv calls fn with the variable name of every settable leaf of a config struct.
func walkEnv(v reflect.Value, prefix string, fn func(string, reflect.Value)) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		key := fieldKey(t.Field(i))
		if key == "" {
			continue
		}
		name, f := prefix+strings.ToUpper(key), v.Field(i)
		if f.Kind() == reflect.Struct {
			walkEnv(f, name+"_", fn)
			continue
		}
		fn(name, f)
	}
}

func setEnv(v reflect.Value, s string) error {
	t := v.Type()
	switch {
	case t == durationType || t == levelEnablerType || reflect.PointerTo(t).Implements(textUnmarshaler):
		return setText(v, s)
	case t == reflect.TypeFor[[]Server]():
		servers, err := parseServers(s)
		if err != nil {
			return err
		}
		v.Set(reflect.ValueOf(servers))
		return nil
	}
	switch t.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return err
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int64:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return err
		}
		v.SetInt(n)
	case reflect.Float64:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return err
		}
		v.SetFloat(f)
	case reflect.Map: // ConstLabels
		m := reflect.MakeMap(t)
		for _, kv := range strings.Split(s, ",") {
			k, val, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return fmt.Errorf("want k=v pairs separated by commas")
			}
			m.SetMapIndex(reflect.ValueOf(strings.TrimSpace(k)), reflect.ValueOf(strings.TrimSpace(val)))
		}
		v.Set(m)
	default:
		return fmt.Errorf("cannot be set from the environment")
	}
	return nil
}

// parseServers reads "addr[;weight=N][;standby],addr...".
func parseServers(s string) ([]Server, error) {
	var out []Server
	for _, item := range strings.Split(s, ",") {
		parts := strings.Split(strings.TrimSpace(item), ";")
		srv := Server{Addr: parts[0]}
		for _, p := range parts[1:] {
			switch k, val, _ := strings.Cut(p, "="); k {
			case "weight":
				w, err := strconv.Atoi(val)
				if err != nil {
					return nil, fmt.Errorf("server %q: weight: %w", srv.Addr, err)
				}
				srv.Weight = w
			case "standby":
				srv.Standby = true
			default:
				return nil, fmt.Errorf("server %q: unknown option %q", srv.Addr, p)
			}
		}
		out = append(out, srv)
	}
	return out, nil
}
