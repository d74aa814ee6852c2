package svgchart

import (
	"strings"
	"testing"
)

func TestChart(t *testing.T) {
	c := Chart{
		Title: "a <title>",
		Panels: []Panel{
			{Caption: "rate", Height: 100, Lines: []Line{{Colour: "#111", Points: []Point{{0, 10}, {1, 3000}, {2, 20}}}}},
			{Caption: "fixed", Height: 50, Lo: -2, Hi: 3, Ticks: []Tick{{Value: 2, Label: "2", Colour: "red"}},
				Lines: []Line{{Colour: "#222", Points: []Point{{0, 9}, {2, -9}}}}},
		},
		Legend: []LegendItem{{"one", "#111"}},
		Marks:  []Mark{{From: 0.5, To: 0.5, Colour: "#f00", Title: "kill9 d0#1"}, {From: 1, To: 1.5, Colour: "#0f0", Title: "cut & co", Row: 1}},
		Bands:  true,
	}
	svg := c.SVG()
	for _, want := range []string{
		"a &lt;title&gt;", "<title>kill9 d0#1</title>", "<title>cut &amp; co</title>",
		`stroke="red"`, ">5k<", // the auto range: NiceCeil(3000) = 5000, ticks at quarters
		">one<", ">2s<",
	} {
		if !strings.Contains(svg, want) {
			t.Errorf("no %q in\n%s", want, svg)
		}
	}
	if n := strings.Count(svg, "<polyline"); n != 2 {
		t.Errorf("%d polylines, want 2", n)
	}
	// The fixed panel clamps 9 and -9 to its edges: 3 is at its top (y
	// 210 = 50 top + 100 + 60 gap), -2 at its bottom (260).
	if !strings.Contains(svg, `points="70.0,210.0 770.0,260.0"`) {
		t.Errorf("clamped line not at the panel's edges:\n%s", svg)
	}
	// A mark shorter than a pixel is still drawn two pixels wide.
	if !strings.Contains(svg, `width="2.0"`) {
		t.Errorf("no two-pixel mark:\n%s", svg)
	}
}

func TestNiceCeil(t *testing.T) {
	for v, want := range map[float64]float64{1: 1, 1.5: 2, 3: 5, 7: 10, 420: 500, 1e6: 1e6} {
		if got := NiceCeil(v); got != want {
			t.Errorf("NiceCeil(%v) = %v, want %v", v, got, want)
		}
	}
}

// The strip: one row per label under the panels, each mark in its row;
// without Bands nothing is drawn across the panels.
func TestChartStrip(t *testing.T) {
	c := Chart{
		Panels:   []Panel{{Caption: "rate", Height: 100, Lines: []Line{{Colour: "#111", Points: []Point{{0, 1}, {10, 2}}}}}},
		Marks:    []Mark{{From: 1, To: 2, Colour: "#f00", Title: "a"}, {From: 5, To: 6, Colour: "#0f0", Title: "b", Row: 1}},
		MarkRows: []string{"kill9", "cut"},
	}
	svg := c.SVG()
	// Panel 50..150, strip from 180 (30 below), rows of 14: row 1's bar at 196.
	for _, want := range []string{">kill9<", ">cut<", `y="182" width="70.0" height="10" fill="#f00"`, `y="196" width="70.0" height="10" fill="#0f0"`, `height="248"`} {
		if !strings.Contains(svg, want) {
			t.Errorf("no %q in\n%s", want, svg)
		}
	}
	if strings.Contains(svg, `fill-opacity="0.25"`) {
		t.Error("bands drawn without Bands")
	}
}
