package main

import (
	"fmt"
	"image/color"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// panel is one of the plot's four panels: a quantity over the player count,
// with its target as a dashed line.
type panel struct {
	title, ylabel string
	y             func(s Step) float64
	target        float64 // 0: none
	targetLabel   string
}

// writePlot draws the capacity curve: four panels (tick p99, RTT p99, CPU
// per player-second, heap per player) over the player count.
func writePlot(path string, steps []Step) error {
	if len(steps) == 0 {
		return fmt.Errorf("no steps to plot")
	}
	panels := []panel{
		{"zone tick p99", "ms", func(s Step) float64 { return s.TickP99Ms }, limitTickP99Ms, "target ≤ 25 ms"},
		{"RTT p99 (botswarm, loopback)", "ms", func(s Step) float64 { return s.RTTP99Ms }, limitRTTP99Ms, "target ≤ 50 ms"},
		{"server CPU per player-second", "ms", func(s Step) float64 { return s.CPUMsPerPlayer }, 0.25, "target ≤ 0.25 ms"},
		{"live heap per player (after GC)", "KB", func(s Step) float64 { return s.HeapPerPlayerB / 1024 }, 16, "target ≤ 16 KB"},
	}
	const rows, cols = 2, 2
	plots := make([][]*plot.Plot, rows)
	maxX := 0.0
	for _, s := range steps {
		maxX = max(maxX, float64(s.Players))
	}
	lim, hasLim := limit(steps)
	for i, pn := range panels {
		r, c := i/cols, i%cols
		if plots[r] == nil {
			plots[r] = make([]*plot.Plot, cols)
		}
		p := plot.New()
		// The title carries what a legend would: a legend inside the panel
		// sits on the data, and there is one series per panel.
		p.Title.Text = pn.title + "\ndashed: " + pn.targetLabel
		if hasLim {
			p.Title.Text += fmt.Sprintf(", dotted: the limit (%d players)", lim)
		}
		p.X.Label.Text = "players"
		p.Y.Label.Text = pn.ylabel
		p.X.Min, p.X.Max = 0, maxX*1.05
		p.Y.Min = 0
		p.X.Tick.Marker = plainTicks{}
		p.Y.Tick.Marker = plainTicks{}
		p.Add(plotter.NewGrid())
		var xy plotter.XYs
		top := pn.target * 1.2
		for _, s := range steps {
			v := pn.y(s)
			if v < 0 {
				continue // not measured (e.g. no botswarm report)
			}
			xy = append(xy, plotter.XY{X: float64(s.Players), Y: v})
			top = max(top, v*1.1)
		}
		p.Y.Max = top
		if len(xy) > 0 {
			l, pts, err := plotter.NewLinePoints(xy)
			if err != nil {
				return err
			}
			l.Color, pts.Color = plotutil.Color(i), plotutil.Color(i)
			l.Width = vg.Points(1.5)
			pts.Shape = draw.CircleGlyph{}
			p.Add(l, pts)
		}
		if pn.target > 0 {
			t, err := plotter.NewLine(plotter.XYs{{X: 0, Y: pn.target}, {X: maxX * 1.05, Y: pn.target}})
			if err != nil {
				return err
			}
			t.Color = color.Gray{Y: 96}
			t.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
			p.Add(t)
		}
		if hasLim {
			v, err := plotter.NewLine(plotter.XYs{{X: float64(lim), Y: 0}, {X: float64(lim), Y: top}})
			if err != nil {
				return err
			}
			v.Color = color.Gray{Y: 64}
			v.Dashes = []vg.Length{vg.Points(1.5), vg.Points(2)}
			p.Add(v)
		}
		plots[r][c] = p
	}
	img := vgimg.NewWith(vgimg.UseWH(24*vg.Centimeter, 16*vg.Centimeter), vgimg.UseBackgroundColor(color.White))
	dc := draw.New(img)
	t := draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align(plots, t, dc)
	for r := range rows {
		for c := range cols {
			plots[r][c].Draw(canvases[r][c])
		}
	}
	return savePNG(path, img)
}

// plainTicks labels the default tick positions with the fewest digits that
// tell them apart ("750", "0.25"), not the fixed precision of the default
// ("750.00").
type plainTicks struct{}

func (plainTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = strconv.FormatFloat(ts[i].Value, 'g', 6, 64)
		}
	}
	return ts
}
