package metrics

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"time"

	"github.com/ghostwire/ghostwire/cmd/botswarm/internal/slo"
)

// Known lists every metric an SLO may name, with its kind. Values are in
// base units (seconds, fractions, metres, counts).
var Known = map[string]slo.Kind{
	"rtt_p50": slo.Duration, "rtt_p90": slo.Duration, "rtt_p99": slo.Duration, "rtt_p999": slo.Duration, "rtt_max": slo.Duration,
	"ack_p50": slo.Duration, "ack_p99": slo.Duration, "ack_max": slo.Duration,
	"echo_p50": slo.Duration, "echo_p99": slo.Duration, "echo_max": slo.Duration,
	"connect_p99": slo.Duration,
	"placed_p99":  slo.Duration, "placed_max": slo.Duration, // connected → the player's first state
	"view_err_p50": slo.Distance, "view_err_p90": slo.Distance, "view_err_p99": slo.Distance, "view_err_max": slo.Distance,
	"hitch_p50": slo.Duration, "hitch_p99": slo.Duration, "hitch_max": slo.Duration,
	"loss":       slo.Ratio, // protocol loss, both directions (notify fates and abandoned sequences)
	"loss_out":   slo.Ratio, // bot → server packets declared dropped
	"loss_in":    slo.Ratio, // server → bot packets given up
	"net_loss":   slo.Ratio, // what the simulated network dropped
	"lost_moves": slo.Count, "unacked_moves": slo.Count, "redirected_moves": slo.Count, "stale_acks": slo.Count, "corrections": slo.Count,
	"lost_events": slo.Count, "corrupt_events": slo.Count, "reordered_events": slo.Count, "duplicate_events": slo.Count,
	"connect_failures": slo.Count, "errors": slo.Count,
	// Sessions: unexpected disconnects (all causes, then each), reconnects,
	// redirects and the bots' own planned disconnects.
	"disconnects": slo.Count, "disconnects_shutdown": slo.Count, "disconnects_kicked": slo.Count,
	"disconnects_timeout": slo.Count, "disconnects_superseded": slo.Count, "disconnects_other": slo.Count,
	"unplaced_sessions":  slo.Count, // up, but no zone ever took the player (a join or restore refused)
	"reconnect_attempts": slo.Count, "failed_reconnects": slo.Count,
	"reconnect_failures":  slo.Count, // the same count as failed_reconnects (its first name)
	"redirects":           slo.Count, // server Redirects followed (a draining node): no disconnect
	"planned_disconnects": slo.Count, // sessions the bots ended themselves (end of run, churn)
	"connected":           slo.Ratio, // bots connected at the end / target
	"peak_connected":      slo.Count,
	"handoffs":            slo.Count,
	"view_samples":        slo.Count,
	"echoes":              slo.Count,
	"bytes_in_per_bot":    slo.Count, // bytes per second per connected bot, run mean
	"bytes_out_per_bot":   slo.Count,
	"cpu_per_bot":         slo.Ratio, // cores per connected bot, run mean (botswarm's own CPU)
	// The server's own figures, scraped with --metrics-url (no data without).
	"server_tick_p99": slo.Duration, // worst scraped zone tick cost p99
	"server_cpu":      slo.Ratio,    // mean server CPU in cores while bots were connected
	"server_heap":     slo.Count,    // largest scraped heap, bytes
}

// Invariant is one correctness property the bots checked, with its counts.
type Invariant struct {
	Name    string            `json:"name"`
	OK      bool              `json:"ok"`
	Checked bool              `json:"checked"` // false: no data to check it with
	Detail  string            `json:"detail"`
	Counts  map[string]uint64 `json:"counts"`
}

// SLOResult is the gate's verdict.
type SLOResult struct {
	Spec    string       `json:"spec"`
	Passed  bool         `json:"passed"`
	Results []SLOVerdict `json:"results"`
}

// SLOVerdict is one target's verdict.
type SLOVerdict struct {
	Metric string `json:"metric"`
	Op     string `json:"op"`
	Target Num    `json:"target"`
	Value  Num    `json:"value"`
	OK     bool   `json:"ok"`
	Text   string `json:"text"`
}

