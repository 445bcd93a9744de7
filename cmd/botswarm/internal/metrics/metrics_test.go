package metrics

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/cmd/botswarm/internal/slo"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol*math.Max(1, math.Abs(b)) }

func TestHistPercentiles(t *testing.T) {
	h := NewHist(maxMicros, 1000, "ms")
	for v := int64(1); v <= 100000; v++ { // 1 µs … 100 ms, uniform
		h.Record(v)
	}
	for _, tc := range []struct{ q, want float64 }{{0.5, 50}, {0.9, 90}, {0.99, 99}, {0.999, 99.9}} {
		if got := h.Quantile(tc.q); !near(got, tc.want, 0.002) {
			t.Errorf("q%v = %v ms, want %v", tc.q, got, tc.want)
		}
	}
	if got := h.Max(); !near(got, 100, 0.002) {
		t.Errorf("max = %v", got)
	}
	s := h.Summarize()
	if s.Count != 100000 || s.Unit != "ms" || !near(s.Mean, 50, 0.002) {
		t.Errorf("summary %+v", s)
	}
	var n float64
	for i, b := range s.Buckets {
		n += b[1]
		if i > 0 && b[0] <= s.Buckets[i-1][0] {
			t.Fatal("buckets not ascending")
		}
	}
	if n != 100000 {
		t.Errorf("buckets hold %v samples", n)
	}
	xs, ps := s.CDF()
	if ps[len(ps)-1] != 1 || !near(xs[len(xs)-1], 100, 0.002) {
		t.Errorf("CDF ends at %v, %v", xs[len(xs)-1], ps[len(ps)-1])
	}
}

func TestHistClampAndNegative(t *testing.T) {
	h := NewHist(1000, 1, "x")
	h.Record(-5)
	h.Record(5000)
	s := h.Summarize()
	if s.Count != 2 || s.Clamped != 1 || s.Min != 0 || !near(s.Max, 1000, 0.002) {
		t.Fatalf("summary %+v", s)
	}
}

func TestHistMergeReset(t *testing.T) {
	a, b := NewHist(maxMicros, 1, "us"), NewHist(maxMicros, 1, "us")
	a.Record(10)
	b.Record(1000)
	b.Record(1000)
	a.Merge(b)
	if a.Count() != 3 || !near(a.Quantile(0.9), 1000, 0.002) {
		t.Fatalf("merged count %d p90 %v", a.Count(), a.Quantile(0.9))
	}
	a.Reset()
	if a.Count() != 0 || !math.IsNaN(a.Quantile(0.5)) || !math.IsNaN(a.Max()) {
		t.Fatal("reset histogram not empty")
	}
	if s := a.Summarize(); s.Count != 0 || len(s.Buckets) != 0 {
		t.Fatalf("empty summary %+v", s)
	}
}

func TestHistRecordDoesNotAllocate(t *testing.T) {
	h := NewHist(maxMicros, 1000, "ms")
	if n := testing.AllocsPerRun(1000, func() { h.Record(1234) }); n != 0 {
		t.Fatalf("Record allocates %v times", n)
	}
}

func TestCountersAddCoversEveryField(t *testing.T) {
	// Set every field of o to 1 by reflection: Add must carry each one.
	var o Counters
	v := reflect.ValueOf(&o).Elem()
	for i := range v.NumField() {
		switch v.Field(i).Kind() {
		case reflect.Uint64:
			v.Field(i).SetUint(1)
		case reflect.Int64:
			v.Field(i).SetInt(1)
		}
	}
	var c Counters
	c.Add(&o)
	c.Add(&o)
	cv := reflect.ValueOf(c)
	for i := range cv.NumField() {
		f := cv.Field(i)
		if (f.Kind() == reflect.Uint64 && f.Uint() != 2) || (f.Kind() == reflect.Int64 && f.Int() != 2) {
			t.Errorf("Add drops field %s", cv.Type().Field(i).Name)
		}
	}
}

