package report

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/ghostwire/ghostwire/cmd/botswarm/internal/metrics"
)

// Plot sizes: two per row on a laptop screen.
const (
	plotW = 16 * vg.Centimeter
	plotH = 9 * vg.Centimeter
)

// series is one line of a plot: y over the report's time axis.
type series struct {
	name string
	y    func(p metrics.Point) float64
	dash bool
}

// timePlot draws lines over the run's seconds. NaN samples (a second with
// no data) break the line instead of plotting as zero.
func timePlot(r *metrics.Report, title, ylabel string, ss ...series) (string, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "time (s)"
	p.Y.Label.Text = ylabel
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	p.Legend.Left = true
	drawn := false
	for i, s := range ss {
		var lines []*plotter.Line
		var seg plotter.XYs
		flush := func() error {
			if len(seg) == 0 {
				return nil
			}
			l, err := plotter.NewLine(seg)
			if err != nil {
				return err
			}
			l.Color = plotutil.Color(i)
			l.Width = vg.Points(1.5)
			if s.dash {
				l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
			}
			lines = append(lines, l)
			seg = nil
			return nil
		}
		for _, pt := range r.Series {
			v := s.y(pt)
			if math.IsNaN(v) || math.IsInf(v, 0) {
				if err := flush(); err != nil {
					return "", err
				}
				continue
			}
			seg = append(seg, plotter.XY{X: pt.T, Y: v})
		}
		if err := flush(); err != nil {
			return "", err
		}
		for j, l := range lines {
			p.Add(l)
			if j == 0 {
				p.Legend.Add(s.name, l)
			}
			drawn = true
		}
	}
	if !drawn {
		return noData(title), nil
	}
	p.Y.Min = math.Min(p.Y.Min, 0)
	return render(p)
}

// cdfPlot draws a histogram summary as an empirical CDF.
func cdfPlot(s metrics.Summary, title, xlabel string) (string, error) {
	xs, ps := s.CDF()
	if len(xs) == 0 {
		return noData(title), nil
	}
	// Errors and latencies span decades: a log x axis shows the body and the
	// tail alike. Zero samples (exact answers) sit at the first bucket.
	logX := xs[len(xs)-1] > 0 && (xs[0] <= 0 || xs[len(xs)-1]/xs[0] > 50)
	lo := xs[0]
	if logX {
		for _, x := range xs {
			if x > 0 {
				lo = x
				break
			}
		}
	}
	pts := make(plotter.XYs, 0, len(xs)+1)
	if !logX {
		pts = append(pts, plotter.XY{X: 0, Y: 0})
	}
	for i := range xs {
		x := xs[i]
		if logX && x < lo {
			x = lo
		}
		pts = append(pts, plotter.XY{X: x, Y: ps[i]})
	}
	p := plot.New()
	if logX {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
		xlabel += ", log scale"
	}
	p.Title.Text = title
	p.X.Label.Text = xlabel
	p.Y.Label.Text = "fraction of samples ≤ x"
	p.Add(plotter.NewGrid())
	l, err := plotter.NewLine(pts)
	if err != nil {
		return "", err
	}
	l.StepStyle = plotter.PostStep
	l.Color = plotutil.Color(0)
	l.Width = vg.Points(1.5)
	p.Add(l)
	p.Y.Min, p.Y.Max = 0, 1
	// Mark p50 and p99.
	for i, q := range []struct {
		name string
		v    float64
	}{{"p50", s.P50}, {"p99", s.P99}} {
		v := q.v
		if logX && v < lo {
			v = lo
		}
		m, err := plotter.NewLine(plotter.XYs{{X: v, Y: 0}, {X: v, Y: 1}})
		if err != nil {
			return "", err
		}
		m.Color = plotutil.Color(i + 1)
		m.Dashes = []vg.Length{vg.Points(3), vg.Points(3)}
		p.Add(m)
		p.Legend.Add(fmt.Sprintf("%s = %.3g %s", q.name, q.v, s.Unit), m)
	}
	p.Legend.Top = false
	return render(p)
}

// render draws p as an SVG element (no XML prolog, fonts not embedded:
// the page must not carry data: URLs or fetch anything).
func render(p *plot.Plot) (string, error) {
	c := vgsvg.New(plotW, plotH)
	p.Draw(draw.New(c))
	var b bytes.Buffer
	if _, err := c.WriteTo(&b); err != nil {
		return "", fmt.Errorf("render plot: %w", err)
	}
	s := b.String()
	if i := strings.Index(s, "<svg"); i > 0 {
		s = s[i:]
	}
	return s, nil
}

// noData is a placeholder the size of a plot.
func noData(title string) string {
	w, h := plotW.Points(), plotH.Points()
	return fmt.Sprintf(`<svg width="%.0fpt" height="%.0fpt" viewBox="0 0 %.0f %.0f"><rect width="100%%" height="100%%" fill="#f6f6f6"/>`+
		`<text x="50%%" y="50%%" text-anchor="middle" font-family="sans-serif" font-size="12">%s: no data</text></svg>`,
		w, h, w, h, htmlEscape(title))
}

func htmlEscape(s string) string {
	r := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;")
	return r.Replace(s)
}

var _ color.Color // plotutil.Color returns color.Color; keep the import explicit for readers