// Report is everything a run measured: botswarm's JSON report and the
// input of the HTML report and the summary table.
type Report struct {
	Tool       string             `json:"tool"`
	Version    int                `json:"version"`
	Started    time.Time          `json:"started"`
	Duration   float64            `json:"duration_s"`
	Config     any                `json:"config"`
	Totals     Counters           `json:"totals"`
	PeakBots   int64              `json:"peak_connected"`
	Metrics    map[string]Num     `json:"metrics"`
	Histograms map[string]Summary `json:"histograms"`
	Invariants []Invariant        `json:"invariants"`
	SLO        *SLOResult         `json:"slo,omitempty"`
	// Self is what botswarm itself cost (its process, not the server's).
	Self   *SelfCost `json:"botswarm,omitempty"`
	Series []Point   `json:"series"`
	// Server is the server's own view, scraped once a second from
	// --metrics-url (absent without it).
	Server []ServerPoint `json:"server_series,omitempty"`
	Notes  []string      `json:"notes,omitempty"`
}

// SelfCost is botswarm's own cost: CPU per bot (the swarm's price), the
// socket layer and how many bots decoded ghosts.
type SelfCost struct {
	CPUSeconds float64 `json:"cpu_seconds"` // process CPU over the run (user + system)
	// CoresMean: mean cores used over the seconds with bots connected.
	CoresMean Num `json:"cpu_cores_mean"`
	// CPUPerBotMs: milliseconds of CPU per connected bot-second (= 1000 ×
	// the cpu_per_bot metric); BotsPerCore is its inverse.
	CPUPerBotMs Num    `json:"cpu_ms_per_bot_second"`
	BotsPerCore Num    `json:"bots_per_core"`
	MaxRSS      int64  `json:"max_rss_bytes"` // peak resident set (−1: unknown)
	Transport   string `json:"transport"`
	Workers     int    `json:"workers"`
	Observers   int    `json:"observers"` // bots that decoded ghosts
}

// ReportVersion is bumped when the JSON layout changes incompatibly.
const ReportVersion = 1

// Options tune how Build judges the invariants.
type Options struct {
	// EchoExpected: the server should echo lane-0 events, so no echo at all
	// is a violation rather than "not checked".
	EchoExpected bool
	// CorrectionsExpected: the scenario moves bots in ways the client cannot
	// predict (teleports, crowd collisions), so corrections are not a
	// violation of the move invariant.
	CorrectionsExpected bool
	// Tick is the server's tick period (0: DefaultTick, zoned's 20 Hz).
	Tick time.Duration
	// HitchLimit bounds the handoff hitch p99. 0 derives it: two ticks plus
	// the run's RTT p99 plus HitchSlack.
	HitchLimit time.Duration
	// HitchSlack widens the derived limit by what the simulated network
	// alone explains (runs of lost packets, jitter); see HitchSlack().
	HitchSlack time.Duration
	// DisconnectsExpected: the run drops sessions on purpose (chaos: nodes
	// killed), so the sessions invariant reports its counts without judging
	// them; an SLO (disconnects_shutdown=0, …) gates what must not happen.
	DisconnectsExpected bool
}

// DefaultTick is zoned's default tick period (20 Hz).
const DefaultTick = 50 * time.Millisecond

// MaxHostSlack caps how far ordinary play's own gaps (a slow or busy
// host) can widen the handoff-hitch limit: a stall of seconds fails however
// noisy the run.
const MaxHostSlack = time.Second

// hitchLimit is the bound on the handoff hitch p99, and how it was derived:
// two ticks plus the RTT p99, plus the larger of what the simulated network
// explains (o.HitchSlack) and what ordinary play away from handoffs already
// shows beyond one tick (the control-gap p99 − 1 tick, at most MaxHostSlack).
func (o Options) hitchLimit(rttP99ms, gapP99ms float64) (time.Duration, string) {
	if o.HitchLimit > 0 {
		return o.HitchLimit, "set by --hitch-limit"
	}
	tick := o.Tick
	if tick <= 0 {
		tick = DefaultTick
	}
	ms := func(v float64) time.Duration {
		if math.IsNaN(v) || v <= 0 {
			return 0
		}
		return time.Duration(v * float64(time.Millisecond))
	}
	rtt := ms(rttP99ms)
	host := min(max(ms(gapP99ms)-tick, 0), MaxHostSlack)
	l := 2*tick + rtt + max(o.HitchSlack, host)
	how := fmt.Sprintf("2 ticks of %v + RTT p99 %v", tick, rtt.Round(100*time.Microsecond))
	switch {
	case host > o.HitchSlack:
		how += fmt.Sprintf(" + %v that ordinary play's gaps already show", host.Round(time.Millisecond))
	case o.HitchSlack > 0:
		how += fmt.Sprintf(" + %v that the simulated network explains", o.HitchSlack.Round(time.Millisecond))
	}
	return l, how
}

