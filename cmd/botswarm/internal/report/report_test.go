package report

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/cmd/botswarm/internal/metrics"
	"github.com/ghostwire/ghostwire/cmd/botswarm/internal/slo"
)

// sampleReport builds a report through the real collector: 20 seconds of
// a swarm ramping to 50 bots.
func sampleReport(t *testing.T) *metrics.Report {
	t.Helper()
	s := metrics.NewShard()
	start := time.Unix(1_700_000_000, 0)
	c := metrics.NewCollector([]*metrics.Shard{s}, 50, start)
	for sec := 1; sec <= 20; sec++ {
		s.Mu.Lock()
		s.C.Connected = int64(min(sec*5, 50))
		s.C.PacketsIn += uint64(20 * s.C.Connected)
		s.C.PacketsOut += uint64(30 * s.C.Connected)
		s.C.BytesIn += uint64(2000 * s.C.Connected)
		s.C.BytesOut += uint64(900 * s.C.Connected)
		s.C.FatesDelivered += 100
		s.C.FatesDropped += uint64(sec % 3)
		s.C.InReceived += 100
		s.C.Handoffs += uint64(sec % 4)
		s.C.MovesSent += 300
		s.C.MovesAcked += 300
		s.C.EventsSent += 10
		s.C.EventsEchoed += 10
		for i := range 50 {
			s.H.RTT.Record(int64(5000 + 100*i + 50*sec))
			s.H.ViewErr.Record(int64(1000 * (i + 1)))
		}
		if sec%5 == 0 {
			s.H.Hitch.Record(80_000)
		}
		s.Mu.Unlock()
		c.Sample(start.Add(time.Duration(sec) * time.Second))
	}
	r := metrics.Build(c, map[string]any{"bots": 50, "server": "127.0.0.1:7777"}, metrics.Options{EchoExpected: true})
	spec, err := slo.Parse("rtt_p99<150ms,lost_moves=0,view_err_p99<1mm", metrics.Known)
	if err != nil {
		t.Fatal(err)
	}
	r.Gate("rtt_p99<150ms,lost_moves=0,view_err_p99<1mm", spec)
	r.Notes = append(r.Notes, "a note <with> markup")
	return r
}

