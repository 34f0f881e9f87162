package fluentcore

// Every rendering of a Config — String, GoString, %v, JSON, YAML, a zap field — goes
// through redacted: the shared key, the password and the TLS private key never leave in
// any of them.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap/zapcore"
)

// secretType is the type of the fields that hold a secret (Security.SharedKey,
// Security.Password).
var secretType = reflect.TypeFor[Secret]()

// valueInError is how an error about the value of a field of type t, read from a file or
// the environment, shows that value: raw itself (JSON text, or an environment variable's
// text), except for a secret, of which no error, log line or metric carries the value,
// whatever its type: only what kind of value it is ("a number", "a list", ...). The file
// decoder and the environment reader both show values through it.
func valueInError(t reflect.Type, raw string, fromJSON bool) string {
	if t != secretType {
		if fromJSON {
			return raw
		}
		return strconv.Quote(raw)
	}
	if !fromJSON {
		return "a text (a secret: its value is not shown)"
	}
	kind := "a number"
	switch (strings.TrimLeft(raw, " \t\r\n") + " ")[:1] {
	case `"`:
		kind = "a string"
	case "[":
		kind = "a list"
	case "{":
		kind = "an object"
	case "t", "f":
		kind = "a boolean"
	case "n":
		kind = "null"
	}
	return kind + " (a secret: its value is not shown)"
}

// plainConfig is Config without its methods, so that renderings of it do not recurse.
type plainConfig Config

// redacted returns cfg with Security.SharedKey and Security.Password (when set) replaced by
// "[redacted]", and a Level or Err.Level that is not a zapcore.Level (a LevelEnablerFunc,
// say) by the level it enables from, so that every rendering can write it.
func (cfg Config) redacted() plainConfig {
	p := plainConfig(cfg) // SharedKey and Password render themselves as "[redacted]"
	for _, l := range []*zapcore.LevelEnabler{&p.Level, &p.Err.Level} {
		if _, ok := (*l).(zapcore.Level); !ok && *l != nil {
			*l = zapcore.LevelOf(*l)
		}
	}
	return p
}

// String renders cfg as %+v would, with Security.SharedKey and Security.Password shown as
// "[redacted]": a Config printed into a log or an error message never carries the secrets.
// Safe for concurrent use.
func (cfg Config) String() string { return fmt.Sprintf("%+v", cfg.redacted()) }

// GoString is String for the %#v verb.
func (cfg Config) GoString() string { return fmt.Sprintf("%#v", cfg.redacted()) }

// Format renders cfg with every fmt verb and flag (%v, %+v, %#v, %s, %d, ...) as it would
// render the same struct, with Security.SharedKey and Security.Password shown as
// "[redacted]".
func (cfg Config) Format(f fmt.State, verb rune) {
	fmt.Fprintf(f, fmt.FormatString(f, verb), cfg.redacted())
}

// MarshalJSON writes cfg in the form UnmarshalJSON reads (durations as text such as
// "1.5s", keys in sorted order), with Security.SharedKey and Security.Password as
// "[redacted]" (reading it back gives that text, not the secrets). Fields that
// UnmarshalJSON does not read are left out. The error is encoding/json's.
func (cfg Config) MarshalJSON() ([]byte, error) {
	m, err := cfg.fieldMap()
	if err != nil {
		return nil, err
	}
	return json.Marshal(m)
}

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

// fieldMap is cfg, secrets redacted, as the map that every rendering but fmt's writes:
// whole numbers (sizes) as int64, durations as their text, which is the form the readers
// take (a bare number is not a duration to them).
func (cfg Config) fieldMap() (map[string]any, error) {
	b, err := json.Marshal(cfg.redacted())
	if err != nil {
		return nil, err
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		return nil, err
	}
	m = wholeNumbers(m).(map[string]any)
	durationsAsText(reflect.TypeFor[Config](), m)
	return m, nil
}

// durationsAsText replaces, in m (the JSON form of a struct of type t), every duration
// field's nanoseconds by its text ("1.5s"), in nested structs and lists of them too.
func durationsAsText(t reflect.Type, m map[string]any) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		key := fieldKey(f)
		v, ok := m[key]
		if key == "" || !ok {
			continue
		}
		switch x := v.(type) {
		case int64:
			if f.Type == durationType {
				m[key] = time.Duration(x).String()
			}
		case map[string]any:
			if f.Type.Kind() == reflect.Struct {
				durationsAsText(f.Type, x)
			}
		case []any:
			if f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct {
				for _, e := range x {
					if em, ok := e.(map[string]any); ok {
						durationsAsText(f.Type.Elem(), em)
					}
				}
			}
		}
	}
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
