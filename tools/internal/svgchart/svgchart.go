// Package svgchart draws the repository's time-series charts as plain
// SVG: panels stacked over one time axis, each with its own value scale,
// a legend in the right margin and, optionally, spans of time marked
// across every panel. internal/benchreport draws docs/sustained.svg with
// it, the soak its run's chart (IDs per second and failed calls, with
// the faults marked). No dependencies: the files are small, diffable and
// render on GitHub.
package svgchart

import (
	"fmt"
	"html"
	"math"
	"strconv"
	"strings"
)

// Point is one sample: X in seconds, Y in the panel's unit.
type Point struct{ X, Y float64 }

// Line is one series of a panel.
type Line struct {
	Colour string
	Points []Point
}

// Tick is one labelled value line of a panel.
type Tick struct {
	Value  float64
	Label  string
	Colour string // default light grey
}

// Panel is one value scale.
type Panel struct {
	Caption string
	Height  int
	// Lo..Hi is the value range; values outside are drawn at its edge.
	// Hi 0: NiceCeil of the highest value (at least 1), Lo then 0.
	Lo, Hi float64
	// Ticks default to five at the quarters of the range, labelled with
	// Compact.
	Ticks []Tick
	Lines []Line
}

// LegendItem names a colour.
type LegendItem struct{ Name, Colour string }

// Mark is a span of time (at least two pixels wide): a band across every
// panel when Chart.Bands is set, and a bar in its row of the strip under
// the panels when Chart.MarkRows names the rows. Title is shown on hover.
type Mark struct {
	From, To float64
	Colour   string
	Title    string
	Row      int // index into Chart.MarkRows
}

// Chart is panels over one time axis.
type Chart struct {
	Title  string
	Panels []Panel
	Legend []LegendItem
	Marks  []Mark
	// Bands draws the marks across the panels: clear for a few, a wash
	// of colour for hundreds, which the strip shows better.
	Bands bool
	// MarkRows labels the rows of a strip of marks under the panels (none:
	// no strip).
	MarkRows []string
	// Label writes a time-axis label (default "12s").
	Label func(seconds float64) string
	XMax  float64 // default: the highest X of any point (at least 1)
}

// Geometry, in SVG user units (pixels).
const (
	width, left, right = 1000, 70, 230
	top, gap, bottom   = 50, 60, 40
	stripGap, stripRow = 30, 14
)

// SVG renders the chart.
func (c Chart) SVG() string {
	height := top + bottom
	for i, p := range c.Panels {
		if i > 0 {
			height += gap
		}
		height += p.Height
	}
	panelsBottom := height - bottom
	if len(c.MarkRows) > 0 {
		height += stripGap + len(c.MarkRows)*stripRow
	}
	xMax := c.XMax
	if xMax <= 0 {
		xMax = 1
		for _, p := range c.Panels {
			for _, l := range p.Lines {
				for _, pt := range l.Points {
					xMax = math.Max(xMax, pt.X)
				}
			}
		}
	}
	label := c.Label
	if label == nil {
		label = func(s float64) string { return fmt.Sprintf("%.0fs", s) }
	}
	plotW := float64(width - left - right)
	x := func(sec float64) float64 { return left + sec/xMax*plotW }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="10" y="20" font-size="15" font-weight="bold">%s</text>`+"\n", html.EscapeString(c.Title))

	// The bands first, under the panels' lines.
	for _, m := range c.Marks {
		if c.Bands {
			x0, x1 := x(m.From), x(m.To)
			fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s" fill-opacity="0.25"><title>%s</title></rect>`+"\n",
				x0, top, math.Max(x1-x0, 2), panelsBottom-top, m.Colour, html.EscapeString(m.Title))
		}
	}
	if len(c.MarkRows) > 0 {
		stripTop := panelsBottom + stripGap
		for i, name := range c.MarkRows {
			y := stripTop + i*stripRow
			fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%.1f" y2="%d" stroke="#eee"/><text x="%.1f" y="%d" dominant-baseline="middle" font-size="10" fill="#555">%s</text>`+"\n",
				left, y+stripRow/2, left+plotW, y+stripRow/2, left+plotW+6, y+stripRow/2, html.EscapeString(name))
		}
		for _, m := range c.Marks {
			x0, x1 := x(m.From), x(m.To)
			fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"><title>%s</title></rect>`+"\n",
				x0, stripTop+m.Row*stripRow+2, math.Max(x1-x0, 2), stripRow-4, m.Colour, html.EscapeString(m.Title))
		}
	}

	y0 := top
	for i, p := range c.Panels {
		if i > 0 {
			y0 += gap
		}
		lo, hi := p.Lo, p.Hi
		if hi == 0 {
			lo, hi = 0, 1.0
			for _, l := range p.Lines {
				for _, pt := range l.Points {
					hi = math.Max(hi, pt.Y)
				}
			}
			hi = NiceCeil(hi)
		}
		base := float64(y0 + p.Height)
		y := func(v float64) float64 {
			v = math.Max(lo, math.Min(hi, v))
			return base - (v-lo)/(hi-lo)*float64(p.Height)
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-weight="bold">%s</text>`+"\n", left, y0-10, html.EscapeString(p.Caption))
		ticks := p.Ticks
		if ticks == nil {
			for q := 0; q <= 4; q++ {
				v := lo + (hi-lo)*float64(q)/4
				ticks = append(ticks, Tick{Value: v, Label: Compact(v)})
			}
		}
		for _, t := range ticks {
			colour := t.Colour
			if colour == "" {
				colour = "#ddd"
			}
			fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"/><text x="%d" y="%.1f" text-anchor="end" dominant-baseline="middle" fill="#555">%s</text>`+"\n",
				left, y(t.Value), left+plotW, y(t.Value), colour, left-6, y(t.Value), html.EscapeString(t.Label))
		}
		for _, l := range p.Lines {
			pts := make([]string, 0, len(l.Points))
			for _, pt := range l.Points {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(pt.X), y(pt.Y)))
			}
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", l.Colour, strings.Join(pts, " "))
		}
		y0 += p.Height
	}

	// Time axis, under the panels and the strip.
	step := math.Max(1, math.Floor(xMax/10))
	for sec := 0.0; sec <= xMax; sec += step {
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%s</text>`+"\n", x(sec), height-bottom+16, html.EscapeString(label(sec)))
	}
	for i, item := range c.Legend {
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="10" height="10" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n",
			width-right+15, top+i*18, item.Colour, width-right+31, top+i*18+9, html.EscapeString(item.Name))
	}
	fmt.Fprintln(&b, "</svg>")
	return b.String()
}

// NiceCeil rounds v up to 1, 2 or 5 times a power of ten.
func NiceCeil(v float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

// Compact labels a value: 0, 2.5M, 10k.
func Compact(v float64) string {
	switch {
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', -1, 64) + "M"
	case v >= 1e3:
		return strconv.FormatFloat(v/1e3, 'f', -1, 64) + "k"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}
