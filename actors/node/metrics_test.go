package node

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// lint runs what `promtool check metrics` runs (the promlint library) over
// a Prometheus text exposition and returns its complaints, one a line.
func lint(exposition string) ([]string, error) {
	problems, err := promlint.New(strings.NewReader(exposition)).Lint()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range problems {
		out = append(out, fmt.Sprintf("%s: %s", p.Metric, p.Text))
	}
	return out, nil
}

// scrape fetches a node's /metrics as text and parsed.
func scrape(t *testing.T, n *Node) (string, map[string]*dto.MetricFamily) {
	t.Helper()
	resp, err := http.Get("http://" + n.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s %v", resp.Status, err)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(string(b)))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return string(b), mfs
}

// startScraped starts a node and waits (bounded) until every zone has
// ticked and reported its load, so its per-zone series are on /metrics.
func startScraped(t *testing.T) *Node {
	t.Helper()
	n, err := Start(context.Background(), testConfig(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Stop(context.Background()) })
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, mfs := scrape(t, n)
		if mf := mfs["ghostwire_zone_npcs"]; mf != nil && len(mf.GetMetric()) == 4 {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatal("the 4 zones' load did not reach /metrics within 5 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Every metric a running node exports passes `promtool check metrics`
// (its promlint library): names, help, types, units, label use.
func TestMetricsPassPromtoolLint(t *testing.T) {
	n := startScraped(t)
	text, _ := scrape(t, n)
	problems, err := lint(text)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s", p)
	}
}

// The lint above fails on a bad metric: the gauge carrying a quantile label
// this node used to export, and a counter without _total.
func TestLintCatchesBadMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ghostwire_zone_tick_cost_seconds",
		Help: "old", ConstLabels: prometheus.Labels{"quantile": "0.99"}}, func() float64 { return 0 }))
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ghostwire_things",
		Help: "things"}, func() float64 { return 0 }))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
			t.Fatal(err)
		}
	}
	problems, err := lint(b.String())
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(problems, "\n")
	if !strings.Contains(joined, `ghostwire_zone_tick_cost_seconds: non-summary metrics should not have "quantile" label`) ||
		!strings.Contains(joined, "ghostwire_things: counter metrics should have \"_total\" suffix") {
		t.Fatalf("promlint missed a bad metric; it said:\n%s", joined)
	}
}

// The series an operator needs to find a hot zone: tick cost as a
// histogram, players and NPCs per zone, and the build.
func TestZoneMetricsPerZone(t *testing.T) {
	n := startScraped(t)
	_, mfs := scrape(t, n)
	zones := map[string]bool{}
	for _, z := range n.Zones().Map().Zones() {
		zones[z.ID] = true
	}
	for _, c := range []struct {
		name string
		typ  dto.MetricType
	}{
		{"ghostwire_zone_tick_cost_seconds", dto.MetricType_HISTOGRAM},
		{"ghostwire_zone_players", dto.MetricType_GAUGE},
		{"ghostwire_zone_npcs", dto.MetricType_GAUGE},
	} {
		mf := mfs[c.name]
		if mf == nil || mf.GetType() != c.typ {
			t.Errorf("%s: missing or not a %v", c.name, c.typ)
			continue
		}
		seen := map[string]bool{}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "zone" {
					seen[l.GetValue()] = true
				}
			}
			if c.typ == dto.MetricType_HISTOGRAM && m.GetHistogram().GetSampleCount() == 0 {
				t.Errorf("%s %v: no ticks counted", c.name, m.GetLabel())
			}
		}
		if len(seen) != len(zones) {
			t.Errorf("%s: zone labels %v, want one per zone %v", c.name, seen, zones)
		}
	}
	var npcs float64
	for _, m := range mfs["ghostwire_zone_npcs"].GetMetric() {
		npcs += m.GetGauge().GetValue()
	}
	if npcs != float64(n.cfg.NPCs) {
		t.Errorf("ghostwire_zone_npcs sums to %v, want the world's %d", npcs, n.cfg.NPCs)
	}
	bi := mfs["ghostwire_build_info"]
	if bi == nil || len(bi.GetMetric()) != 1 || bi.GetMetric()[0].GetGauge().GetValue() != 1 {
		t.Fatalf("ghostwire_build_info = %v, want one series of value 1", bi)
	}
	labels := map[string]string{}
	for _, l := range bi.GetMetric()[0].GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	if labels["goversion"] == "" || labels["version"] == "" || labels["revision"] == "" {
		t.Errorf("ghostwire_build_info labels = %v, want version, goversion, revision", labels)
	}
}

