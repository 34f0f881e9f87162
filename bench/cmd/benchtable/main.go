// Command benchtable turns the raw output of make bench into the tables of bench/README.md,
// the summary tables of docs/benchmarks.md, the targets table of bench/TARGETS.md and the
// chart bench/chart.png. Every figure in them comes from the raw files; nothing is typed by
// hand.
//
//	go run ./cmd/benchtable -results results -readme README.md -top ../docs/benchmarks.md -targets TARGETS.md -chart chart.png
//
// Inputs in -results: raw.txt (the main benchmark run), raw-ibm.txt (the run built with
// -tags ibm), throughput.txt (cmd/throughput) and forwardtest.txt (forwardtest's own
// BenchmarkCountOnly); all but raw.txt are optional. Each output file must hold the markers
// it replaces between: <!-- benchtable:begin --> and <!-- benchtable:end --> in -readme,
// <!-- benchtable:summary:begin --> and <!-- benchtable:summary:end --> in -top,
// <!-- benchtable:targets:begin --> and <!-- benchtable:targets:end --> in -targets. An
// empty -readme, -top, -targets or -chart skips that output. Exit status 1 on any error.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	dir := flag.String("results", "results", "directory with raw.txt, raw-ibm.txt, throughput.txt, forwardtest.txt")
	var out outputs
	flag.StringVar(&out.readme, "readme", "README.md", "file whose benchtable section is regenerated")
	flag.StringVar(&out.top, "top", "", "document whose summary section is regenerated (docs/benchmarks.md)")
	flag.StringVar(&out.targets, "targets", "", "document whose targets section is regenerated (bench/TARGETS.md)")
	flag.StringVar(&out.chart, "chart", "chart.png", "chart image to write")
	flag.Parse()
	if err := run(*dir, out); err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(1)
	}
}

// outputs are the files run writes; an empty name skips that output.
type outputs struct {
	readme, top, targets, chart string
}

func run(dir string, out outputs) error {
	rs := &results{}
	for _, in := range []struct {
		label, file string
		optional    bool
	}{
		{"main", "raw.txt", false},
		{"ibm", "raw-ibm.txt", true},
		{"throughput", "throughput.txt", true},
		{"forwardtest", "forwardtest.txt", true},
		{"encoder", "encoder.txt", true},
	} {
		if err := rs.read(in.label, filepath.Join(dir, in.file), in.optional); err != nil {
			return err
		}
	}
	if len(rs.all("main", "AddingFields")) == 0 {
		return errors.New("no AddingFields results in raw.txt")
	}
	d := &doc{rs: rs}
	for _, sec := range []struct {
		path, marker string
		content      func() string
	}{
		{out.readme, "benchtable", d.full},
		{out.top, "benchtable:summary", d.summary},
		{out.targets, "benchtable:targets", d.targetsSection},
	} {
		if sec.path == "" {
			continue
		}
		if err := replaceBetween(sec.path, "<!-- "+sec.marker+":begin -->", "<!-- "+sec.marker+":end -->", sec.content()); err != nil {
			return err
		}
	}
	if out.chart != "" {
		png, err := d.chart()
		if err != nil {
			return err
		}
		if err := os.WriteFile(out.chart, png, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// replaceBetween replaces what lies between the two markers in the file.
func replaceBetween(path, begin, end, content string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	i := bytes.Index(b, []byte(begin))
	j := bytes.Index(b, []byte(end))
	if i < 0 || j < i {
		return fmt.Errorf("%s: markers %s ... %s not found", path, begin, end)
	}
	var out bytes.Buffer
	out.Write(b[:i+len(begin)])
	out.WriteString("\n")
	out.WriteString(strings.TrimSpace(content))
	out.WriteString("\n")
	out.Write(b[j:])
	return os.WriteFile(path, out.Bytes(), 0o644)
}
