// Package plotsvg draws the tools' charts (docs/sustained.svg and
// docs/benchmarks.svg from internal/benchreport, the soak's chart) with
// gonum/plot as SVG: a title, panels stacked over one x axis or set side
// by side with their plot areas aligned, and the legend in a column of
// its own, as wide as its longest entry, so that no name is cut off.
//
// Text is set in Liberation Sans, the font gonum measures with. The files
// name Arial and Helvetica after it (the same metrics) and sans-serif
// last, so that a viewer without Liberation keeps the layout.
package plotsvg

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// sans is the charts' typeface.
var sans = font.Font{Typeface: "Liberation", Variant: "Sans"}

// Font sizes, in points.
const (
	titleSize   = 14
	captionSize = 11
	textSize    = 10
)

// margin surrounds the figure and separates the legend column.
const margin = vg.Length(10)

// Hex is the colour #rrggbb.
func Hex(s string) color.Color {
	v, err := strconv.ParseUint(strings.TrimPrefix(s, "#"), 16, 32)
	if err != nil || len(s) != 7 {
		panic(fmt.Sprintf("plotsvg: colour %q is not #rrggbb", s))
	}
	return color.RGBA{R: uint8(v >> 16), G: uint8(v >> 8), B: uint8(v), A: 0xff}
}

// NewPlot is a panel in the package's fonts: its caption above, its axes
// labelled, light grid lines under the data.
func NewPlot(caption, xLabel, yLabel string) *plot.Plot {
	p := plot.New()
	p.BackgroundColor = nil // the figure's white shows through
	p.Title.Text = caption
	p.Title.TextStyle.Font = font.From(sans, captionSize)
	p.Title.Padding = 4
	p.X.Label.Text, p.Y.Label.Text = xLabel, yLabel
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font = font.From(sans, textSize)
		a.Tick.Label.Font = font.From(sans, textSize)
		a.Padding = 0
	}
	p.X.Tick.Marker, p.Y.Tick.Marker = Ticks{}, Ticks{}
	grid := plotter.NewGrid()
	grid.Vertical.Color, grid.Horizontal.Color = Hex("#e4e4e4"), Hex("#e4e4e4")
	p.Add(grid)
	return p
}

// NewLegend is a legend in the package's fonts, for Figure.Legend.
func NewLegend() *plot.Legend {
	l := plot.NewLegend()
	l.TextStyle.Font = font.From(sans, textSize)
	l.Top, l.Left = true, true
	l.Padding = 3
	return &l
}

// Line is a polyline of the points in the colour.
func Line(xys plotter.XYs, colour string, width vg.Length) *plotter.Line {
	l := &plotter.Line{XYs: xys}
	l.LineStyle = draw.LineStyle{Color: Hex(colour), Width: width}
	return l
}

// Panel is one plot of a figure and its height (caption, axes and plot
// area together).
type Panel struct {
	Plot   *plot.Plot
	Height vg.Length
}

// Figure is one chart file.
type Figure struct {
	Title  string
	Width  vg.Length
	Panels []Panel
	// SideBySide sets the panels in a row, each as tall as the first,
	// their plot areas of one width; otherwise they stand one above the
	// other, their plot areas of one width and aligned.
	SideBySide bool
	// Legend (optional) is drawn in a column right of the panels.
	Legend *plot.Legend
}

// SVG renders the figure.
func (f Figure) SVG() ([]byte, error) {
	if len(f.Panels) == 0 {
		return nil, fmt.Errorf("plotsvg: %q has no panels", f.Title)
	}
	titleStyle := TextStyle(titleSize)
	titleH := titleStyle.Rectangle(f.Title).Size().Y + margin
	height := titleH + 2*margin
	if f.SideBySide {
		height += f.Panels[0].Height
	} else {
		for _, p := range f.Panels {
			height += p.Height
		}
	}
	c := vgsvg.New(f.Width, height)
	dc := draw.New(c)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	body := draw.Crop(dc, margin, -margin, margin, -margin)
	body.FillText(titleStyle, vg.Point{X: body.Min.X, Y: body.Max.Y - titleStyle.Rectangle(f.Title).Size().Y}, f.Title)
	body = draw.Crop(body, 0, 0, 0, -titleH)

	if f.Legend != nil {
		// A fifth more than Liberation's width: a viewer that lacks it
		// and Arial may set the names in a wider font (DejaVu Sans).
		w := f.Legend.Rectangle(body).Size().X * 1.2
		if w+margin >= body.Size().X/2 {
			return nil, fmt.Errorf("plotsvg: %q: the legend (%.0f pt) takes more than half the width", f.Title, w)
		}
		legend := draw.Crop(body, body.Size().X-w, 0, 0, 0)
		f.Legend.Draw(legend)
		body = draw.Crop(body, 0, -(w + margin), 0, 0)
	}
	if f.SideBySide {
		plots := make([]*plot.Plot, len(f.Panels))
		for i, p := range f.Panels {
			plots[i] = p.Plot
		}
		canvases := plot.Align([][]*plot.Plot{plots}, draw.Tiles{Rows: 1, Cols: len(plots), PadX: 3 * margin}, body)
		for i, p := range plots {
			p.Draw(canvases[0][i])
		}
	} else {
		stack(body, f.Panels)
	}
	var b bytes.Buffer
	if _, err := c.WriteTo(&b); err != nil {
		return nil, fmt.Errorf("plotsvg: %w", err)
	}
	return bytes.ReplaceAll(b.Bytes(), []byte("font-family:Liberation Sans;"), []byte("font-family:Liberation Sans,Arial,Helvetica,sans-serif;")), nil
}