// fakeClock drives a collector without the wall clock.
func newTestCollector(shards []*Shard, target int) (*Collector, time.Time) {
	start := time.Unix(1000, 0)
	c := NewCollector(shards, target, start)
	cpu := time.Duration(0)
	c.cpu = func() time.Duration { cpu += 500 * time.Millisecond; return cpu }
	c.prevCPU = 0
	return c, start
}

func TestCollectorRatesAndIntervals(t *testing.T) {
	a, b := NewShard(), NewShard()
	c, start := newTestCollector([]*Shard{a, b}, 10)

	a.C.Connected, b.C.Connected = 3, 2
	a.C.PacketsIn, b.C.PacketsIn = 100, 50 // 150 packets / 5 bots / 1 s = 30
	a.C.BytesOut = 5000
	a.C.FatesDelivered, a.C.FatesDropped = 90, 10
	a.C.InReceived, a.C.InAbandoned = 100, 0
	a.C.NetSent, a.C.NetDropped = 200, 20
	a.C.Handoffs = 4
	a.C.Disconnects, b.C.Disconnects, a.C.ReconnectFails, b.C.Redirects = 2, 1, 4, 6
	a.C.GhostsHeld, a.C.GhostSamples = 50, 5
	a.H.RTT.Record(10_000) // 10 ms
	b.H.RTT.Record(30_000) // 30 ms
	p := c.Sample(start.Add(time.Second))
	if p.Connected != 5 || p.Target != 10 || !near(float64(p.PacketsInPS), 30, 1e-9) || !near(float64(p.BytesOutPS), 1000, 1e-9) {
		t.Fatalf("point %+v", p)
	}
	if !near(float64(p.Loss), 10.0/200, 1e-9) || !near(float64(p.NetLoss), 0.1, 1e-9) || p.Handoffs != 4 || !near(float64(p.Ghosts), 10, 1e-9) {
		t.Fatalf("loss/handoffs/ghosts %+v", p)
	}
	if !near(float64(p.RTTP99), 30, 0.002) || !near(float64(p.RTTP50), 10, 0.002) {
		t.Fatalf("rtt %v %v", p.RTTP50, p.RTTP99)
	}
	if p.Disconnects != 3 || p.ReconnectFails != 4 || p.Redirects != 6 {
		t.Fatalf("sessions this second: %d disconnects, %d failed reconnects, %d redirects", p.Disconnects, p.ReconnectFails, p.Redirects)
	}
	if !near(float64(p.CPU), 0.5, 1e-9) {
		t.Fatalf("cpu %v", p.CPU)
	}
	// The shards' interval histograms were taken.
	if a.H.RTT.Count() != 0 || b.H.RTT.Count() != 0 {
		t.Fatal("shard histograms not reset by Sample")
	}

	// Second 2: nothing new; rates are zero, percentiles unknown, totals kept.
	p = c.Sample(start.Add(2 * time.Second))
	if p.PacketsInPS != 0 || p.Handoffs != 0 || p.HandoffsTotal != 4 || p.Disconnects != 0 || p.ReconnectFails != 0 || p.Redirects != 0 || !math.IsNaN(float64(p.RTTP50)) || !math.IsNaN(float64(p.Loss)) {
		t.Fatalf("idle point %+v", p)
	}
	if c.Hists().RTT.Count() != 2 {
		t.Fatalf("whole-run RTT count %d", c.Hists().RTT.Count())
	}
	if len(c.Series()) != 2 || c.Elapsed() != 2*time.Second {
		t.Fatalf("series %d elapsed %v", len(c.Series()), c.Elapsed())
	}
}

func TestCollectorNoBotsNoRates(t *testing.T) {
	s := NewShard()
	c, start := newTestCollector([]*Shard{s}, 5)
	s.C.PacketsIn = 10
	p := c.Sample(start.Add(time.Second))
	if !math.IsNaN(float64(p.PacketsInPS)) {
		t.Fatalf("per-bot rate with no bot connected: %v", p.PacketsInPS)
	}
}

