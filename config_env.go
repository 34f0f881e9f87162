package fluentcore

// Config from the environment: FLUENT_<KEY> variables, read by the same reflective walk as
// files (config_file.go), so the names cannot drift from the JSON and YAML keys.

import (
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// EnvPrefix starts the names of the environment variables ConfigFromEnv reads.
const EnvPrefix = "FLUENT_"

// ConfigFromEnv returns a Config read from environment variables, for twelve-factor
// services. Each key of the JSON form becomes FLUENT_ plus the key in upper case, a group's
// keys after the group's, joined by "_": FLUENT_ADDR, FLUENT_TAG, FLUENT_LEVEL,
// FLUENT_SPILL_DIR, FLUENT_SECURITY_SHARED_KEY, FLUENT_TRANSPORT_FLUSH_INTERVAL=500ms,
// FLUENT_INFO_BUFFER_BYTES, FLUENT_DEGRADE_POLICY=keep_warn, ... (docs/configuration.md
// lists them all). FLUENT_SERVERS is a comma-separated list of addresses, each optionally
// followed by ";weight=N" and ";standby"; FLUENT_METRICS_CONST_LABELS is "k=v,k2=v2". Unset
// variables leave a field at its zero value, which New reads as the default. A FLUENT_
// variable that is not one of these but within two letters of one
// (FLUENT_TRANSPORT_FLUSH_INTERVALL) is a typo and an error, and so is the variable of a key
// that movedKeys lists (FLUENT_SHARED_KEY), which names the one to set. Other variables
// that look meant for it but are not read — another FLUENT_ name (FLUENT_HOST,
// FLUENT_PORT), another case (fluent_addr), the FLUENTD_ prefix (FLUENTD_ADDR) — are not an
// error, since fluent-bit's images and other tools use such names too: ConfigFromEnv names
// them on one line written to os.Stderr, each with the variable it probably means. The error names every variable it could not parse or place;
// the Config returned with an error holds what could be read. Safe for concurrent use.
func ConfigFromEnv() (Config, error) {
	environ := os.Environ()
	if hints := envHints(environ); len(hints) > 0 {
		fmt.Fprintf(os.Stderr, "fluentcore: environment: %s\n", strings.Join(hints, "; "))
	}
	return configFromEnv(environ)
}

// envAddrNames are the names other clients read the receiver's host or port from; fluentcore
// reads both from FLUENT_ADDR.
var envAddrNames = map[string]bool{"FLUENT_HOST": true, "FLUENT_PORT": true, "FLUENT_ADDRESS": true}

// envHints says, for each variable of environ that looks meant for fluentcore but is not
// read by it, that it is not read and, where it can tell, which variable it is probably
// meant as; sorted by name. The typos configFromEnv reports as errors are left to it.
func envHints(environ []string) []string {
	known := map[string]bool{}
	for _, name := range envNames() {
		known[name] = true
	}
	var hints []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if known[name] || (strings.HasPrefix(name, EnvPrefix) && (nearEnvName(name) != "" || movedEnv(name) != "")) {
			continue
		}
		switch meant := envMeant(name, known); {
		case meant != "":
			hints = append(hints, fmt.Sprintf("%s is not read: did you mean %s?", name, meant))
		case strings.HasPrefix(name, EnvPrefix):
			hints = append(hints, name+" is not read")
		}
	}
	slices.Sort(hints)
	return hints
}

// envMeant returns the variable ConfigFromEnv reads that name (one it does not read)
// probably means, or "": the same name in upper case or with FLUENT_ for FLUENTD_, then
// FLUENT_ADDR for a host or port, then the variable of a moved key's setting, then a known
// name within two letters.
func envMeant(name string, known map[string]bool) string {
	u := strings.ToUpper(name)
	if rest, ok := strings.CutPrefix(u, "FLUENTD_"); ok {
		u = EnvPrefix + rest
	}
	switch {
	case !strings.HasPrefix(u, EnvPrefix):
		return ""
	case known[u]:
		return u
	case envAddrNames[u]:
		return EnvPrefix + "ADDR (host:port in one)"
	case movedEnv(u) != "":
		return movedEnv(u)
	}
	return nearEnvName(u)
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
			errs = append(errs, fmt.Sprintf("%s=%s: %v", name, valueInError(v.Type(), s, false), err))
		}
	})
	for _, name := range slices.Sorted(maps.Keys(env)) { // what is left is not ours
		if moved := movedEnv(name); moved != "" {
			errs = append(errs, fmt.Sprintf("%s is not read: its setting is %s", name, moved))
		} else if near := nearEnvName(name); near != "" {
			errs = append(errs, fmt.Sprintf("%s is not a fluentcore variable: did you mean %s?", name, near))
		}
	}
	if len(errs) > 0 {
		return cfg, fmt.Errorf("fluentcore: environment: %s", strings.Join(errs, "; "))
	}
	return cfg, nil
}

// movedEnv returns, for the variable of a key of movedKeys, the variable that holds its
// setting; "" for any other name.
func movedEnv(name string) string {
	variable := func(key string) string { return EnvPrefix + strings.ToUpper(strings.ReplaceAll(key, ".", "_")) }
	for old, now := range movedKeys {
		if name == variable(old) {
			return variable(now)
		}
		if rest, ok := strings.CutPrefix(name, variable(old)+"_"); ok && slices.Contains(envNames(), variable(now)+"_"+rest) {
			return variable(now) + "_" + rest // a group's key, such as tls.ca_file
		}
	}
	return ""
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
		if f.Kind() == reflect.Struct && !reflect.PointerTo(f.Type()).Implements(textUnmarshaler) {
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
	case reflect.Map: // Metrics.ConstLabels
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
