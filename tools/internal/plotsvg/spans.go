package plotsvg

import (
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Span is a stretch of the x axis in a colour: with Row negative a
// translucent band across the plot area, otherwise a bar in row Row of a
// plot whose y axis counts rows (Rows).
type Span struct {
	From, To float64
	Row      int
	Colour   string
}

// minSpanWidth keeps an instant (a kill) visible.
const minSpanWidth = vg.Length(1.5)

// Spans draws spans; it is a plot.Plotter.
type Spans []Span

// Plot implements plot.Plotter.
func (s Spans) Plot(c draw.Canvas, p *plot.Plot) {
	x, y := p.Transforms(&c)
	for _, sp := range s {
		r := vg.Rectangle{Min: vg.Point{X: x(sp.From)}, Max: vg.Point{X: max(x(sp.To), x(sp.From)+minSpanWidth)}}
		col := Hex(sp.Colour)
		if sp.Row < 0 {
			r.Min.Y, r.Max.Y = c.Min.Y, c.Max.Y
			cr, cg, cb, _ := col.RGBA()
			col = color.NRGBA{R: uint8(cr >> 8), G: uint8(cg >> 8), B: uint8(cb >> 8), A: 0x40}
		} else {
			r.Min.Y, r.Max.Y = y(float64(sp.Row)-0.35), y(float64(sp.Row)+0.35)
		}
		c.SetColor(col)
		c.Fill(r.Path())
	}
}

// Rows makes p's y axis a list of rows named names, the first at the
// top; row i sits at y = i counted from the top, so Spans use i as Row.
func Rows(p *plot.Plot, names []string) {
	ticks := make([]plot.Tick, len(names))
	for i, n := range names {
		ticks[i] = plot.Tick{Value: float64(i), Label: n}
	}
	p.Y.Tick.Marker = plot.ConstantTicks(ticks)
	p.Y.Scale = plot.InvertedScale{Normalizer: plot.LinearScale{}}
	p.Y.Min, p.Y.Max = -0.5, float64(len(names))-0.5
	p.Y.Tick.Length, p.Y.Width = 0, 0 // names, not values: no axis line
	// Room for the names in a wider font than Liberation's (a viewer
	// without it or Arial), which would run into the plot area.
	var widest vg.Length
	for _, n := range names {
		widest = max(widest, p.Y.Tick.Label.Width(n))
	}
	p.Y.Padding = widest / 5
}