// Build assembles the report from a collector after its final Sample.
func Build(c *Collector, config any, o Options) *Report {
	t := c.Totals()
	r := &Report{
		Tool: "botswarm", Version: ReportVersion, Started: c.start,
		Duration: c.Elapsed().Seconds(), Config: config, Totals: t,
		Histograms: map[string]Summary{}, Series: c.Series(),
	}
	c.Hists().each(func(name string, h *Hist) { r.Histograms[name] = h.Summarize() })
	for _, p := range r.Series {
		r.PeakBots = max(r.PeakBots, p.Connected)
	}
	r.Metrics = r.values(c)
	r.Invariants = invariants(t, r.Histograms, o)
	r.Self = r.selfCost(c)
	return r
}

func (r *Report) selfCost(c *Collector) *SelfCost {
	s := &SelfCost{CoresMean: Num(math.NaN()), CPUPerBotMs: Num(math.NaN()), BotsPerCore: Num(math.NaN()), MaxRSS: ProcessMaxRSS()}
	if c.prevCPU >= 0 && c.startCPU >= 0 {
		s.CPUSeconds = (c.prevCPU - c.startCPU).Seconds()
	}
	var cores float64
	n := 0
	for _, p := range r.Series {
		if p.Connected > 0 && !math.IsNaN(float64(p.CPU)) {
			cores += float64(p.CPU)
			n++
		}
	}
	if n > 0 {
		s.CoresMean = Num(cores / float64(n))
	}
	if v := float64(r.Metrics["cpu_per_bot"]); v > 0 {
		s.CPUPerBotMs, s.BotsPerCore = Num(1000*v), Num(1/v)
	}
	return s
}

func (r *Report) values(c *Collector) map[string]Num {
	t := r.Totals
	h := c.Hists()
	m := map[string]Num{}
	q := func(prefix string, x *Hist, scale float64, qs ...float64) {
		for _, v := range qs {
			name := prefix + "_p" + pctName(v)
			m[name] = Num(x.Quantile(v) * scale)
		}
		m[prefix+"_max"] = Num(x.Max() * scale)
	}
	q("rtt", h.RTT, 1e-3, 0.5, 0.9, 0.99, 0.999)
	q("ack", h.Ack, 1e-3, 0.5, 0.99)
	q("echo", h.Echo, 1e-3, 0.5, 0.99)
	q("view_err", h.ViewErr, 1, 0.5, 0.9, 0.99)
	q("hitch", h.Hitch, 1e-3, 0.5, 0.99)
	m["connect_p99"] = Num(h.Connect.Quantile(0.99) * 1e-3)
	m["placed_p99"], m["placed_max"] = Num(h.Placed.Quantile(0.99)*1e-3), Num(h.Placed.Max()*1e-3)
	m["loss"] = lossOf(&t)
	m["loss_out"] = ratio(t.FatesDropped, t.FatesDropped+t.FatesDelivered)
	m["loss_in"] = ratio(t.InAbandoned, t.InAbandoned+t.InReceived)
	m["net_loss"] = ratio(t.NetDropped, t.NetSent)
	m["lost_moves"] = Num(t.MovesLost)
	m["unacked_moves"] = Num(t.MovesUnacked)
	m["redirected_moves"] = Num(t.MovesRedirected)
	m["stale_acks"] = Num(t.StaleAcks)
	m["corrections"] = Num(t.Corrections)
	m["lost_events"] = Num(t.EventsLost)
	m["corrupt_events"] = Num(t.EventsCorrupt)
	m["reordered_events"] = Num(t.EventsOutOfOrder)
	m["duplicate_events"] = Num(t.EventsDuplicate)
	m["connect_failures"] = Num(t.ConnectFails)
	m["disconnects"] = Num(t.Disconnects)
	m["disconnects_shutdown"] = Num(t.DisconnectsShutdown)
	m["disconnects_kicked"] = Num(t.DisconnectsKicked)
	m["disconnects_timeout"] = Num(t.DisconnectsTimeout)
	m["disconnects_superseded"] = Num(t.DisconnectsSuperseded)
	m["disconnects_other"] = Num(t.DisconnectsOther)
	m["unplaced_sessions"] = Num(t.SessionsUnplaced)
	m["reconnect_attempts"] = Num(t.ReconnectAttempts)
	m["failed_reconnects"] = Num(t.ReconnectFails)
	m["reconnect_failures"] = Num(t.ReconnectFails)
	m["redirects"] = Num(t.Redirects)
	m["planned_disconnects"] = Num(t.Quits)
	m["errors"] = Num(t.Errors)
	m["handoffs"] = Num(t.Handoffs)
	m["view_samples"] = Num(t.ViewSamples)
	m["echoes"] = Num(t.EventsEchoed)
	m["peak_connected"] = Num(r.PeakBots)
	m["connected"] = Num(math.NaN())
	if last, ok := endOfRun(r.Series); ok {
		m["connected"] = Num(float64(last.Connected) / float64(last.Target))
	}
	// Run means over the seconds with bots connected.
	var bin, bout, cpu, botSeconds, cpuSeconds float64
	for _, p := range r.Series {
		if p.Connected <= 0 {
			continue
		}
		if !math.IsNaN(float64(p.BytesInPS)) {
			bin += float64(p.BytesInPS) * float64(p.Connected)
			bout += float64(p.BytesOutPS) * float64(p.Connected)
			botSeconds += float64(p.Connected)
		}
		if !math.IsNaN(float64(p.CPU)) {
			cpu += float64(p.CPU)
			cpuSeconds += float64(p.Connected)
		}
	}
	m["bytes_in_per_bot"], m["bytes_out_per_bot"], m["cpu_per_bot"] = Num(math.NaN()), Num(math.NaN()), Num(math.NaN())
	if botSeconds > 0 {
		m["bytes_in_per_bot"] = Num(bin / botSeconds)
		m["bytes_out_per_bot"] = Num(bout / botSeconds)
	}
	if cpuSeconds > 0 {
		m["cpu_per_bot"] = Num(cpu / cpuSeconds)
	}
	m["server_tick_p99"], m["server_cpu"], m["server_heap"] = Num(math.NaN()), Num(math.NaN()), Num(math.NaN())
	return m
}

