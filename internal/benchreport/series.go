package main

import (
	"fmt"
	"html"
	"math"
	"slices"
	"strconv"
	"strings"
)

// point is one second of a sustained benchmark (dispenser's
// BenchmarkSustained with UID_BENCH_SERIES set).
type point struct {
	second int
	rate   float64 // IDs received in that second
	ahead  int64   // how far the newest IDs ran ahead of the clock (-99: none)
}

// parseSeries reads the tab-separated lines benchmark, second, IDs/s,
// seconds ahead.
func parseSeries(text string) (map[string][]point, error) {
	out := map[string][]point{}
	for i, line := range strings.Split(strings.TrimSpace(text), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 4 {
			return nil, fmt.Errorf("series line %d: %q is not 4 tab-separated fields", i+1, line)
		}
		sec, err1 := strconv.Atoi(f[1])
		rate, err2 := strconv.ParseFloat(f[2], 64)
		ahead, err3 := strconv.ParseInt(f[3], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			return nil, fmt.Errorf("series line %d: %q: numbers expected", i+1, line)
		}
		name := strings.TrimPrefix(f[0], "BenchmarkSustained/")
		out[name] = append(out[name], point{second: sec, rate: rate, ahead: ahead})
	}
	return out, nil
}

var seriesColours = []string{"#888888", "#4c78a8", "#f58518", "#54a24b", "#e45756"}

// svgSeries draws the IDs per second of each scenario over time, and
// below it how far ahead of the wall clock its IDs ran (responders that
// are not generators have no such line).
func svgSeries(s map[string][]point, title string) string {
	const (
		width, left, right = 1000, 70, 230
		top, rateH, gap    = 50, 260, 60
		aheadH, bottom     = 120, 40
	)
	height := top + rateH + gap + aheadH + bottom
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range s {
			if !yield(k) {
				return
			}
		}
	})
	maxSec, maxRate := 1, 1.0
	for _, pts := range s {
		for _, p := range pts {
			maxSec = max(maxSec, p.second)
			maxRate = math.Max(maxRate, p.rate)
		}
	}
	maxRate = niceCeil(maxRate)
	plotW := float64(width - left - right)
	x := func(sec int) float64 { return left + float64(sec)/float64(maxSec)*plotW }
	yRate := func(r float64) float64 { return top + rateH - r/maxRate*rateH }
	const aheadLo, aheadHi = -2.0, 3.0
	yAhead := func(a int64) float64 {
		v := math.Max(aheadLo, math.Min(aheadHi, float64(a)))
		return top + rateH + gap + aheadH - (v-aheadLo)/(aheadHi-aheadLo)*aheadH
	}

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="10" y="20" font-size="15" font-weight="bold">%s</text>`+"\n", html.EscapeString(title))
	// Rate axis.
	fmt.Fprintf(&b, `<text x="%d" y="%d" font-weight="bold">IDs received per second</text>`+"\n", left, top-10)
	for i := 0; i <= 4; i++ {
		r := maxRate * float64(i) / 4
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/><text x="%d" y="%.1f" text-anchor="end" dominant-baseline="middle" fill="#555">%s</text>`+"\n",
			left, yRate(r), left+plotW, yRate(r), left-6, yRate(r), compactRateLinear(r))
	}
	// Ahead axis: the 2 s bound drawn in red.
	fmt.Fprintf(&b, `<text x="%d" y="%d" font-weight="bold">seconds the newest IDs ran ahead of the wall clock (bound: 2)</text>`+"\n", left, top+rateH+gap-10)
	for a := int64(aheadLo); a <= int64(aheadHi); a++ {
		colour := "#ddd"
		if a == 2 {
			colour = "#e45756"
		}
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"/><text x="%d" y="%.1f" text-anchor="end" dominant-baseline="middle" fill="#555">%d</text>`+"\n",
			left, yAhead(a), left+plotW, yAhead(a), colour, left-6, yAhead(a), a)
	}
	// Time axis.
	step := max(1, maxSec/10)
	for sec := 0; sec <= maxSec; sec += step {
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%ds</text>`+"\n", x(sec), height-bottom+16, sec)
	}
	for i, name := range names {
		colour := seriesColours[i%len(seriesColours)]
		var rate, ahead []string
		for _, p := range s[name] {
			rate = append(rate, fmt.Sprintf("%.1f,%.1f", x(p.second), yRate(p.rate)))
			if p.ahead > -99 {
				ahead = append(ahead, fmt.Sprintf("%.1f,%.1f", x(p.second), yAhead(p.ahead)))
			}
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", colour, strings.Join(rate, " "))
		if len(ahead) > 0 {
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", colour, strings.Join(ahead, " "))
		}
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="10" height="10" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n",
			width-right+15, top+i*18, colour, width-right+31, top+i*18+9, html.EscapeString(name))
	}
	fmt.Fprintln(&b, "</svg>")
	return b.String()
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

// compactRateLinear labels a rate axis tick: 0, 2.5M, 10M.
func compactRateLinear(v float64) string {
	switch {
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', -1, 64) + "M"
	case v >= 1e3:
		return strconv.FormatFloat(v/1e3, 'f', -1, 64) + "k"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}