func buildReport(t *testing.T, mutate func(s *Shard), o Options) *Report {
	t.Helper()
	s := NewShard()
	c, start := newTestCollector([]*Shard{s}, 4)
	s.C.Connected = 4
	s.C.Sessions, s.C.Connects = 4, 4
	s.C.MovesSent, s.C.MovesAcked = 100, 100
	s.C.EventsSent, s.C.EventsEchoed = 10, 10
	s.C.BytesIn, s.C.BytesOut = 8000, 4000
	s.H.RTT.Record(20_000)
	s.H.ViewErr.Record(30_000) // 3 cm
	s.H.Hitch.Record(120_000)
	s.C.Handoffs = 1
	if mutate != nil {
		mutate(s)
	}
	c.Sample(start.Add(time.Second))
	s.C.Connected = 0
	c.Sample(start.Add(2 * time.Second))
	return Build(c, map[string]any{"bots": 4}, o)
}

func TestBuildMetricsAndInvariants(t *testing.T) {
	r := buildReport(t, nil, Options{EchoExpected: true})
	if !near(float64(r.Metrics["rtt_p99"]), 0.020, 0.002) {
		t.Errorf("rtt_p99 = %v s", r.Metrics["rtt_p99"])
	}
	if !near(float64(r.Metrics["view_err_p99"]), 0.03, 0.002) {
		t.Errorf("view_err_p99 = %v m", r.Metrics["view_err_p99"])
	}
	if !near(float64(r.Metrics["bytes_in_per_bot"]), 2000, 1e-9) || r.Metrics["connected"] != 1 || r.PeakBots != 4 {
		t.Errorf("bytes_in_per_bot %v connected %v peak %d", r.Metrics["bytes_in_per_bot"], r.Metrics["connected"], r.PeakBots)
	}
	for name := range r.Metrics {
		if _, ok := Known[name]; !ok {
			t.Errorf("metric %q is not in Known (an SLO could not name it)", name)
		}
	}
	for name := range Known {
		if _, ok := r.Metrics[name]; !ok {
			t.Errorf("Known metric %q is never reported", name)
		}
	}
	for _, inv := range r.Invariants {
		if !inv.Checked || !inv.OK {
			t.Errorf("invariant %q: checked %v ok %v (%s)", inv.Name, inv.Checked, inv.OK, inv.Detail)
		}
	}
}

func TestInvariantViolations(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(s *Shard)
		o      Options
		inv    int
		ok     bool
	}{
		{"lost move", func(s *Shard) { s.C.MovesLost = 1 }, Options{}, 0, false},
		{"unacked move", func(s *Shard) { s.C.MovesUnacked = 2 }, Options{}, 0, false},
		{"correction", func(s *Shard) { s.C.Corrections = 1 }, Options{}, 0, false},
		{"correction expected", func(s *Shard) { s.C.Corrections = 1 }, Options{CorrectionsExpected: true}, 0, true},
		{"corrupt event", func(s *Shard) { s.C.EventsCorrupt = 1 }, Options{}, 1, false},
		{"reordered event", func(s *Shard) { s.C.EventsOutOfOrder = 1 }, Options{}, 1, false},
		{"duplicate event", func(s *Shard) { s.C.EventsDuplicate = 1 }, Options{}, 1, false},
		{"lost event", func(s *Shard) { s.C.EventsLost = 1 }, Options{}, 1, false},
		{"foreign event", func(s *Shard) { s.C.EventsForeign = 1 }, Options{}, 1, false},
		{"no echo at all, expected", func(s *Shard) { s.C.EventsEchoed = 0 }, Options{EchoExpected: true}, 1, false},
		{"disconnected by the server", func(s *Shard) { s.C.Disconnected(CauseShutdown) }, Options{}, 4, false},
		{"kicked", func(s *Shard) { s.C.Disconnected(CauseKicked) }, Options{}, 4, false},
		{"timed out", func(s *Shard) { s.C.Disconnected(CauseTimeout) }, Options{}, 4, false},
		{"redirected, not disconnected", func(s *Shard) { s.C.Redirects = 4 }, Options{}, 4, true},
		{"failed reconnects", func(s *Shard) { s.C.ConnectFails, s.C.ReconnectFails = 20, 20 }, Options{}, 4, false},
		{"failed first connect", func(s *Shard) { s.C.ConnectFails = 1 }, Options{}, 4, false},
		{"bots quit themselves (churn)", func(s *Shard) { s.C.Sessions, s.C.Quits, s.C.QuitsChurn, s.C.ReconnectAttempts = 40, 36, 32, 36 }, Options{}, 4, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := buildReport(t, tc.mutate, tc.o)
			if got := r.Invariants[tc.inv]; got.OK != tc.ok {
				t.Fatalf("%s: ok = %v, want %v (%s)", got.Name, got.OK, tc.ok, got.Detail)
			}
		})
	}
	r := buildReport(t, func(s *Shard) { s.C.EventsEchoed = 0 }, Options{})
	if r.Invariants[1].Checked {
		t.Error("no echo and none expected: must read 'not checked'")
	}
	if !strings.Contains(r.Invariants[1].Detail, "echo") {
		t.Errorf("detail %q", r.Invariants[1].Detail)
	}
}

