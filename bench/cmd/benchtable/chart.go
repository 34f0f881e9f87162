package main

import (
	"bytes"
	"errors"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
	"strings"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// The chart: AddingFields, for each contender, ns/op and events/s delivered, single (one
// goroutine) and parallel, on log scales. Drawn with image/png and x/image's basic font.

var (
	colSingle   = color.RGBA{0x1f, 0x77, 0xb4, 0xff}
	colParallel = color.RGBA{0xff, 0x7f, 0x0e, 0xff}
	colGrid     = color.RGBA{0xdd, 0xdd, 0xdd, 0xff}
	colText     = color.RGBA{0x22, 0x22, 0x22, 0xff}
)

const (
	labelW = 190
	panelW = 400
	gapW   = 60
	rowH   = 34
	topH   = 64
	botH   = 40
)

type bar struct {
	label    string
	vals     [2]float64 // single, parallel; 0 = none
	discards bool       // the reference: events/s are entries discarded, not delivered
}

func (d *doc) chart() ([]byte, error) {
	var bars []bar
	for _, c := range contenders {
		b := bar{label: c.name, discards: c.name == ref}
		var nsv, evv [2]float64
		for i, mode := range []string{"single", "parallel"} {
			g, _ := d.lookup("AddingFields", c.name, map[string]string{"mode": mode})
			nsv[i], evv[i] = medv(g, "ns/op"), medv(g, "events/s")
		}
		if nsv[0] == 0 && nsv[1] == 0 {
			continue
		}
		b.vals = nsv
		bars = append(bars, b)
		b.vals = evv
		bars = append(bars, b)
	}
	if len(bars) == 0 {
		return nil, errors.New("chart: no AddingFields results")
	}
	n := len(bars) / 2
	w, h := labelW+2*panelW+gapW+20, topH+n*rowH+botH
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.Draw(img, img.Bounds(), image.White, image.Point{}, draw.Src)

	text(img, 10, 18, "AddingFields: fluentcore vs zap's own cores and the Go fluentd clients (medians; log scales)")
	var nsBars, evBars []bar
	for i := range bars {
		if i%2 == 0 {
			nsBars = append(nsBars, bars[i])
		} else {
			evBars = append(evBars, bars[i])
		}
	}
	panel(img, labelW, "ns/op (lower is better)", nsBars, ns)
	panel(img, labelW+panelW+gapW, "events/s delivered (higher is better)", evBars, rate)
	for i, b := range nsBars {
		text(img, 10, topH+i*rowH+21, b.label)
	}
	// Legend.
	y := h - 14
	fill(img, image.Rect(10, y-9, 22, y+1), colSingle)
	text(img, 28, y, "single goroutine")
	fill(img, image.Rect(160, y-9, 172, y+1), colParallel)
	text(img, 178, y, "parallel (RunParallel, SetParallelism(64))")
	text(img, 500, y, "zap-json-discard: entries written to io.Discard")

	var out bytes.Buffer
	if err := png.Encode(&out, img); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// panel draws one log-scale bar panel at x0.
func panel(img *image.RGBA, x0 int, title string, bars []bar, format func(float64) string) {
	lo, hi := math.Inf(1), 0.0
	for _, b := range bars {
		for _, v := range b.vals {
			if v > 0 {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
	}
	if hi == 0 {
		return
	}
	dlo, dhi := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if dhi == dlo {
		dhi++
	}
	const valW = 70 // room for the value label
	plotW := panelW - valW
	xOf := func(v float64) int {
		return x0 + int(float64(plotW)*(math.Log10(v)-dlo)/(dhi-dlo))
	}
	text(img, x0, 44, title)
	y0, y1 := topH, topH+len(bars)*rowH
	for e := dlo; e <= dhi; e++ {
		x := xOf(math.Pow(10, e))
		fill(img, image.Rect(x, y0, x+1, y1), colGrid)
		text(img, x-10, y1+14, strings.NewReplacer(".00 ", " ", ".0 ", " ").Replace(format(math.Pow(10, e))))
	}
	for i, b := range bars {
		for j, v := range b.vals {
			if v <= 0 {
				continue
			}
			col := colSingle
			if j == 1 {
				col = colParallel
			}
			y := y0 + i*rowH + 4 + j*13
			x := xOf(v)
			fill(img, image.Rect(x0, y, max(x, x0+1), y+12), col)
			text(img, max(x, x0)+4, y+10, format(v))
		}
	}
}

func fill(img *image.RGBA, r image.Rectangle, c color.Color) {
	draw.Draw(img, r, &image.Uniform{C: c}, image.Point{}, draw.Src)
}

// text draws s; the basic font has ASCII only, so µ and × are spelt u and x.
func text(img *image.RGBA, x, y int, s string) {
	s = strings.NewReplacer("µ", "u", "×", "x").Replace(s)
	dr := &font.Drawer{Dst: img, Src: &image.Uniform{C: colText}, Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
	dr.DrawString(s)
}
