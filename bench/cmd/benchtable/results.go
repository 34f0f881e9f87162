package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"golang.org/x/perf/benchfmt"
)

// result is one benchmark line: one run of one benchmark.
type result struct {
	iters int
	vals  map[string]float64 // by unit as printed: ns/op, B/op, events/s, ...
}

// group is every run of one benchmark in one input file.
type group struct {
	file  string            // input label: main, ibm, throughput, forwardtest
	bench string            // base name without "Benchmark": AddingFields
	keys  map[string]string // sub-benchmark keys: mode, contender, goroutines...
	pos   []string          // positional sub-benchmark parts
	runs  []result
}

func (g *group) key(k string) string { return g.keys[k] }

// median returns the median of unit over the runs that report it.
func (g *group) median(unit string) (float64, bool) {
	var v []float64
	for _, r := range g.runs {
		if x, ok := r.vals[unit]; ok {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return 0, false
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2], true
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2, true
}

// min returns the least of unit over the runs that report it.
func (g *group) min(unit string) (float64, bool) {
	m, ok := 0.0, false
	for _, r := range g.runs {
		if x, has := r.vals[unit]; has && (!ok || x < m) {
			m, ok = x, true
		}
	}
	return m, ok
}

// max returns the greatest of unit over the runs that report it.
func (g *group) max(unit string) (float64, bool) {
	m, ok := 0.0, false
	for _, r := range g.runs {
		if x, has := r.vals[unit]; has && (!ok || x > m) {
			m, ok = x, true
		}
	}
	return m, ok
}

// sum returns the total of unit over the runs.
func (g *group) sum(unit string) float64 {
	var s float64
	for _, r := range g.runs {
		s += r.vals[unit]
	}
	return s
}

// iters is the total number of iterations (log calls) over the runs.
func (g *group) iters() float64 {
	var s float64
	for _, r := range g.runs {
		s += float64(r.iters)
	}
	return s
}

// results is everything read from the input files.
type results struct {
	groups []*group
	config map[string]map[string]string // file label -> config key -> value (first seen)
}

// find returns the group of bench in file whose keys include every key of want.
func (rs *results) find(file, bench string, want map[string]string) *group {
	for _, g := range rs.groups {
		if g.file != file || g.bench != bench {
			continue
		}
		ok := true
		for k, v := range want {
			if g.keys[k] != v {
				ok = false
				break
			}
		}
		if ok {
			return g
		}
	}
	return nil
}

// all returns the groups of bench in file, in input order.
func (rs *results) all(file, bench string) []*group {
	var out []*group
	for _, g := range rs.groups {
		if g.file == file && g.bench == bench {
			out = append(out, g)
		}
	}
	return out
}

// read adds the results of one file in Go benchmark format. A missing optional file is
// skipped.
func (rs *results) read(label, path string, optional bool) error {
	f, err := os.Open(path)
	if err != nil {
		if optional && os.IsNotExist(err) {
			return nil
		}
		return err
	}
	defer f.Close()
	return rs.readFrom(label, path, f)
}

func (rs *results) readFrom(label, name string, r io.Reader) error {
	if rs.config == nil {
		rs.config = map[string]map[string]string{}
	}
	if rs.config[label] == nil {
		rs.config[label] = map[string]string{}
	}
	// Configuration lines are read here; only benchmark lines go on to the parser, because
	// clients print diagnostics of the form "word: text", which it would take for
	// configuration.
	var clean bytes.Buffer
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if k, v, ok := configLine(line); ok {
			if _, seen := rs.config[label][k]; !seen || k == "loadavg-end" {
				rs.config[label][k] = v
			}
		}
		if strings.HasPrefix(line, "Benchmark") {
			clean.WriteString(line)
			clean.WriteByte('\n')
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	byName := map[string]*group{}
	br := benchfmt.NewReader(&clean, name)
	for br.Scan() {
		switch rec := br.Result().(type) {
		case *benchfmt.SyntaxError:
			return rec
		case *benchfmt.Result:
			base, parts := rec.Name.Parts()
			full := string(base)
			g := &group{file: label, bench: string(base), keys: map[string]string{}}
			for _, p := range parts {
				s := string(p)
				if strings.HasPrefix(s, "-") {
					continue // GOMAXPROCS
				}
				full += s
				s = strings.TrimPrefix(s, "/")
				if k, v, ok := strings.Cut(s, "="); ok {
					g.keys[k] = v
				} else {
					g.pos = append(g.pos, s)
				}
			}
			if old, ok := byName[full]; ok {
				g = old
			} else {
				byName[full] = g
				rs.groups = append(rs.groups, g)
			}
			res := result{iters: rec.Iters, vals: map[string]float64{}}
			for _, v := range rec.Values {
				unit, val := v.Unit, v.Value
				if v.OrigUnit != "" {
					unit, val = v.OrigUnit, v.OrigValue
				}
				res.vals[unit] = val
			}
			g.runs = append(g.runs, res)
		}
	}
	if err := br.Err(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// configKeys are the configuration lines kept from the inputs: go test's own and the ones
// make bench writes about the machine.
var configKeys = []string{"goos", "goarch", "pkg", "cpu", "goversion", "ncpu", "gomaxprocs", "loadavg-start", "loadavg-end", "date", "count", "commit"}

func configLine(line string) (key, value string, ok bool) {
	k, v, ok := strings.Cut(line, ":")
	if !ok || !slices.Contains(configKeys, k) {
		return "", "", false
	}
	return k, strings.TrimSpace(v), true
}