// SetServer adds the server's scraped series and its summary metrics.
func (r *Report) SetServer(ps []ServerPoint) {
	r.Server = ps
	tick, heap, cpu, n := math.NaN(), math.NaN(), 0.0, 0
	for _, p := range ps {
		if v := float64(p.TickP99); !math.IsNaN(v) && !(v <= tick) {
			tick = v
		}
		if v := float64(p.HeapBytes); !math.IsNaN(v) && !(v <= heap) {
			heap = v
		}
		if v := float64(p.CPU); !math.IsNaN(v) && r.connectedAt(p.T) {
			cpu += v
			n++
		}
	}
	r.Metrics["server_tick_p99"] = Num(tick / 1e3)
	r.Metrics["server_heap"] = Num(heap)
	r.Metrics["server_cpu"] = Num(math.NaN())
	if n > 0 {
		r.Metrics["server_cpu"] = Num(cpu / float64(n))
	}
}

// connectedAt reports whether bots were connected in the second around t.
func (r *Report) connectedAt(t float64) bool {
	for _, p := range r.Series {
		if math.Abs(p.T-t) <= 0.5 {
			return p.Connected > 0
		}
	}
	return false
}

func pctName(q float64) string {
	switch q {
	case 0.5:
		return "50"
	case 0.9:
		return "90"
	case 0.99:
		return "99"
	case 0.999:
		return "999"
	}
	return fmt.Sprint(q * 100)
}