// TestDisconnectsCanFailTheSLO: "disconnects=0" and "failed_reconnects=0"
// are SLO targets that a run whose server went away misses (the tester's
// run: 10 bots dropped, 20 reconnect attempts failed).
func TestDisconnectsCanFailTheSLO(t *testing.T) {
	spec, err := slo.Parse("disconnects=0,failed_reconnects=0,reconnect_failures=0,connect_failures=0,disconnects_shutdown=0", Known)
	if err != nil {
		t.Fatal(err)
	}
	if r := buildReport(t, nil, Options{}); !r.Gate("s", spec) {
		t.Fatalf("clean run misses: %+v", r.SLO.Results)
	}
	r := buildReport(t, func(s *Shard) {
		for range 10 {
			s.C.Disconnected(CauseShutdown)
		}
		s.C.ConnectFails, s.C.ReconnectAttempts, s.C.ReconnectFails = 20, 20, 20
	}, Options{})
	if r.Gate("s", spec) {
		t.Fatal("10 disconnects and 20 failed reconnects pass disconnects=0")
	}
	for _, v := range r.SLO.Results {
		if v.OK {
			t.Errorf("%s passed", v.Text)
		}
	}
}

func TestGateAndJSONRoundTrip(t *testing.T) {
	r := buildReport(t, nil, Options{})
	spec, err := slo.Parse("rtt_p99<150ms,lost_moves=0,view_err_p99<0.5m,loss<2%", Known)
	if err != nil {
		t.Fatal(err)
	}
	// loss has no data (no fates): NaN misses its target, named.
	if r.Gate("spec", spec) {
		t.Fatal("gate passed though loss has no data")
	}
	if r.SLO.Results[3].OK || r.SLO.Results[0].OK == false {
		t.Fatalf("verdicts %+v", r.SLO.Results)
	}
	var buf bytes.Buffer
	if err := r.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatalf("report JSON does not parse: %v", err)
	}
	if !math.IsNaN(float64(back.Metrics["loss"])) || back.Totals.MovesSent != 100 || len(back.Series) != 2 ||
		back.Histograms["rtt"].Count != 1 || back.SLO == nil || back.SLO.Passed {
		t.Fatalf("round trip lost data: %+v", back.Metrics)
	}
	if !strings.Contains(buf.String(), `"loss": null`) {
		t.Error("NaN metric not written as null")
	}
}