// stack draws the panels top to bottom in c, each plot area as wide as
// the narrowest and starting where the one with the widest y labels
// needs it to.
func stack(c draw.Canvas, panels []Panel) {
	areas := make([]draw.Canvas, len(panels))
	var left, right vg.Length
	top := c.Max.Y
	for i, p := range panels {
		areas[i] = draw.Crop(c, 0, 0, top-p.Height-c.Min.Y, top-c.Max.Y)
		top -= p.Height
		data := p.Plot.DataCanvas(areas[i])
		left = max(left, data.Min.X-areas[i].Min.X)
		right = max(right, areas[i].Max.X-data.Max.X)
	}
	for i, p := range panels {
		data := p.Plot.DataCanvas(areas[i])
		p.Plot.Draw(draw.Crop(areas[i], left-(data.Min.X-areas[i].Min.X), (areas[i].Max.X-data.Max.X)-right, 0, 0))
	}
}

// Compact labels a value: 0, 2.5M, 10k.
func Compact(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1e9:
		return strconv.FormatFloat(v/1e9, 'f', -1, 64) + "G"
	case a >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', -1, 64) + "M"
	case a >= 1e3:
		return strconv.FormatFloat(v/1e3, 'f', -1, 64) + "k"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// Ticks labels about six values at steps of 1, 2 or 5 times a power of
// ten, with Label (Compact when nil), and marks the halves between them.
type Ticks struct{ Label func(float64) string }

// Ticks implements plot.Ticker.
func (t Ticks) Ticks(lo, hi float64) []plot.Tick {
	label := t.Label
	if label == nil {
		label = Compact
	}
	if !(hi > lo) {
		return []plot.Tick{{Value: lo, Label: label(lo)}}
	}
	step := niceCeil((hi - lo) / 6)
	var ticks []plot.Tick
	for i := math.Ceil(lo / step * 2); i*step/2 <= hi*(1+1e-12); i++ {
		v := i * step / 2
		if math.Mod(i, 2) == 0 {
			ticks = append(ticks, plot.Tick{Value: v, Label: label(v)})
		} else {
			ticks = append(ticks, plot.Tick{Value: v})
		}
	}
	return ticks
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5} {
		if m*p >= v*(1-1e-12) {
			return m * p
		}
	}
	return 10 * p
}

// DecadeTicks marks the powers of ten of a log axis, labelled by Label.
type DecadeTicks struct{ Label func(float64) string }

// Ticks implements plot.Ticker.
func (d DecadeTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		if v := math.Pow(10, e); v >= lo*(1-1e-9) && v <= hi*(1+1e-9) {
			ticks = append(ticks, plot.Tick{Value: v, Label: d.Label(v)})
		}
	}
	return ticks
}

// TextStyle is the package's text in size points.
func TextStyle(size vg.Length) draw.TextStyle {
	return draw.TextStyle{Color: color.Black, Font: font.From(sans, size), Handler: plot.DefaultTextHandler}
}

// Swatch is a legend entry's filled square.
type Swatch string

// Thumbnail implements plot.Thumbnailer.
func (s Swatch) Thumbnail(c *draw.Canvas) {
	side := min(c.Size().X, c.Size().Y)
	r := vg.Rectangle{Min: c.Min, Max: vg.Point{X: c.Min.X + side, Y: c.Min.Y + side}}
	c.SetColor(Hex(string(s)))
	c.Fill(r.Path())
}
