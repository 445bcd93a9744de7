// Package report renders a botswarm run for people: the live progress line,
// the summary table printed at the end, and a self-contained HTML page with
// plots (inline SVG drawn with gonum.org/v1/plot) that opens offline — no
// scripts, stylesheets, fonts or images are fetched from anywhere.
package report

import (
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"os"
	"strings"

	"github.com/ghostwire/ghostwire/cmd/botswarm/internal/metrics"
)

// Figure is one plot of the page.
type Figure struct {
	Title string
	SVG   template.HTML
}

// Figures draws every plot of the report.
func Figures(r *metrics.Report) ([]Figure, error) {
	f := func(v metrics.Num) float64 { return float64(v) }
	type spec struct {
		title string
		draw  func() (string, error)
	}
	cpu := spec{"CPU", func() (string, error) {
		ss := []series{{name: "botswarm", y: func(p metrics.Point) float64 { return f(p.CPU) }}}
		if len(r.Server) > 0 {
			ss = append(ss, series{name: "server (--metrics-url)", dash: true, server: func(p metrics.ServerPoint) float64 { return f(p.CPU) }})
		}
		return timePlot(r, "CPU used", "cores", ss...)
	}}
	specs := []spec{
		{"Bots connected", func() (string, error) {
			return timePlot(r, "Bots connected", "bots",
				series{name: "connected", y: func(p metrics.Point) float64 { return float64(p.Connected) }},
				series{name: "target", y: func(p metrics.Point) float64 { return float64(p.Target) }, dash: true})
		}},
		{"RTT percentiles", func() (string, error) {
			return timePlot(r, "Round-trip time", "ms",
				series{name: "p50", y: func(p metrics.Point) float64 { return f(p.RTTP50) }},
				series{name: "p90", y: func(p metrics.Point) float64 { return f(p.RTTP90) }},
				series{name: "p99", y: func(p metrics.Point) float64 { return f(p.RTTP99) }})
		}},
		{"Bandwidth per bot", func() (string, error) {
			return timePlot(r, "Bandwidth per bot", "bytes/s",
				series{name: "in (server → bot)", y: func(p metrics.Point) float64 { return f(p.BytesInPS) }},
				series{name: "out (bot → server)", y: func(p metrics.Point) float64 { return f(p.BytesOutPS) }})
		}},
		{"Sessions lost", func() (string, error) {
			return timePlot(r, "Unexpected disconnects, failed reconnects, redirects", "per second",
				series{name: "disconnects", y: func(p metrics.Point) float64 { return float64(p.Disconnects) }},
				series{name: "failed reconnects", y: func(p metrics.Point) float64 { return float64(p.ReconnectFails) }},
				series{name: "redirects (followed)", y: func(p metrics.Point) float64 { return float64(p.Redirects) }, dash: true})
		}},
		{"Handoffs", func() (string, error) {
			return timePlot(r, "Handoffs (zone-border crossings)", "per second",
				series{name: "this second", y: func(p metrics.Point) float64 { return float64(p.Handoffs) }})
		}},
		{"Loss", func() (string, error) {
			return timePlot(r, "Packet loss", "%",
				series{name: "protocol (notify fates)", y: func(p metrics.Point) float64 { return 100 * f(p.Loss) }},
				series{name: "simulated network", y: func(p metrics.Point) float64 { return 100 * f(p.NetLoss) }, dash: true})
		}},
		{"Ghosts per bot", func() (string, error) {
			return timePlot(r, "Ghosts held per observing bot", "ghosts",
				series{name: "ghosts per bot", y: func(p metrics.Point) float64 { return f(p.Ghosts) }})
		}},
		cpu,
		{"View error CDF", func() (string, error) {
			return cdfPlot(r.Histograms["view_err"], "View error (peer ghost vs true position)", "error (m)")
		}},
		{"RTT CDF", func() (string, error) {
			return cdfPlot(r.Histograms["rtt"], "Round-trip time, whole run", "RTT (ms)")
		}},
		{"Handoff hitch CDF", func() (string, error) {
			return cdfPlot(r.Histograms["handoff_hitch"], "Handoff hitch (longest control gap)", "gap (ms)")
		}},
	}
	if len(r.Server) > 0 {
		// The server's view beside the bots': after "bots connected" and
		// "RTT", its tick cost next to the CPU panel, then heap and drops.
		srv := []spec{
			{"Server tick cost", func() (string, error) {
				return timePlot(r, "Server: zone tick cost", "ms",
					series{name: "p50", server: func(p metrics.ServerPoint) float64 { return f(p.TickP50) }},
					series{name: "p99", server: func(p metrics.ServerPoint) float64 { return f(p.TickP99) }})
			}},
			cpu,
			{"Server heap", func() (string, error) {
				return timePlot(r, "Server: Go heap allocated (heap_alloc)", "MB",
					series{name: "heap", server: func(p metrics.ServerPoint) float64 { return f(p.HeapBytes) / 1e6 }})
			}},
			{"Server inputs dropped", func() (string, error) {
				return timePlot(r, "Server: inputs dropped by the zones", "per second",
					series{name: "inputs dropped", server: func(p metrics.ServerPoint) float64 { return f(p.InputsDroppedPS) }})
			}},
		}
		var rest []spec
		for _, sp := range specs[2:] {
			if sp.title != "CPU" {
				rest = append(rest, sp)
			}
		}
		specs = append(append(specs[:2:2], srv...), rest...)
	}
	out := make([]Figure, 0, len(specs))
	for _, s := range specs {
		svg, err := s.draw()
		if err != nil {
			return nil, fmt.Errorf("plot %q: %w", s.title, err)
		}
		out = append(out, Figure{Title: s.title, SVG: template.HTML(svg)}) // #nosec: produced by vgsvg from numbers and our own labels
	}
	return out, nil
}