func TestHTMLIsSelfContained(t *testing.T) {
	r := sampleReport(t)
	var b bytes.Buffer
	if err := WriteHTML(&b, r); err != nil {
		t.Fatal(err)
	}
	page := b.Bytes()
	if refs := mustRefs(t, page); len(refs) > 0 {
		t.Fatalf("the page references network resources: %q", refs)
	}
	s := string(page)
	if n := strings.Count(s, "<svg"); n != 11 {
		t.Errorf("%d inline SVG plots, want 11", n)
	}
	for _, want := range []string{"Bots connected", "Round-trip time", "Bandwidth per bot", "Handoffs",
		"Unexpected disconnects, failed reconnects, redirects", "unexpected disconnects (server shutdown / kicked / timeout / superseded / other)", "View error", "SLO gate", "view_err_p99", "Invariants", "a note &lt;with&gt; markup"} {
		if !strings.Contains(s, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(s, "<?xml") || strings.Contains(s, "font-face") {
		t.Error("SVG prolog or embedded font left in the page")
	}
}

func TestNetworkRefsCatchesReferences(t *testing.T) {
	// The checker itself must catch what it claims to.
	for _, bad := range []string{
		`<script src="https://cdn.example/x.js"></script>`,
		`<link rel="stylesheet" href="style.css">`,
		`<style>@import "x.css";</style>`,
		`<style>body{background:url(data:x)}</style>`,
		`<div style="background:url(x.png)"></div>`,
		`<svg><image xlink:href="http://x/y.png"/></svg>`,
		`<a href="http://example.com">x</a>`,
		`<img src="x.png">`,
	} {
		if refs := mustRefs(t, []byte("<html><body>"+bad+"</body></html>")); len(refs) == 0 {
			t.Errorf("not caught: %s", bad)
		}
	}
	if refs := mustRefs(t, []byte(`<svg xmlns="http://www.w3.org/2000/svg"><text>x</text></svg>`)); len(refs) != 0 {
		t.Errorf("xmlns flagged: %q", refs)
	}
}

func TestHTMLWithoutData(t *testing.T) {
	s := metrics.NewShard()
	start := time.Unix(0, 0)
	c := metrics.NewCollector([]*metrics.Shard{s}, 1, start)
	c.Sample(start.Add(time.Second))
	r := metrics.Build(c, nil, metrics.Options{})
	var b bytes.Buffer
	if err := WriteHTML(&b, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "no data") {
		t.Error("empty plots not marked")
	}
	if refs := mustRefs(t, b.Bytes()); len(refs) > 0 {
		t.Fatalf("refs %q", refs)
	}
}

func TestSummaryTable(t *testing.T) {
	r := sampleReport(t)
	var b bytes.Buffer
	if err := WriteSummary(&b, r); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"RTT", "p99", "view error", "handoff hitch", "moves acknowledged exactly once, in order", "HOLDS",
		"SLO rtt_p99<150ms,lost_moves=0,view_err_p99<1mm: FAILED", "view_err_p99 = ", "target < 0.001m: MISSED", "bots (target / peak / at end)", "50 / 50",
		"unexpected disconnects (server shutdown / kicked / timeout / superseded / other)", "reconnects (attempts / failed)",
		"redirects followed", "planned disconnects (end of run / churn)"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
}

func TestProgressLine(t *testing.T) {
	p := metrics.Point{T: 12, Connected: 4980, Target: 5000, PacketsInPS: 20.4, PacketsOutPS: 30, BytesInPS: 1900, BytesOutPS: 1100,
		RTTP50: 1.2, RTTP99: 8.4, Loss: 0.001, HandoffsTotal: 12}
	line := Progress(p, metrics.Counters{Errors: 3, Disconnects: 2})
	for _, want := range []string{"12s", "bots 4980/5000", "in 20.4 pkt/s 1.9 kB/s", "out 30 pkt/s 1.1 kB/s", "rtt p50 1.2 ms p99 8.4 ms", "loss 0.1%", "handoffs 12", "disconnects 2", "errors 3"} {
		if !strings.Contains(line, want) {
			t.Errorf("progress line %q lacks %q", line, want)
		}
	}
	if strings.Contains(line, "\n") {
		t.Error("progress line spans lines")
	}
	p.RTTP50, p.Loss = metrics.Num(math.NaN()), metrics.Num(math.NaN())
	if line := Progress(p, metrics.Counters{}); !strings.Contains(line, "p50 n/a") {
		t.Errorf("NaN not shown as n/a: %q", line)
	}
}

func mustRefs(t *testing.T, page []byte) []string {
	t.Helper()
	refs, err := NetworkRefs(page)
	if err != nil {
		t.Fatal(err)
	}
	return refs
}

// TestHTMLReadsRight: what a QA lead saw wrong. No --slo: the gate reads
// "none", not a green "passed" over an empty table. With the server's
// series: its panels are there. Time axes carry more than three labels;
// an all-zero series gets the axis 0…1, never −1…1; the legend's band
// stays clear of the data.
func TestHTMLReadsRight(t *testing.T) {
	r := sampleReport(t)
	r.Gate("", slo.Spec{})
	var b bytes.Buffer
	if err := WriteHTML(&b, r); err != nil {
		t.Fatal(err)
	}
	s := b.String()
	if strings.Contains(s, `SLO gate: <span class="ok">passed`) || !strings.Contains(s, "SLO gate: <span class=\"muted\">none") {
		t.Error("no --slo, yet the gate does not read 'none'")
	}
	if strings.Contains(s, "Server: zone tick cost") {
		t.Error("server panels without --metrics-url")
	}
	nan := metrics.Num(math.NaN())
	var ps []metrics.ServerPoint
	for sec := 1; sec <= 20; sec++ {
		ps = append(ps, metrics.ServerPoint{T: float64(sec), TickP50: 0.1, TickP99: metrics.Num(2 + sec%3), CPU: 0.4, HeapBytes: metrics.Num(50e6 + 1e6*sec), InputsDroppedPS: 0})
	}
	ps[0].CPU = nan
	r.SetServer(ps)
	b.Reset()
	if err := WriteHTML(&b, r); err != nil {
		t.Fatal(err)
	}
	s = b.String()
	for _, want := range []string{"Server: zone tick cost", "Server: Go heap allocated", "server (--metrics-url)", "Server: inputs dropped"} {
		if !strings.Contains(s, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if v := float64(r.Metrics["server_tick_p99"]); v != 0.004 {
		t.Errorf("server_tick_p99 = %v s, want 0.004", v)
	}
	if v := float64(r.Metrics["server_heap"]); v != 70e6 {
		t.Errorf("server_heap = %v", v)
	}

	labels := 0
	for _, tk := range (niceTicks{n: 8}).Ticks(0, 60) {
		if tk.Label != "" {
			labels++
		}
	}
	if labels < 5 || labels > 10 {
		t.Errorf("time axis 0…60 s: %d labelled ticks", labels)
	}
	if lo, hi := yRange(0, 0, 2); lo != 0 || hi < 1 {
		t.Errorf("all-zero axis %v…%v, want 0…≥1", lo, hi)
	}
	lo, hi := yRange(0, 100, 3)
	if lo != 0 || (hi-100)/(hi-lo) < 0.2 {
		t.Errorf("axis %v…%v leaves no band for a 3-entry legend", lo, hi)
	}
}

func TestSLOTableSplitsTheVerdict(t *testing.T) {
	r := sampleReport(t)
	var b bytes.Buffer
	if err := WriteHTML(&b, r); err != nil {
		t.Fatal(err)
	}
	s := b.String()
	if !strings.Contains(s, "<td>lost_moves = 0</td><td>= 0</td>") || strings.Contains(s, ": ok</td>") {
		t.Errorf("SLO rows not split into measured / target / verdict")
	}
}
