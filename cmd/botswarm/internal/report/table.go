package report

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ghostwire/ghostwire/cmd/botswarm/internal/metrics"
)

// Row is one line of the summary.
type Row struct{ Name, Value string }

func fmtNum(v float64, unit string) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "n/a"
	}
	var s string
	switch {
	case math.Abs(v) >= 100 || v == math.Trunc(v):
		s = strconv.FormatFloat(v, 'f', 0, 64)
	case math.Abs(v) >= 10:
		s = strconv.FormatFloat(v, 'f', 1, 64)
	default:
		s = strconv.FormatFloat(v, 'g', 3, 64)
	}
	if unit == "" {
		return s
	}
	if unit == "%" {
		return s + "%"
	}
	return s + " " + unit
}

func fmtMs(v float64) string { return fmtNum(v, "ms") }

// fmtBytes prints a byte rate with a binary-free SI prefix.
func fmtBytes(v float64) string {
	switch {
	case math.IsNaN(v):
		return "n/a"
	case v >= 1e6:
		return fmtNum(v/1e6, "MB")
	case v >= 1e3:
		return fmtNum(v/1e3, "kB")
	}
	return fmtNum(v, "B")
}

// Summary returns the rows of the final summary table.
func Summary(r *metrics.Report) []Row {
	t := r.Totals
	m := func(name string) float64 { return float64(r.Metrics[name]) }
	h := r.Histograms
	pcts := func(s metrics.Summary, f func(float64) string) string {
		if s.Count == 0 {
			return "n/a"
		}
		return fmt.Sprintf("p50 %s  p90 %s  p99 %s  max %s", f(s.P50), f(s.P90), f(s.P99), f(s.Max))
	}
	metres := func(v float64) string { return fmtNum(v, "m") }
	target := 0
	if n := len(r.Series); n > 0 {
		target = r.Series[0].Target
	}
	rows := []Row{
		{"duration", (time.Duration(r.Duration * float64(time.Second))).Round(100 * time.Millisecond).String()},
		{"bots (target / peak / at end)", fmt.Sprintf("%d / %d / %s", target, r.PeakBots, fmtNum(100*m("connected"), "%"))},
		{"sessions (connects / failed to connect)", fmt.Sprintf("%d (%d / %d)", t.Sessions, t.Connects, t.ConnectFails)},
		{"unexpected disconnects (server shutdown / kicked / timeout / superseded / other)", fmt.Sprintf("%d (%d / %d / %d / %d / %d)",
			t.Disconnects, t.DisconnectsShutdown, t.DisconnectsKicked, t.DisconnectsTimeout, t.DisconnectsSuperseded, t.DisconnectsOther)},
		{"sessions never placed in a zone (moves they sent)", fmt.Sprintf("%d (%d)", t.SessionsUnplaced, t.MovesUnplaced)},
		{"reconnects (attempts / failed)", fmt.Sprintf("%d / %d", t.ReconnectAttempts, t.ReconnectFails)},
		{"redirects followed", strconv.FormatUint(t.Redirects, 10)},
		{"planned disconnects (end of run / churn)", fmt.Sprintf("%d (%d / %d)", t.Quits, t.Quits-t.QuitsChurn, t.QuitsChurn)},
		{"connect time", pcts(h["connect"], fmtMs)},
		{"placed in a zone (connected → first state)", pcts(h["placed"], fmtMs)},
		{"bandwidth per bot (in / out)", fmt.Sprintf("%s/s / %s/s", fmtBytes(m("bytes_in_per_bot")), fmtBytes(m("bytes_out_per_bot")))},
		{"packets (in / out)", fmt.Sprintf("%d / %d", t.PacketsIn, t.PacketsOut)},
		{"RTT", pcts(h["rtt"], fmtMs)},
		{"move ack latency", pcts(h["ack"], fmtMs)},
		{"loss (protocol: both / out / in; simulated network)", fmt.Sprintf("%s / %s / %s; %s", fmtNum(100*m("loss"), "%"),
			fmtNum(100*m("loss_out"), "%"), fmtNum(100*m("loss_in"), "%"), fmtNum(100*m("net_loss"), "%"))},
		{"moves (sent / acked / lost / unacked at end)", fmt.Sprintf("%d / %d / %d / %d", t.MovesSent, t.MovesAcked, t.MovesLost, t.MovesUnacked)},
		{"corrections / stale acks", fmt.Sprintf("%d / %d", t.Corrections, t.StaleAcks)},
		{"events (sent / echoed / lost)", fmt.Sprintf("%d / %d / %d", t.EventsSent, t.EventsEchoed, t.EventsLost)},
		{"events (corrupt / out of order / duplicate / foreign)", fmt.Sprintf("%d / %d / %d / %d", t.EventsCorrupt, t.EventsOutOfOrder, t.EventsDuplicate, t.EventsForeign)},
		{"echo round trip", pcts(h["echo"], fmtMs)},
		{"view error", pcts(h["view_err"], metres)},
		{"view samples (peer updates / other ghosts)", fmt.Sprintf("%d (%d / %d)", t.ViewSamples, t.ViewPeers, t.ViewOthers)},
		{"handoffs", strconv.FormatUint(t.Handoffs, 10)},
		{"handoff hitch", pcts(h["handoff_hitch"], fmtMs)},
		{"errors (socket / protocol / session)", fmt.Sprintf("%d (%d / %d / %d)", t.Errors, t.SocketErrors, t.ProtocolErrors, t.SessionErrors)},
		{"botswarm CPU per bot", fmtNum(1000*m("cpu_per_bot"), "millicores")},
	}
	if sc := r.Self; sc != nil && sc.Transport != "" {
		rows = append(rows, Row{"botswarm (sockets / workers / observing bots)",
			fmt.Sprintf("%s / %d / %d of %d", sc.Transport, sc.Workers, sc.Observers, target)})
	}
	if len(r.Server) > 0 {
		rows = append(rows, Row{"server (tick cost p99, worst / CPU / heap, largest)",
			fmt.Sprintf("%s / %s / %s", fmtMs(1000*m("server_tick_p99")), fmtNum(m("server_cpu"), "cores"), fmtBytes(m("server_heap")))})
	}
	return rows
}