// The zones' hold counters (inputs held for a player being taken over,
// events of a reserved player) are on /metrics, so an operator sees a
// handoff's held inputs dropped or passed back.
func TestZoneHoldCountersExported(t *testing.T) {
	n := startScraped(t)
	_, mfs := scrape(t, n)
	for _, name := range []string{"ghostwire_zone_held_inputs_dropped_total", "ghostwire_zone_held_inputs_returned_total",
		"ghostwire_zone_events_early_dropped_total", "ghostwire_zone_events_away_dropped_total", "ghostwire_zone_events_paused_dropped_total", "ghostwire_zone_inputs_dropped_total"} {
		mf := mfs[name]
		if mf == nil || len(mf.GetMetric()) != 1 || mf.GetMetric()[0].GetCounter() == nil {
			t.Errorf("%s: not a counter on /metrics", name)
		}
	}
}

// The leases' expiry judgement is on /metrics, and its probe counter
// moves: a node probes the zones bucket's leader every TTL/12, so a
// dead probe loop (or a counter wired to the wrong field) shows.
func TestLeaseJudgementCountersExported(t *testing.T) {
	n := startScraped(t)
	names := []string{"ghostwire_cluster_lease_expiries_judged_total", "ghostwire_cluster_lease_probes_total",
		"ghostwire_cluster_lease_probes_unanswered_total", "ghostwire_cluster_lease_watcher_behind_total",
		"ghostwire_cluster_lease_watcher_relists_total"}
	probes := func() float64 {
		_, mfs := scrape(t, n)
		for _, name := range names {
			if mf := mfs[name]; mf == nil || len(mf.GetMetric()) != 1 || mf.GetMetric()[0].GetCounter() == nil {
				t.Fatalf("%s: not a counter on /metrics", name)
			}
		}
		return mfs["ghostwire_cluster_lease_probes_total"].GetMetric()[0].GetCounter().GetValue()
	}
	p0 := probes()
	deadline := time.Now().Add(5 * time.Second)
	for probes() <= p0 {
		if time.Now().After(deadline) {
			t.Fatalf("ghostwire_cluster_lease_probes_total stayed at %v for 5 s (a probe every TTL/12)", p0)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if st := n.Leases().Stats(); st.Expiries != 0 || st.Probes == 0 {
		t.Fatalf("a lone node's leases: %+v; want probes answered and nothing judged expired", st)
	}
}

// A zoned of an older version, starting, sets the zones bucket's expiry to
// its lease TTL (before the nodes judged expiry, the server expired the
// leases itself): a running node sets the backstop back at its next look,
// counts it, and leaves a longer expiry as it is.
func TestZonesBucketExpiryKeptAgainstAnOlderNode(t *testing.T) {
	cfg := testConfig(t)
	cfg.expiryLook = 1
	n, err := Start(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kv, want := n.nats.kv[BucketZones], n.nats.zonesCfg.TTL
	ttl := func() time.Duration {
		t.Helper()
		st, err := kv.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st.TTL()
	}
	if got := ttl(); got != want || want <= cfg.LeaseTTL.D() {
		t.Fatalf("bucket expiry %v at start, node's backstop %v; want a backstop past the TTL %v", got, want, cfg.LeaseTTL.D())
	}
	set := func(d time.Duration) {
		t.Helper()
		c := n.nats.zonesCfg
		c.TTL = d
		if _, err := n.nats.js.UpdateKeyValue(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	set(cfg.LeaseTTL.D()) // the older node's start
	// A look a heartbeat: bounded far past the first, which a loaded host
	// may spend on the heartbeat's own write.
	// The count follows the expiry's update (counted once it landed): a
	// look between the two saw the expiry set back and 0 counted (CI,
	// 2026-12-07), so both are waited for.
	deadline := time.Now().Add(10 * time.Second)
	for ttl() != want || n.nats.expiryRestored.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("bucket expiry %v, %d restorations counted, 10 s after an older node shortened it; want it set back to %v, counted", ttl(), n.nats.expiryRestored.Load(), want)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := n.nats.expiryRestored.Load(); got != 1 {
		t.Fatalf("%d restorations counted, want 1", got)
	}
	_, mfs := scrape(t, n)
	if mf := mfs["ghostwire_cluster_zones_bucket_expiry_restored_total"]; mf == nil || mf.GetMetric()[0].GetCounter().GetValue() != 1 {
		t.Fatalf("ghostwire_cluster_zones_bucket_expiry_restored_total: %v, want 1", mf)
	}
	longer := want + time.Minute
	set(longer) // a node with a longer --lease-ttl: as safe, left
	time.Sleep(3 * heartbeat)
	if got := ttl(); got != longer || n.nats.expiryRestored.Load() != 1 {
		t.Fatalf("bucket expiry %v after a longer one was set (%v), %d restorations; want it left", got, longer, n.nats.expiryRestored.Load())
	}
}