func invariants(t Counters, h map[string]Summary, o Options) []Invariant {
	moves := Invariant{
		Name:    "moves acknowledged exactly once, in order",
		Checked: t.MovesSent > 0,
		Counts: map[string]uint64{"sent": t.MovesSent, "acked": t.MovesAcked, "lost": t.MovesLost,
			"unacked_at_end": t.MovesUnacked, "unacked_at_redirect": t.MovesRedirected, "corrections": t.Corrections, "stale_acks": t.StaleAcks,
			"input_held": t.InputHeld},
	}
	// A move applied twice, skipped or applied out of order leaves the
	// server's state off the client's bit-exact prediction: the server
	// corrects it. So with a deterministic step and nothing else moving the
	// bots (no collisions, no teleports), a correction is a violation.
	moves.OK = moves.Checked && t.MovesLost == 0 && t.MovesUnacked == 0 && (o.CorrectionsExpected || t.Corrections == 0)
	moves.Detail = fmt.Sprintf("%d sent, %d acked, %d lost, %d unacked at end; %d corrections (server state ≠ prediction%s); %d input samples held by a full window",
		t.MovesSent, t.MovesAcked, t.MovesLost, t.MovesUnacked, t.Corrections, map[bool]string{true: ", expected in this scenario", false: ""}[o.CorrectionsExpected], t.InputHeld)

	events := Invariant{
		Name:    "guaranteed events echoed intact, in order",
		Checked: t.EventsEchoed > 0 || o.EchoExpected && t.EventsSent > 0,
		Counts: map[string]uint64{"sent": t.EventsSent, "echoed": t.EventsEchoed, "corrupt": t.EventsCorrupt,
			"out_of_order": t.EventsOutOfOrder, "duplicate": t.EventsDuplicate, "lost": t.EventsLost,
			"foreign": t.EventsForeign, "other": t.EventsOther, "refused": t.EventsRefused},
	}
	events.OK = events.Checked && t.EventsEchoed > 0 && t.EventsCorrupt == 0 && t.EventsOutOfOrder == 0 &&
		t.EventsDuplicate == 0 && t.EventsLost == 0 && t.EventsForeign == 0
	events.Detail = fmt.Sprintf("%d sent, %d echoed, %d corrupt, %d out of order, %d duplicate, %d lost, %d foreign",
		t.EventsSent, t.EventsEchoed, t.EventsCorrupt, t.EventsOutOfOrder, t.EventsDuplicate, t.EventsLost, t.EventsForeign)
	if !events.Checked {
		events.Detail = "not checked: no event was echoed (does the server echo lane 0?)"
	}

	ve := h["view_err"]
	view := Invariant{
		Name:    "view accuracy (peer ghosts vs true positions)",
		Checked: ve.Count > 0,
		OK:      ve.Count > 0,
		Counts: map[string]uint64{"samples": t.ViewSamples, "peer_updates": t.ViewPeers, "other_ghosts": t.ViewOthers,
			"no_truth": t.ViewNoTruth},
	}
	view.Detail = fmt.Sprintf("%d samples, error p50 %.3g m, p99 %.3g m, max %.3g m", ve.Count, ve.P50, ve.P99, ve.Max)
	if !view.Checked {
		view.Detail = "not checked: no bot saw another bot of the swarm as a ghost"
	}

	// A handoff may cost the player an update or two, never a stall: the
	// hitch p99 must stay within two server ticks plus the round trip (and
	// what the simulated network's loss runs and jitter explain).
	hi := h["handoff_hitch"]
	nan := func(s Summary, v float64) float64 {
		if s.Count == 0 {
			return math.NaN()
		}
		return v
	}
	limit, how := o.hitchLimit(nan(h["rtt"], h["rtt"].P99), nan(h["control_gap"], h["control_gap"].P99))
	// The histogram holds 3 significant digits: a p99 within its rounding
	// of the limit is at the limit.
	p99 := time.Duration(hi.P99 * float64(time.Millisecond) / (1 + 1e-3))
	hitch := Invariant{
		Name:    "handoff hitch (longest control-update gap around a handoff)",
		Checked: hi.Count > 0,
		OK:      hi.Count > 0 && p99 <= limit,
		Counts: map[string]uint64{"handoffs": t.Handoffs, "measured": uint64(hi.Count),
			"limit_us": uint64(limit / time.Microsecond), "ordinary_windows": uint64(h["control_gap"].Count)},
	}
	verdict := "within"
	if p99 > limit {
		verdict = "OVER"
	}
	tick := o.Tick
	if tick <= 0 {
		tick = DefaultTick
	}
	tickMs := float64(tick) / float64(time.Millisecond)
	hitch.Detail = fmt.Sprintf("%d handoffs, hitch p50 %.3g ms, p99 %.3g ms (%.2g ticks), max %.3g ms; p99 %s the limit %.3g ms (%s)",
		t.Handoffs, hi.P50, hi.P99, hi.P99/tickMs, hi.Max, verdict, float64(limit)/float64(time.Millisecond), how)
	if !hitch.Checked {
		hitch.Detail = "not checked: no bot crossed a zone border"
	}
	sess := sessions(t, o)
	return []Invariant{moves, events, view, hitch, sess}
}