type pageData struct {
	R       *metrics.Report
	Figures []Figure
	Rows    []Row
	Config  string
}

var page = template.Must(template.New("page").Funcs(template.FuncMap{
	"pct": func(v metrics.Num) string { return fmtNum(float64(v)*100, "%") },
	// sloParts splits "rtt_p99 = 19ms, target < 150ms: ok" into the
	// measured value and the target (the verdict has its own column).
	"sloParts": func(text string) [2]string {
		if i := strings.LastIndex(text, ": "); i > 0 {
			text = text[:i]
		}
		measured, target, ok := strings.Cut(text, ", target ")
		if !ok {
			return [2]string{text, ""}
		}
		return [2]string{measured, target}
	},
}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>botswarm report — {{.R.Started.Format "2006-01-02 15:04:05"}}</title>
<style>
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:1.5em;color:#222;max-width:1400px}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5em 0}td,th{padding:.2em .7em;border-bottom:1px solid #eee;text-align:left;font-variant-numeric:tabular-nums}
th{background:#f4f4f4}.ok{color:#11772d;font-weight:600}.bad{color:#b00020;font-weight:600}.muted{color:#888}
.figs{display:flex;flex-wrap:wrap;gap:1em}.fig{border:1px solid #e4e4e4;padding:.3em}
pre{background:#f7f7f7;padding:.7em;overflow:auto;font-size:.85em}
</style></head><body>
<h1>botswarm report</h1>
<p>Started {{.R.Started.Format "2006-01-02 15:04:05 MST"}}, ran {{printf "%.1f" .R.Duration}} s; peak {{.R.PeakBots}} bots connected.</p>
{{if and .R.SLO .R.SLO.Results}}{{with .R.SLO}}<h2>SLO gate: {{if .Passed}}<span class="ok">passed</span>{{else}}<span class="bad">FAILED</span>{{end}}</h2>
<p><code>{{.Spec}}</code></p>
<table><tr><th>measured</th><th>target</th><th>verdict</th></tr>
{{range .Results}}{{$p := sloParts .Text}}<tr><td>{{index $p 0}}</td><td>{{index $p 1}}</td><td>{{if .OK}}<span class="ok">ok</span>{{else}}<span class="bad">missed</span>{{end}}</td></tr>
{{end}}</table>{{end}}{{else}}<h2>SLO gate: <span class="muted">none</span></h2>
<p class="muted">No targets were given (<code>--slo</code>): nothing was gated; the invariants below still decide the exit status.</p>{{end}}
<h2>Invariants</h2>
<table><tr><th>invariant</th><th>verdict</th><th>detail</th></tr>
{{range .R.Invariants}}<tr><td>{{.Name}}</td><td>{{if not .Checked}}<span class="muted">not checked</span>{{else if .OK}}<span class="ok">holds</span>{{else}}<span class="bad">violated</span>{{end}}</td><td>{{.Detail}}</td></tr>
{{end}}</table>
<h2>Summary</h2>
<table><tr><th>metric</th><th>value</th></tr>
{{range .Rows}}<tr><td>{{.Name}}</td><td>{{.Value}}</td></tr>
{{end}}</table>
<h2>Plots</h2>
<div class="figs">{{range .Figures}}<div class="fig">{{.SVG}}</div>{{end}}</div>
{{with .R.Notes}}<h2>Notes</h2><ul>{{range .}}<li>{{.}}</li>{{end}}</ul>{{end}}
<h2>Configuration</h2>
<pre>{{.Config}}</pre>
<p class="muted">Generated by botswarm. This page is self-contained: it loads nothing from the network.</p>
</body></html>
`))

// WriteHTML writes the self-contained HTML report.
func WriteHTML(w io.Writer, r *metrics.Report) error {
	figs, err := Figures(r)
	if err != nil {
		return err
	}
	cfg, err := json.MarshalIndent(r.Config, "", "  ")
	if err != nil {
		return fmt.Errorf("report config: %w", err)
	}
	return page.Execute(w, pageData{R: r, Figures: figs, Rows: Summary(r), Config: string(cfg)})
}

// WriteHTMLFile writes the HTML report to path.
func WriteHTMLFile(path string, r *metrics.Report) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("html report: %w", err)
	}
	if err := WriteHTML(f, r); err != nil {
		f.Close()
		return fmt.Errorf("html report %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("html report %s: %w", path, err)
	}
	return nil
}
