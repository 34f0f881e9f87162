// Command degradeplot draws the burst scenario of BenchmarkDegrade: info entries
// offered, delivered and shed per second, in 100 ms buckets, with the capacity measured in
// the same run, from the CSV the benchmark writes with -bench.degrade-series. make bench
// runs it:
//
//	go run ./cmd/degradeplot -series results/degrade-series.csv -out degrade.png
package main

import (
	"encoding/csv"
	"flag"
	"fmt"
	"image/color"
	"os"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

func main() {
	series := flag.String("series", "results/degrade-series.csv", "the burst scenario's series (CSV)")
	out := flag.String("out", "degrade.png", "image to write")
	flag.Parse()
	if err := run(*series, *out); err != nil {
		fmt.Fprintln(os.Stderr, "degradeplot:", err)
		os.Exit(1)
	}
}

// columns of the CSV, after t: offered, delivered, shed, queue_full, capacity.
var lines = []struct {
	col   int
	name  string
	color color.RGBA
	dash  bool
}{
	{1, "offered", color.RGBA{R: 120, G: 120, B: 120, A: 255}, false},
	{2, "delivered", color.RGBA{R: 30, G: 110, B: 200, A: 255}, false},
	{3, "shed (in Check)", color.RGBA{R: 220, G: 90, B: 30, A: 255}, false},
	{4, "queue_full", color.RGBA{R: 200, G: 0, B: 0, A: 255}, false},
	{5, "capacity (step 1)", color.RGBA{A: 255}, true},
}

func run(series, out string) error {
	f, err := os.Open(series)
	if err != nil {
		return err
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return err
	}
	if len(rows) < 2 {
		return fmt.Errorf("%s: no samples", series)
	}
	p := plot.New()
	p.Title.Text = "DegradeAdaptive: 2 s burst, then half the capacity (100 ms buckets)"
	p.X.Label.Text = "seconds"
	p.Y.Label.Text = "info entries / s (millions)"
	p.Legend.Top = true
	for _, l := range lines {
		pts := make(plotter.XYs, 0, len(rows)-1)
		for _, r := range rows[1:] {
			t, err1 := strconv.ParseFloat(r[0], 64)
			v, err2 := strconv.ParseFloat(r[l.col], 64)
			if err1 != nil || err2 != nil {
				return fmt.Errorf("%s: bad row %q", series, r)
			}
			pts = append(pts, plotter.XY{X: t, Y: v / 1e6})
		}
		ln, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		ln.Color = l.color
		ln.Width = vg.Points(1.5)
		if l.dash {
			ln.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		}
		p.Add(ln)
		p.Legend.Add(l.name, ln)
	}
	return p.Save(8*vg.Inch, 4*vg.Inch, out)
}
