package fluentcore

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
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
// ("debug", "error"); "degrade": {"policy": ...} is "adaptive", "sample", "keep_warn",
// "drop_all" or "off". An unknown key or a value of the wrong type is an error that names
// the key. Fields that cannot come from a file (EncoderConfig, ErrFallback, TLS,
// Registerer, OnEvent) keep the values they had.
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
		if path == "" {
			return fmt.Errorf("fluentcore: config: %w", err)
		}
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
				if err := checkZero(strings.TrimPrefix(path+"."+key, "."), v.Field(i)); err != nil {
					return bad(err)
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

// zeroMeansDefault are the keys whose zero a reader could take for "none" (keep no entry
// first, no sampling window), while it means the default: set explicitly, 0 is refused.
var zeroMeansDefault = map[string]string{"degrade.sample_first": "10", "degrade.sample_interval": "1s"}

// checkZero refuses an explicit zero for a key of zeroMeansDefault; key is the JSON path.
func checkZero(key string, v reflect.Value) error {
	if def, ok := zeroMeansDefault[key]; ok && v.IsZero() {
		return fmt.Errorf("%s: 0 cannot be told from unset, which means the default (%s): set it above 0", key, def)
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
// variables leave a field at its zero value, which New reads as the default. A FLUENT_
// variable that is not one of these but within two letters of one (FLUENT_FLUSH_INTERVALL)
// is a typo and an error; others are left alone, since fluent-bit's images and other tools
// use the prefix too. The error names every variable it could not parse or place; the
// Config returned with an error holds what could be read. Safe for concurrent use.
func ConfigFromEnv() (Config, error) {
	return configFromEnv(os.Environ())
}

// configFromEnv reads a Config from environ, in os.Environ's "KEY=value" form.
func configFromEnv(environ []string) (Config, error) {
	env := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, EnvPrefix) {
			env[k] = v
		}
	}
	var cfg Config
	var errs []string
	walkEnv(reflect.ValueOf(&cfg).Elem(), EnvPrefix, "", func(name, key string, v reflect.Value) {
		s, ok := env[name]
		if !ok {
			return
		}
		delete(env, name)
		err := setEnv(v, s)
		if err == nil {
			err = checkZero(key, v)
		}
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s=%q: %v", name, s, err))
		}
	})
	for _, name := range slices.Sorted(maps.Keys(env)) { // what is left is not ours
		if near := nearEnvName(name); near != "" {
			errs = append(errs, fmt.Sprintf("%s is not a fluentcore variable: did you mean %s?", name, near))
		}
	}
	if len(errs) > 0 {
		return cfg, fmt.Errorf("fluentcore: environment: %s", strings.Join(errs, "; "))
	}
	return cfg, nil
}

// nearEnvName returns the variable ConfigFromEnv reads that name is a typo of (at most two
// letters inserted, deleted or changed), or "" if there is none.
func nearEnvName(name string) string {
	for _, known := range envNames() {
		if editDistance(name, known) <= 2 {
			return known
		}
	}
	return ""
}

// editDistance is the Levenshtein distance of a and b, in bytes.
func editDistance(a, b string) int {
	prev, cur := make([]int, len(b)+1), make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// envNames lists the environment variables ConfigFromEnv reads, in field order.
func envNames() []string {
	var names []string
	var cfg Config
	walkEnv(reflect.ValueOf(&cfg).Elem(), EnvPrefix, "", func(name, _ string, _ reflect.Value) {
		names = append(names, name)
	})
	return names
}

// walkEnv calls fn with the variable name and the JSON path of every settable leaf of a
// config struct.
func walkEnv(v reflect.Value, prefix, path string, fn func(name, key string, v reflect.Value)) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		key := fieldKey(t.Field(i))
		if key == "" {
			continue
		}
		name, f := prefix+strings.ToUpper(key), v.Field(i)
		if path != "" {
			key = path + "." + key
		}
		if f.Kind() == reflect.Struct {
			walkEnv(f, name+"_", key, fn)
			continue
		}
		fn(name, key, f)
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

// redactedSecret is what every rendering of a Config shows instead of a secret.
const redactedSecret = "[redacted]"

// plainConfig is Config without its methods, so that renderings of it do not recurse.
type plainConfig Config

// redacted returns cfg with SharedKey and Password (when set) replaced by "[redacted]", and
// a Level or ErrLevel that is not a zapcore.Level (a LevelEnablerFunc, say) by the level it
// enables from, so that every rendering can write it.
func (cfg Config) redacted() plainConfig {
	p := plainConfig(cfg)
	if p.SharedKey != "" {
		p.SharedKey = redactedSecret
	}
	if p.Password != "" {
		p.Password = redactedSecret
	}
	for _, l := range []*zapcore.LevelEnabler{&p.Level, &p.ErrLevel} {
		if _, ok := (*l).(zapcore.Level); !ok && *l != nil {
			*l = zapcore.LevelOf(*l)
		}
	}
	return p
}

// String renders cfg as %+v would, with SharedKey and Password shown as "[redacted]": a
// Config printed into a log or an error message never carries the secrets. Safe for
// concurrent use.
func (cfg Config) String() string { return fmt.Sprintf("%+v", cfg.redacted()) }

// GoString is String for the %#v verb.
func (cfg Config) GoString() string { return fmt.Sprintf("%#v", cfg.redacted()) }

// Format renders cfg with every fmt verb and flag (%v, %+v, %#v, %s, %d, ...) as it would
// render the same struct, with SharedKey and Password shown as "[redacted]".
func (cfg Config) Format(f fmt.State, verb rune) {
	fmt.Fprintf(f, fmt.FormatString(f, verb), cfg.redacted())
}

// MarshalJSON writes cfg in the form UnmarshalJSON reads (durations in nanoseconds), with
// SharedKey and Password as "[redacted]" (reading it back gives that text, not the
// secrets). Fields that UnmarshalJSON does not read are left out. The error is
// encoding/json's.
func (cfg Config) MarshalJSON() ([]byte, error) { return json.Marshal(cfg.redacted()) }

// MarshalYAML is MarshalJSON for YAML (yaml.v2, yaml.v3 and go.yaml.in/yaml call it).
func (cfg Config) MarshalYAML() (any, error) { return cfg.fieldMap() }

// MarshalLogObject writes cfg's fields, secrets redacted, so that zap.Any("cfg", cfg) and
// zap.Object log it safely. The error is MarshalJSON's.
func (cfg Config) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	fields, err := cfg.fieldMap()
	if err != nil {
		return err
	}
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		if err := enc.AddReflected(k, fields[k]); err != nil {
			return err
		}
	}
	return nil
}

// fieldMap is MarshalJSON's output as a map, whole numbers (durations, sizes) as int64.
func (cfg Config) fieldMap() (map[string]any, error) {
	b, err := cfg.MarshalJSON()
	if err != nil {
		return nil, err
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		return nil, err
	}
	return wholeNumbers(m).(map[string]any), nil
}

// wholeNumbers replaces the json.Numbers in v by int64 where they are whole, float64 else.
func wholeNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return n
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = wholeNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = wholeNumbers(e)
		}
	}
	return v
}
