package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ns formats a duration given in nanoseconds with three significant digits.
func ns(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1e9:
		return sig(v/1e9) + " s"
	case a >= 1e6:
		return sig(v/1e6) + " ms"
	case a >= 1e3:
		return sig(v/1e3) + " µs"
	}
	return sig(v) + " ns"
}

// rate formats events per second.
func rate(v float64) string {
	switch {
	case v >= 1e6:
		return sig(v/1e6) + " M/s"
	case v >= 1e3:
		return sig(v/1e3) + " k/s"
	}
	return sig(v) + " /s"
}

// bytesIEC formats a byte count.
func bytesIEC(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 1<<20:
		return sig(v/(1<<20)) + " MiB"
	case a >= 1<<10:
		return sig(v/(1<<10)) + " KiB"
	}
	return strconv.FormatFloat(v, 'f', 0, 64) + " B"
}

// sig formats v with three significant digits, without exponent.
func sig(v float64) string {
	a := math.Abs(v)
	switch {
	case a == 0:
		return "0"
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 0.01:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

// ratio formats a ratio such as 0.61×.
func ratio(v float64) string { return sig(v) + "×" }

// count formats an integer with thousands separators.
func count(v float64) string {
	s := strconv.FormatFloat(math.Round(v), 'f', 0, 64)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// share formats part of total: "0" when none, else a percentage.
func share(part, total float64) string {
	if part == 0 {
		return "0"
	}
	if total == 0 {
		return count(part)
	}
	p := 100 * part / total
	if p < 0.1 {
		return fmt.Sprintf("%s (<0.1%%)", count(part))
	}
	return fmt.Sprintf("%s%%", sig(p))
}

// table writes a markdown table.
type table struct {
	head []string
	rows [][]string
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) String() string {
	var b strings.Builder
	b.WriteString("| " + strings.Join(t.head, " | ") + " |\n|")
	for i := range t.head {
		if i == 0 {
			b.WriteString("---|")
		} else {
			b.WriteString("--:|")
		}
	}
	b.WriteByte('\n')
	for _, r := range t.rows {
		b.WriteString("| " + strings.Join(r, " | ") + " |\n")
	}
	return b.String()
}

// num formats a whole number as such, anything else with three significant digits.
func num(v float64) string {
	if v == math.Trunc(v) {
		return count(v)
	}
	return sig(v)
}

// pct formats a share as a percentage: 0 exactly as "0".
func pct(v float64) string {
	if v == 0 {
		return "0"
	}
	return sig(100*v) + " %"
}
