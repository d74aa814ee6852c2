package main

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/uid-dispenser/uid-dispenser/tools/internal/plotsvg"
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
		name := strings.TrimPrefix(strings.TrimPrefix(f[0], "BenchmarkSustained/"), "BenchmarkSeqSustained/")
		out[name] = append(out[name], point{second: sec, rate: rate, ahead: ahead})
	}
	return out, nil
}

var seriesColours = []string{"#888888", "#4c78a8", "#f58518", "#54a24b", "#e45756"}

// seriesName is a scenario's plain name in the legend:
// responder=dispenser/instances=3/store=mysql-2 is "3 dispensers, MySQL",
// responder=dispenser/store=kv (BenchmarkSeqSustained) "1 dispenser, KV".
// A name of another form is kept as it is.
func seriesName(bench string) string {
	name := bench
	if i := strings.LastIndexByte(name, '-'); i > 0 {
		if _, err := strconv.Atoi(name[i+1:]); err == nil {
			name = name[:i] // the GOMAXPROCS suffix
		}
	}
	if name == "responder=counter" {
		return "bare responder (the limit)"
	}
	rest, ok := strings.CutPrefix(name, "responder=dispenser/")
	if !ok {
		return bench
	}
	instances, store := "1", rest
	if r, ok := strings.CutPrefix(rest, "instances="); ok {
		instances, store, _ = strings.Cut(r, "/")
	}
	n, err := strconv.Atoi(instances)
	if err != nil {
		return bench
	}
	switch store {
	case "", "store=kv":
		store = "KV"
	case "store=mysql":
		store = "MySQL"
	default:
		return bench
	}
	return fmt.Sprintf("%s, %s", plural(n, "dispenser"), store)
}

// aheadBound is the dispensers' default bound on running ahead of the
// clock, in seconds (DISPENSER_MAX_AHEAD).
const aheadBound = 2

// svgSeries draws the IDs per second of each scenario over time, and
// below it how far ahead of the wall clock its IDs ran (responders that
// are not generators have no such line).
func svgSeries(s map[string][]point, title string) ([]byte, error) {
	names := slices.Sorted(maps.Keys(s))
	rate := plotsvg.NewPlot("IDs received per second", "", "IDs/s")
	rate.Y.Min = 0
	ahead := plotsvg.NewPlot("how far the newest IDs ran ahead of the wall clock", "seconds into the scenario", "seconds ahead")
	ahead.Y.Min, ahead.Y.Max = -2, 3
	rate.X.Min, ahead.X.Min = 0, 0
	legend := plotsvg.NewLegend()
	for i, name := range names {
		colour := seriesColours[i%len(seriesColours)]
		var r, a plotter.XYs
		for _, p := range s[name] {
			r = append(r, plotter.XY{X: float64(p.second), Y: p.rate})
			if p.ahead > -99 {
				a = append(a, plotter.XY{X: float64(p.second), Y: float64(p.ahead)})
			}
		}
		line := plotsvg.Line(r, colour, 1.5)
		rate.Add(line)
		if len(a) > 0 {
			ahead.Add(plotsvg.Line(a, colour, 1.5))
		}
		legend.Add(seriesName(name), line)
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, pts := range s {
		for _, p := range pts {
			lo, hi = math.Min(lo, float64(p.second)), math.Max(hi, float64(p.second))
		}
	}
	bound := plotsvg.Line(plotter.XYs{{X: lo, Y: aheadBound}, {X: hi, Y: aheadBound}}, "#e45756", 1)
	bound.Dashes = []vg.Length{4, 3}
	ahead.Add(bound)
	legend.Add(fmt.Sprintf("bound: %d s ahead", aheadBound), bound)
	return plotsvg.Figure{
		Title:  title,
		Width:  720,
		Panels: []plotsvg.Panel{{Plot: rate, Height: 230}, {Plot: ahead, Height: 130}},
		Legend: legend,
	}.SVG()
}
