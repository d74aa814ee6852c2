package main

import (
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/uid-dispenser/uid-dispenser/tools/internal/plotsvg"
)

// groupColours colour the groups of scenarios; echoColour is the echo
// service's rows (requests, not IDs).
var (
	groupColours = []string{"#4c78a8", "#54a24b", "#e45756", "#f58518"}
	echoColour   = "#aaaaaa"
)

// groupLegend names the groups in the chart's legend (groups, shorter).
var groupLegend = []string{"nats CLI, one dispenser", "Go client beside an echo", "tracing, 8 clients", "Go, bound off (bursts)"}

// bars draws a horizontal bar per row from the axis to value (none where
// value is 0), a whisker from it to whisker (where not 0) and the
// label of the value after them. Row i sits at y = i (plotsvg.Rows).
type bars struct {
	value, whisker []float64
	colour         []string
	label          func(float64) string
}

// Plot implements plot.Plotter.
func (b bars) Plot(c draw.Canvas, p *plot.Plot) {
	x, y := p.Transforms(&c)
	sty := plotsvg.TextStyle(8)
	sty.YAlign = draw.YCenter
	for i, v := range b.value {
		if v <= 0 {
			continue
		}
		mid := y(float64(i))
		half := (y(float64(i)-0.3) - y(float64(i)+0.3)) / 2
		half = vg.Length(math.Abs(float64(half)))
		end := x(v)
		c.SetColor(plotsvg.Hex(b.colour[i]))
		c.Fill(vg.Rectangle{Min: vg.Point{X: c.Min.X, Y: mid - half}, Max: vg.Point{X: end, Y: mid + half}}.Path())
		if w := b.whisker[i]; w > 0 {
			we := x(w)
			line := draw.LineStyle{Color: plotsvg.Hex("#333333"), Width: 0.8}
			c.StrokeLine2(line, end, mid, we, mid)
			c.StrokeLine2(line, we, mid-half/2, we, mid+half/2)
			end = max(end, we)
		}
		c.FillText(sty, vg.Point{X: end + 3, Y: mid}, b.label(v))
	}
}

// logRange is the decades around lo..hi, with room at the top for the
// labels after the longest bar.
func logRange(lo, hi float64) (float64, float64) {
	if hi <= 0 {
		return 1, 10
	}
	return math.Pow(10, math.Floor(math.Log10(lo))), math.Pow(10, math.Ceil(math.Log10(hi*4)))
}

// svgChart draws two panels of horizontal bars, one row per scenario:
// IDs per second (log scale) and latency (log scale; the bar is the p50,
// or the mean per call when there is no p50, and a whisker reaches the
// p99).
func svgChart(rows []row, title string) ([]byte, error) {
	names := make([]string, len(rows))
	blank := make([]string, len(rows))
	rate := bars{value: make([]float64, len(rows)), whisker: make([]float64, len(rows)), colour: make([]string, len(rows)), label: formatRate}
	lat := bars{value: make([]float64, len(rows)), whisker: make([]float64, len(rows)), colour: make([]string, len(rows)), label: formatMicros}
	minRate, maxRate := math.Inf(1), 0.0
	minLat, maxLat := math.Inf(1), 0.0
	for i, r := range rows {
		names[i] = r.short
		colour := groupColours[r.group%len(groupColours)]
		rate.colour[i], lat.colour[i] = colour, colour
		if !r.isIDs {
			rate.colour[i] = echoColour
		}
		if v := r.rate.median; r.rate.n > 0 && v > 0 {
			rate.value[i] = v
			minRate, maxRate = math.Min(minRate, v), math.Max(maxRate, v)
		}
		l := r.p50
		if l.n == 0 {
			l = r.mean
		}
		if l.n > 0 && l.median > 0 {
			lat.value[i] = l.median
			minLat, maxLat = math.Min(minLat, l.median), math.Max(maxLat, l.median)
			if r.p99.n > 0 && r.p99.median > 0 {
				lat.whisker[i] = r.p99.median
				maxLat = math.Max(maxLat, r.p99.median)
			}
		}
	}
	ratePlot := plotsvg.NewPlot("IDs per second (grey: echo service, requests/s)", "per second, log scale", "")
	latPlot := plotsvg.NewPlot("latency: bar p50 (or mean per call), whisker p99", "log scale", "")
	for _, p := range []*plot.Plot{ratePlot, latPlot} {
		p.X.Scale = plot.LogScale{}
	}
	ratePlot.X.Min, ratePlot.X.Max = logRange(minRate, maxRate)
	ratePlot.X.Tick.Marker = plotsvg.DecadeTicks{Label: plotsvg.Compact}
	latPlot.X.Min, latPlot.X.Max = logRange(minLat, maxLat)
	latPlot.X.Tick.Marker = plotsvg.DecadeTicks{Label: formatMicros}
	plotsvg.Rows(ratePlot, names)
	plotsvg.Rows(latPlot, blank)
	ratePlot.Add(rate)
	latPlot.Add(lat)
	legend := plotsvg.NewLegend()
	for g, name := range groupLegend {
		legend.Add(name, plotsvg.Swatch(groupColours[g]))
	}
	legend.Add("echo service", plotsvg.Swatch(echoColour))
	height := vg.Length(90 + 16*len(rows))
	return plotsvg.Figure{
		Title:      title,
		Width:      1000,
		Panels:     []plotsvg.Panel{{Plot: ratePlot, Height: height}, {Plot: latPlot, Height: height}},
		SideBySide: true,
		Legend:     legend,
	}.SVG()
}