// TestHandoffHitchHasALimit: a stalled handoff (hitch p50 16.5 s, as seen
// at 1,000 bots) must fail the invariant; a hitch within two ticks plus the
// RTT holds; --hitch-limit and the network's slack move the bound.
func TestHandoffHitchHasALimit(t *testing.T) {
	const hitch = 3
	tests := []struct {
		name   string
		sample int64 // µs
		gap    int64 // µs, ordinary play's longest gap per window (0: none)
		o      Options
		ok     bool
	}{
		{"stalled 16.5 s", 16_500_000, 0, Options{}, false},
		{"stalled 1 s", 1_000_000, 0, Options{}, false},
		{"stalled 600 ms, ordinary gaps one tick", 600_000, 50_000, Options{}, false},
		{"three ticks, no slack", 150_000 + 25_000, 0, Options{}, false},
		{"one skipped update", 100_000, 0, Options{}, true},
		{"two ticks + RTT", 118_000, 0, Options{}, true},
		{"slower server tick", 210_000, 0, Options{Tick: 100 * time.Millisecond}, true},
		{"slack for simulated loss", 300_000, 0, Options{HitchSlack: 200 * time.Millisecond}, true},
		{"busy host: ordinary gaps of 170 ms", 160_000, 170_000, Options{}, true},
		{"busy host cannot hide a 16.5 s stall", 16_500_000, 5_000_000, Options{}, false},
		{"explicit limit tighter", 100_000, 0, Options{HitchLimit: 60 * time.Millisecond}, false},
		{"explicit limit looser", 16_500_000, 0, Options{HitchLimit: 20 * time.Second}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := buildReport(t, func(s *Shard) {
				s.H.Hitch.Reset()
				for range 50 {
					s.H.Hitch.Record(tc.sample)
					if tc.gap > 0 {
						s.H.Gap.Record(tc.gap)
					}
				}
			}, tc.o)
			inv := r.Invariants[hitch]
			if !strings.HasPrefix(inv.Name, "handoff hitch") {
				t.Fatalf("invariant %d is %q", hitch, inv.Name)
			}
			if inv.OK != tc.ok || !inv.Checked {
				t.Fatalf("hitch %v µs: ok %v checked %v, want ok %v (%s)", tc.sample, inv.OK, inv.Checked, tc.ok, inv.Detail)
			}
			if !strings.Contains(inv.Detail, "limit") || inv.Counts["limit_us"] == 0 {
				t.Errorf("detail does not state the limit: %q %v", inv.Detail, inv.Counts)
			}
		})
	}
}

// TestDisconnectCauses: every unexpected disconnect lands in Disconnects and
// in exactly one cause, and the report's metrics, invariant counts and
// detail carry each cause apart; redirects and planned quits are not
// disconnects.
func TestDisconnectCauses(t *testing.T) {
	r := buildReport(t, func(s *Shard) {
		for cause, n := range map[Cause]int{CauseShutdown: 5, CauseKicked: 1, CauseTimeout: 3, CauseSuperseded: 4, CauseOther: 2} {
			for range n {
				s.C.Disconnected(cause)
			}
		}
		s.C.ReconnectAttempts, s.C.ReconnectFails, s.C.ConnectFails = 11, 7, 7
		s.C.Redirects, s.C.Quits, s.C.QuitsChurn = 6, 9, 4
	}, Options{})
	want := map[string]float64{"disconnects": 15, "disconnects_shutdown": 5, "disconnects_kicked": 1,
		"disconnects_timeout": 3, "disconnects_superseded": 4, "disconnects_other": 2, "reconnect_attempts": 11, "failed_reconnects": 7,
		"reconnect_failures": 7, "redirects": 6, "planned_disconnects": 9}
	for k, v := range want {
		if got := float64(r.Metrics[k]); got != v {
			t.Errorf("metric %s = %v, want %v", k, got, v)
		}
	}
	inv := r.Invariants[4]
	if inv.Name != SessionsInvariant || !inv.Checked || inv.OK {
		t.Fatalf("%q: checked %v ok %v", inv.Name, inv.Checked, inv.OK)
	}
	for k, v := range map[string]uint64{"disconnects_shutdown": 5, "disconnects_kicked": 1, "disconnects_timeout": 3,
		"disconnects_superseded": 4, "disconnects_other": 2, "failed_reconnects": 7, "reconnect_attempts": 11, "redirects": 6, "planned_disconnects": 9, "planned_churn": 4} {
		if inv.Counts[k] != v {
			t.Errorf("invariant count %s = %d, want %d", k, inv.Counts[k], v)
		}
	}
	for _, w := range []string{"15 disconnected unexpectedly (server shutdown 5, kicked 1, timeout 3, superseded 4, other 2)", "11 reconnect attempts, 7 failed", "6 redirected"} {
		if !strings.Contains(inv.Detail, w) {
			t.Errorf("detail lacks %q: %s", w, inv.Detail)
		}
	}
	raw, err := json.Marshal(r.Totals)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"disconnects", "disconnects_shutdown", "disconnects_kicked", "disconnects_timeout",
		"disconnects_superseded", "disconnects_other", "reconnect_attempts", "reconnect_fails", "redirects", "quits", "quits_churn"} {
		if !strings.Contains(string(raw), `"`+k+`":`) {
			t.Errorf("totals JSON lacks %q", k)
		}
	}
}