// WriteSummary prints the summary table, the invariants and the SLO
// verdict.
func WriteSummary(w io.Writer, r *metrics.Report) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "botswarm summary")
	fmt.Fprintln(tw, strings.Repeat("-", 16))
	for _, row := range Summary(r) {
		fmt.Fprintf(tw, "%s\t%s\n", row.Name, row.Value)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString("\ninvariants\n")
	for _, inv := range r.Invariants {
		v := "HOLDS"
		switch {
		case !inv.Checked:
			v = "not checked"
		case !inv.OK:
			v = "VIOLATED"
		}
		fmt.Fprintf(&b, "  %s: %s\n    %s\n", inv.Name, v, inv.Detail)
	}
	if r.SLO != nil && len(r.SLO.Results) > 0 {
		verdict := "PASSED"
		if !r.SLO.Passed {
			verdict = "FAILED"
		}
		fmt.Fprintf(&b, "\nSLO %s: %s\n", r.SLO.Spec, verdict)
		for _, x := range r.SLO.Results {
			fmt.Fprintf(&b, "  %s\n", x.Text)
		}
	}
	if len(r.Notes) > 0 {
		b.WriteString("\nnotes\n")
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "  - %s\n", n)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Progress formats the live line printed once a second.
func Progress(p metrics.Point, c metrics.Counters) string {
	return fmt.Sprintf("%5.0fs  bots %d/%d  in %s pkt/s %s/s  out %s pkt/s %s/s per bot  rtt p50 %s p99 %s  loss %s  handoffs %d  disconnects %d  errors %d",
		p.T, p.Connected, p.Target,
		fmtNum(float64(p.PacketsInPS), ""), fmtBytes(float64(p.BytesInPS)),
		fmtNum(float64(p.PacketsOutPS), ""), fmtBytes(float64(p.BytesOutPS)),
		fmtMs(float64(p.RTTP50)), fmtMs(float64(p.RTTP99)),
		fmtNum(100*float64(p.Loss), "%"), p.HandoffsTotal, c.Disconnects, c.Errors)
}
