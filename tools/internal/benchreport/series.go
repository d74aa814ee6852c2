package main

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/uid-dispenser/uid-dispenser/tools/internal/svgchart"
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
	names := slices.Sorted(maps.Keys(s))
	rate := svgchart.Panel{Caption: "IDs received per second", Height: 260}
	// The ahead axis: the 2 s bound drawn in red.
	ahead := svgchart.Panel{Caption: "seconds the newest IDs ran ahead of the wall clock (bound: 2)", Height: 120, Lo: -2, Hi: 3}
	for a := -2; a <= 3; a++ {
		t := svgchart.Tick{Value: float64(a), Label: strconv.Itoa(a)}
		if a == 2 {
			t.Colour = "#e45756"
		}
		ahead.Ticks = append(ahead.Ticks, t)
	}
	chart := svgchart.Chart{Title: title}
	for i, name := range names {
		colour := seriesColours[i%len(seriesColours)]
		r, a := svgchart.Line{Colour: colour}, svgchart.Line{Colour: colour}
		for _, p := range s[name] {
			r.Points = append(r.Points, svgchart.Point{X: float64(p.second), Y: p.rate})
			if p.ahead > -99 {
				a.Points = append(a.Points, svgchart.Point{X: float64(p.second), Y: float64(p.ahead)})
			}
		}
		rate.Lines = append(rate.Lines, r)
		if len(a.Points) > 0 {
			ahead.Lines = append(ahead.Lines, a)
		}
		chart.Legend = append(chart.Legend, svgchart.LegendItem{Name: name, Colour: colour})
	}
	chart.Panels = []svgchart.Panel{rate, ahead}
	return chart.SVG()
}
