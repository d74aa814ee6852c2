package plotsvg

import (
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/plot/plotter"

	"github.com/uid-dispenser/uid-dispenser/tools/internal/plotsvg/plotsvgtest"
)

func TestTicks(t *testing.T) {
	var labels []string
	for _, tk := range (Ticks{}).Ticks(0, 2.6e7) {
		if tk.Label != "" {
			labels = append(labels, tk.Label)
		}
	}
	// (2.6e7 - 0) / 6 rounds up to a step of 5M.
	if want := []string{"0", "5M", "10M", "15M", "20M", "25M"}; !slices.Equal(labels, want) {
		t.Errorf("labels %q, want %q", labels, want)
	}
	if got := (Ticks{}).Ticks(3, 3); len(got) != 1 || got[0].Label != "3" {
		t.Errorf("an empty range: %v", got)
	}
	var decades []string
	for _, tk := range (DecadeTicks{Label: Compact}).Ticks(1e3, 1e6) {
		decades = append(decades, tk.Label)
	}
	if want := []string{"1k", "10k", "100k", "1M"}; !slices.Equal(decades, want) {
		t.Errorf("decades %q, want %q", decades, want)
	}
}

func TestCompact(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 2.5e6: "2.5M", 1e4: "10k", 3e9: "3G", -2: "-2", 750: "750"} {
		if got := Compact(v); got != want {
			t.Errorf("Compact(%v) = %q, want %q", v, got, want)
		}
	}
}

// A stacked figure renders as SVG whose texts are the title, the
// captions, the axis labels and the legend; fonts fall back to Arial.
func TestFigure(t *testing.T) {
	top, bottom := NewPlot("upper caption", "", "IDs/s"), NewPlot("lower caption", "seconds", "ahead")
	line := Line(plotter.XYs{{X: 0, Y: 1}, {X: 10, Y: 3e6}}, "#4c78a8", 1)
	top.Add(line)
	bottom.Add(Line(plotter.XYs{{X: 0, Y: -1}, {X: 10, Y: 2}}, "#f58518", 1))
	legend := NewLegend()
	legend.Add("a series name that is long", line)
	f := Figure{Title: "a title", Width: 600, Panels: []Panel{{top, 200}, {bottom, 100}}, Legend: legend}
	svg, err := f.SVG()
	if err != nil {
		t.Fatal(err)
	}
	texts := plotsvgtest.Texts(t, svg)
	for _, want := range []string{"a title", "upper caption", "lower caption", "IDs/s", "ahead", "seconds", "a series name that is long", "3M"} {
		if !slices.Contains(texts, want) {
			t.Errorf("no %q in %q", want, texts)
		}
	}
	if !strings.Contains(string(svg), "font-family:Liberation Sans,Arial,Helvetica,sans-serif;") {
		t.Error("no font fallback")
	}
	// A legend wider than half the figure is refused, not cut off.
	legend.Add(strings.Repeat("a name far too long for the legend column ", 3), line)
	if _, err := f.SVG(); err == nil || !strings.Contains(err.Error(), "legend") {
		t.Errorf("a legend too wide: %v", err)
	}
	if _, err := (Figure{Title: "empty", Width: 100}).SVG(); err == nil {
		t.Error("a figure without panels rendered")
	}
}

func TestHex(t *testing.T) {
	if r, g, b, _ := Hex("#4c78a8").RGBA(); r>>8 != 0x4c || g>>8 != 0x78 || b>>8 != 0xa8 {
		t.Errorf("Hex: %x %x %x", r>>8, g>>8, b>>8)
	}
	defer func() {
		if recover() == nil {
			t.Error("a bad colour did not panic")
		}
	}()
	Hex("red")
}
