package fluentcore

import (
	"encoding"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
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

// UnmarshalJSON reads a Config from JSON. Keys are the snake_case names of the struct tags,
// a group's keys in an object under the group's ("addr", "spill": {"dir": ...},
// "transport": {"flush_interval": ...}); durations are strings with a unit, such as "500ms"
// or "2s" (a bare number, 500 or "500", is an error naming the key, since its unit would be
// a guess; 0 needs none); "level" and "err": {"level": ...} are zap level names ("debug",
// "error"); "degrade": {"policy": ...} is "adaptive", "sample", "keep_warn", "drop_all" or
// "off". An unknown key or a value of the wrong type is an error that names the key (and,
// for a key of movedKeys, the key to write). Fields that cannot come from a file
// (EncoderConfig, OnEvent, Spill.Fallback, Security.TLS, Metrics.Registerer,
// Transport.Resolver) keep the values they had.
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
		// encoding/json's error would show the value (NaN, +Inf), which may be a secret's.
		return fmt.Errorf("fluentcore: config %s: a value JSON cannot hold (NaN or an infinity)", nonFinite(m, ""))
	}
	return cfg.UnmarshalJSON(b)
}

// nonFinite returns the key path of the first NaN or infinity in v (jsonable's output),
// "" if there is none.
func nonFinite(v any, path string) string {
	switch x := v.(type) {
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return strings.TrimPrefix(path, ".")
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(x)) {
			if p := nonFinite(x[k], path+"."+k); p != "" {
				return p
			}
		}
	case []any:
		for i, e := range x {
			if p := nonFinite(e, fmt.Sprintf("%s[%d]", path, i)); p != "" {
				return p
			}
		}
	}
	return ""
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
			var n json.Number
			if t == durationType && json.Unmarshal(raw, &n) == nil {
				if f, err := n.Float64(); err == nil && f == 0 { // zero needs no unit
					v.SetInt(0)
					return nil
				}
				return bad(bareDuration(string(n)))
			}
			return bad(fmt.Errorf("want a string, got %s", valueInError(t, string(raw), true)))
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
			if now, ok := movedKeys[key]; ok && path == "" {
				return bad(fmt.Errorf("unknown key %q: its setting is %q", key, now))
			}
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

// movedKeys are the keys Config does not read whose settings are under another key, each
// with that key: a file that sets one, or the environment its variable, is refused with
// an error that names the other, rather than read without the setting.
var movedKeys = map[string]string{
	"err_level": "err.level", "err_max_wait": "err.max_wait",
	"spill_dir": "spill.dir", "spill_after": "spill.after", "spill_max_bytes": "spill.max_bytes",
	"tag_template": "tags.template", "tag_from_name": "tags.from_name", "max_tags": "tags.max",
	"tls": "security.tls", "shared_key": "security.shared_key", "shared_key_file": "security.shared_key_file",
	"self_hostname": "security.self_hostname", "username": "security.username",
	"password": "security.password", "password_file": "security.password_file",
	"no_metrics": "metrics.disabled", "const_labels": "metrics.const_labels",
	"sync_timeout": "timeouts.sync", "close_timeout": "timeouts.close", "dial_timeout": "timeouts.dial",
	"handshake_timeout": "timeouts.handshake", "write_timeout": "timeouts.write", "ack_timeout": "timeouts.ack",
	"require_ack": "info.acks", "max_batch_bytes": "transport.max_batch_bytes",
	"max_entry_bytes": "transport.max_entry_bytes", "flush_interval": "transport.flush_interval",
	"compression": "transport.compression", "max_inflight": "transport.max_inflight",
	"retry_min": "transport.retry_min", "retry_max": "transport.retry_max",
	"resolve_interval": "transport.resolve_interval",
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

// bareDuration is the error for a duration written as a number without a unit. The unit is
// not guessed: Go's would be nanoseconds, fluentd's seconds, and a reader's milliseconds.
func bareDuration(n string) error {
	return fmt.Errorf("%s has no unit: write a duration with one, such as \"500ms\" or \"2s\"", n)
}

// setText sets a duration, a level or a TextUnmarshaler from its text form.
func setText(v reflect.Value, s string) error {
	switch v.Type() {
	case durationType:
		d, err := time.ParseDuration(s)
		if err != nil {
			if s != "" && strings.Trim(s, "+-.0123456789") == "" {
				return bareDuration(s)
			}
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