// TestExpectedDisconnectsAreNotJudged: with --expect-disconnects (chaos
// runs) the sessions invariant reports its counts but fails nothing; the
// SLO still can.
func TestExpectedDisconnectsAreNotJudged(t *testing.T) {
	mutate := func(s *Shard) { s.C.Disconnected(CauseTimeout) }
	inv := buildReport(t, mutate, Options{DisconnectsExpected: true}).Invariants[4]
	if inv.Checked || inv.Counts["disconnects_timeout"] != 1 || !strings.Contains(inv.Detail, "--expect-disconnects") {
		t.Fatalf("%+v", inv)
	}
	spec, err := slo.Parse("disconnects_timeout=0", Known)
	if err != nil {
		t.Fatal(err)
	}
	if buildReport(t, mutate, Options{DisconnectsExpected: true}).Gate("s", spec) {
		t.Fatal("disconnects_timeout=0 passes with a timeout")
	}
}

// TestConnectedAtTheRunsEndNotWhileDraining: the "connected" ratio is read
// from the last sample before the bots began to drain, however many samples
// fall in the drain (under load two or more do, with bots already quitting).
func TestConnectedAtTheRunsEndNotWhileDraining(t *testing.T) {
	s := NewShard()
	c, start := newTestCollector([]*Shard{s}, 6)
	for i, connected := range []int64{6, 6, 5, 2, 0} {
		if i >= 2 {
			c.Draining() // the run ended after the second sample
		}
		s.C.Connected = connected
		c.Sample(start.Add(time.Duration(i+1) * time.Second))
	}
	r := Build(c, nil, Options{})
	if got := float64(r.Metrics["connected"]); got != 1 {
		t.Errorf("connected %v at the run's end, want 1 (6 of 6 before the drain)", got)
	}
	for i, p := range r.Series {
		if p.Draining != (i >= 2) {
			t.Errorf("sample %d draining %v", i, p.Draining)
		}
	}

	// A report written before samples were marked reads the second-to-last.
	old := []Point{{Target: 4, Connected: 4}, {Target: 4, Connected: 3}, {Target: 4, Connected: 0}}
	if p, ok := endOfRun(old); !ok || p.Connected != 3 {
		t.Errorf("unmarked series: end of run %+v %v, want the second-to-last", p, ok)
	}
	// Every sample drains (a run shorter than a second): the first.
	all := []Point{{Target: 4, Connected: 4, Draining: true}, {Target: 4, Connected: 0, Draining: true}}
	if p, ok := endOfRun(all); !ok || p.Connected != 4 {
		t.Errorf("all draining: end of run %+v %v, want the first", p, ok)
	}
	if _, ok := endOfRun(nil); ok {
		t.Error("an empty series has an end of run")
	}
}
