package report

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"strconv"
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

// series is one line of a plot: y over the report's time axis, from the
// bots' series (y) or the server's scraped one (server).
type series struct {
	name   string
	y      func(p metrics.Point) float64
	server func(p metrics.ServerPoint) float64
	dash   bool
}

// points returns the series' (t, y) samples; NaN marks a gap.
func (s series) points(r *metrics.Report) plotter.XYs {
	var xy plotter.XYs
	if s.server != nil {
		for _, p := range r.Server {
			xy = append(xy, plotter.XY{X: p.T, Y: s.server(p)})
		}
		return xy
	}
	for _, p := range r.Series {
		xy = append(xy, plotter.XY{X: p.T, Y: s.y(p)})
	}
	return xy
}

// timePlot draws lines over the run's seconds. NaN samples (a second with
// no data) break the line instead of plotting as zero. The y axis starts
// at 0 for data that never goes negative, and leaves the top of the plot
// to the legend, so the legend never sits on a line.
func timePlot(r *metrics.Report, title, ylabel string, ss ...series) (string, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "time (s)"
	p.Y.Label.Text = ylabel
	p.X.Tick.Marker = niceTicks{n: 8}
	p.Y.Tick.Marker = niceTicks{n: 5}
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.XOffs = vg.Points(4)
	drawn := false
	ymin, ymax := math.Inf(1), math.Inf(-1)
	tmax := 0.0
	for _, pt := range r.Series {
		tmax = math.Max(tmax, pt.T)
	}
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
		for _, xy := range s.points(r) {
			if math.IsNaN(xy.Y) || math.IsInf(xy.Y, 0) {
				if err := flush(); err != nil {
					return "", err
				}
				continue
			}
			ymin, ymax = math.Min(ymin, xy.Y), math.Max(ymax, xy.Y)
			tmax = math.Max(tmax, xy.X)
			seg = append(seg, xy)
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
	p.X.Min, p.X.Max = 0, math.Max(tmax, 1)
	p.Y.Min, p.Y.Max = yRange(ymin, ymax, len(ss))
	return render(p)
}

// yRange is the y axis for data in [lo, hi] under a legend of n entries:
// from 0 (or below, for negative data), and tall enough that the data stay
// below the legend's band at the top. All-zero data (no loss, no drops)
// get the axis 0…1 rather than −1…1.
func yRange(lo, hi float64, n int) (float64, float64) {
	ymin := math.Min(lo, 0)
	top := hi
	if top <= ymin {
		top = ymin + 1
	}
	// The legend takes ≈ 16 pt per entry (and its margin) of a ≈ 180 pt
	// tall data area.
	band := math.Min(0.5, (10+16*float64(n))/180)
	return ymin, ymin + (top-ymin)/(1-band)
}

// niceTicks labels about n round values (1, 2, 2.5 or 5 × 10^k) with
// unlabelled minor ticks between them: time axes read in seconds, not in
// three coarse steps.
type niceTicks struct{ n int }

func (t niceTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(hi > lo) || math.IsInf(hi-lo, 0) {
		return plot.DefaultTicks{}.Ticks(lo, hi)
	}
	raw := (hi - lo) / float64(max(t.n, 2))
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	minor := step / 5
	var ticks []plot.Tick
	prec := max(0, -int(math.Floor(math.Log10(step)+1e-9)))
	if step/mag == 2.5 {
		prec++
	}
	for i := math.Ceil(lo / minor); i*minor <= hi+minor*1e-6; i++ {
		v := i * minor
		k := math.Round(v / step)
		if math.Abs(v-k*step) < minor*1e-3 {
			vv := k * step
			ticks = append(ticks, plot.Tick{Value: vv, Label: strconv.FormatFloat(vv, 'f', prec, 64)})
		} else {
			ticks = append(ticks, plot.Tick{Value: v})
		}
	}
	return ticks
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
	// A CDF climbs from the bottom left to the top right: its top left is
	// empty, so the legend goes there.
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.XOffs, p.Legend.YOffs = vg.Points(4), -vg.Points(4)
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