// Gate evaluates spec against the report's metrics and records the verdict.
func (r *Report) Gate(specText string, spec slo.Spec) bool {
	vals := make(map[string]float64, len(r.Metrics))
	for k, v := range r.Metrics {
		vals[k] = float64(v)
	}
	res, ok := spec.Evaluate(vals)
	out := &SLOResult{Spec: specText, Passed: ok, Results: []SLOVerdict{}}
	for _, x := range res {
		out.Results = append(out.Results, SLOVerdict{
			Metric: x.Target.Metric, Op: x.Target.Op.String(), Target: Num(x.Target.Value),
			Value: Num(x.Value), OK: x.OK, Text: x.String(),
		})
	}
	r.SLO = out
	return ok
}

// MetricNames returns the report's metric names, sorted.
func (r *Report) MetricNames() []string {
	names := make([]string, 0, len(r.Metrics))
	for k := range r.Metrics {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

// WriteJSON writes the report, indented.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteJSONFile writes the report to path.
func (r *Report) WriteJSONFile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if err := r.WriteJSON(f); err != nil {
		f.Close()
		return fmt.Errorf("report %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("report %s: %w", path, err)
	}
	return nil
}

// SessionsInvariant names the sessions invariant (stdout and the reports
// print it; tests find it by this name).
const SessionsInvariant = "no unexpected disconnects (sessions stay up, no failed connect or reconnect)"

// sessions judges the sessions invariant. Sessions end only when the bot
// ends them (churn, the end of the run): a session the server or a silence
// ended, a handshake that failed or a reconnect that did not take is a
// player who lost the game. A followed redirect is no disconnect.
func sessions(t Counters, o Options) Invariant {
	inv := Invariant{
		Name:    SessionsInvariant,
		Checked: t.Sessions > 0 || t.ConnectFails > 0,
		Counts: map[string]uint64{"sessions": t.Sessions, "connects": t.Connects,
			"planned_disconnects": t.Quits, "planned_churn": t.QuitsChurn,
			"disconnects": t.Disconnects, "disconnects_shutdown": t.DisconnectsShutdown,
			"disconnects_kicked": t.DisconnectsKicked, "disconnects_timeout": t.DisconnectsTimeout,
			"disconnects_superseded": t.DisconnectsSuperseded, "disconnects_other": t.DisconnectsOther, "connect_fails": t.ConnectFails,
			"reconnect_attempts": t.ReconnectAttempts, "failed_reconnects": t.ReconnectFails,
			"redirects": t.Redirects, "unplaced_sessions": t.SessionsUnplaced, "unplaced_moves": t.MovesUnplaced},
	}
	inv.OK = inv.Checked && t.Disconnects == 0 && t.ConnectFails == 0 && t.SessionsUnplaced == 0
	inv.Detail = fmt.Sprintf("%d sessions, %d connected, %d ended by the bots (planned; %d by churn), %d redirected; "+
		"%d disconnected unexpectedly (server shutdown %d, kicked %d, timeout %d, superseded %d, other %d); "+
		"%d failed to connect; %d reconnect attempts, %d failed",
		t.Sessions, t.Connects, t.Quits, t.QuitsChurn, t.Redirects,
		t.Disconnects, t.DisconnectsShutdown, t.DisconnectsKicked, t.DisconnectsTimeout, t.DisconnectsSuperseded, t.DisconnectsOther,
		t.ConnectFails, t.ReconnectAttempts, t.ReconnectFails)
	if t.SessionsUnplaced > 0 {
		inv.Detail += fmt.Sprintf("; %d sessions up but never placed in a zone (no state from the server: a join or restore refused; their %d moves not counted as unacked)",
			t.SessionsUnplaced, t.MovesUnplaced)
	}
	switch {
	case !inv.Checked:
		inv.Detail = "not checked: no session was started"
	case o.DisconnectsExpected:
		inv.Checked, inv.OK = false, false
		inv.Detail = "not judged (--expect-disconnects): " + inv.Detail
	}
	return inv
}

// endOfRun is the sample that stands for the run's end: the last one taken
// before the bots began to drain. Samples go on every second while they
// drain, and under load more than one can fall there, with the bots already
// quitting. A report from before samples were marked (none is) reads the
// second-to-last, the rule it was written with.
func endOfRun(series []Point) (Point, bool) {
	n := len(series)
	if n == 0 || series[n-1].Target <= 0 {
		return Point{}, false
	}
	marked := false
	for i := n - 1; i >= 0; i-- {
		if !series[i].Draining {
			if marked {
				return series[i], true
			}
			break
		}
		marked = true
	}
	if marked {
		// Every sample drains (a run shorter than a second): the first is the
		// closest to the run.
		return series[0], true
	}
	if n > 1 {
		return series[n-2], true
	}
	return series[n-1], true
}
