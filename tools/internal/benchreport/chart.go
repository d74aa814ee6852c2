package main

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// Chart geometry, in SVG user units (pixels).
const (
	chartWidth   = 1000
	labelWidth   = 260
	panelWidth   = 290
	panelGap     = 110
	rowHeight    = 22
	barHeight    = 14
	headerHeight = 70
	footerHeight = 40
)

var groupColours = []string{"#4c78a8", "#f58518"}

// logAxis maps a positive value to a position on a decade scale.
type logAxis struct {
	lo, hi float64 // decades: 10^lo .. 10^hi
	x0, w  float64
}

func newLogAxis(min, max, x0, w float64) logAxis {
	return logAxis{lo: math.Floor(math.Log10(min)), hi: math.Ceil(math.Log10(max)), x0: x0, w: w}
}

func (a logAxis) at(v float64) float64 {
	if v <= 0 {
		return a.x0
	}
	f := (math.Log10(v) - a.lo) / (a.hi - a.lo)
	return a.x0 + math.Max(0, math.Min(1, f))*a.w
}

// svgChart draws two panels of horizontal bars, one row per scenario:
// IDs per second (log scale) and latency (log scale; the bar is the p50,
// or the mean per call when there is no p50, and a whisker reaches the
// p99).
func svgChart(rows []row, title string) string {
	var b strings.Builder
	height := headerHeight + len(rows)*rowHeight + footerHeight
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", chartWidth, height, chartWidth, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="10" y="20" font-size="15" font-weight="bold">%s</text>`+"\n", html.EscapeString(title))

	minRate, maxRate := math.Inf(1), 0.0
	minLat, maxLat := math.Inf(1), 0.0
	for _, r := range rows {
		minRate, maxRate = math.Min(minRate, r.rate.median), math.Max(maxRate, r.rate.median)
		for _, s := range []stat{r.p50, r.p99, r.mean} {
			if s.n > 0 && s.median > 0 {
				minLat, maxLat = math.Min(minLat, s.median), math.Max(maxLat, s.median)
			}
		}
	}
	if maxRate == 0 {
		minRate, maxRate = 1, 10
	}
	if maxLat == 0 {
		minLat, maxLat = 1, 10
	}
	rateAxis := newLogAxis(minRate, maxRate, labelWidth, panelWidth)
	latAxis := newLogAxis(minLat, maxLat, labelWidth+panelWidth+panelGap, panelWidth)
	top, bottom := float64(headerHeight), float64(headerHeight+len(rows)*rowHeight)

	drawAxis := func(a logAxis, caption string, unit func(float64) string) {
		fmt.Fprintf(&b, `<text x="%.0f" y="%d" font-weight="bold">%s</text>`+"\n", a.x0, headerHeight-30, html.EscapeString(caption))
		for d := a.lo; d <= a.hi; d++ {
			x := a.at(math.Pow(10, d))
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="#ddd"/>`+"\n", x, top-5, x, bottom)
			fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle" fill="#555">%s</text>`+"\n", x, top-9, unit(math.Pow(10, d)))
		}
	}
	drawAxis(rateAxis, "IDs per second (log scale; hatched: echo, requests/s)", compactRate)
	drawAxis(latAxis, "latency (log): bar p50 (or mean), whisker p99", formatMicros)
	fmt.Fprintln(&b, `<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#bbb"/><line x1="0" y1="0" x2="0" y2="6" stroke="#777" stroke-width="3"/></pattern></defs>`)

	for i, r := range rows {
		y := top + float64(i*rowHeight)
		mid := y + rowHeight/2
		colour := groupColours[r.group%len(groupColours)]
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n", labelWidth-8, mid, html.EscapeString(r.short))
		fill := colour
		if !r.isIDs {
			fill = "url(#hatch)"
		}
		x1 := rateAxis.at(r.rate.median)
		fmt.Fprintf(&b, `<rect x="%d" y="%.1f" width="%.1f" height="%d" fill="%s"/>`+"\n", labelWidth, mid-barHeight/2, x1-labelWidth, barHeight, fill)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" dominant-baseline="middle" font-size="11">%s</text>`+"\n", x1+4, mid, formatRate(r.rate.median))

		lat := r.p50
		if lat.n == 0 {
			lat = r.mean
		}
		if lat.n == 0 {
			continue
		}
		lx1 := latAxis.at(lat.median)
		fmt.Fprintf(&b, `<rect x="%.0f" y="%.1f" width="%.1f" height="%d" fill="%s" fill-opacity="0.7"/>`+"\n", latAxis.x0, mid-barHeight/2, lx1-latAxis.x0, barHeight, colour)
		end := lx1
		if r.p99.n > 0 {
			end = latAxis.at(r.p99.median)
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333"/><line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333"/>`+"\n", lx1, mid, end, mid, end, mid-4, end, mid+4)
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" dominant-baseline="middle" font-size="11">%s</text>`+"\n", math.Max(lx1, end)+4, mid, formatMicros(lat.median))
	}
	for g, name := range groups {
		fmt.Fprintf(&b, `<rect x="%d" y="%.0f" width="10" height="10" fill="%s"/><text x="%d" y="%.0f">%s</text>`+"\n",
			10, bottom+12+float64(g*14), groupColours[g], 26, bottom+21+float64(g*14), html.EscapeString(plain(name)))
	}
	fmt.Fprintln(&b, "</svg>")
	return b.String()
}

// compactRate labels a decade of the rate axis: 1k, 10M.
func compactRate(v float64) string {
	switch {
	case v >= 1e9:
		return fmt.Sprintf("%.0fG", v/1e9)
	case v >= 1e6:
		return fmt.Sprintf("%.0fM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.0fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}

// plain drops Markdown code marks from a label.
func plain(s string) string { return strings.ReplaceAll(s, "`", "") }
