package node

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
)

// dashboardExprs returns every PromQL expression of a Grafana dashboard
// (panel targets, rows' nested panels, template variable queries).
func dashboardExprs(t *testing.T, path string) (title string, exprs []string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Title      string         `json:"title"`
		UID        string         `json:"uid"`
		Panels     []dashPanel    `json:"panels"`
		Templating map[string]any `json:"templating"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if d.Title == "" || d.UID == "" || len(d.Panels) == 0 {
		t.Fatalf("%s: want a title, a uid and panels", path)
	}
	var walk func([]dashPanel)
	walk = func(ps []dashPanel) {
		for _, p := range ps {
			if p.Type != "row" && len(p.Targets) == 0 {
				t.Errorf("panel %q queries nothing", p.Title)
			}
			for _, tg := range p.Targets {
				if strings.TrimSpace(tg.Expr) == "" {
					t.Errorf("panel %q: empty expression", p.Title)
				}
				exprs = append(exprs, tg.Expr)
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	tj, _ := json.Marshal(d.Templating)
	for _, m := range regexp.MustCompile(`label_values\(([a-zA-Z_:][a-zA-Z0-9_:]*)`).FindAllStringSubmatch(string(tj), -1) {
		exprs = append(exprs, m[1])
	}
	return d.Title, exprs
}

type dashPanel struct {
	Type    string      `json:"type"`
	Title   string      `json:"title"`
	Panels  []dashPanel `json:"panels"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

// metricNames picks the metric names out of PromQL: identifiers of our
// namespaces (functions, labels and keywords are not prefixed so).
var metricNames = regexp.MustCompile(`\b(?:ghostwire|go|process)_[a-zA-Z0-9_:]*`)

// Every metric the shipped Grafana dashboard queries is one a running node
// exports (a histogram's _bucket/_sum/_count series by its family), so the
// dashboard never shows "No data" for a renamed metric.
func TestGrafanaDashboardMetricsExist(t *testing.T) {
	_, exprs := dashboardExprs(t, filepath.Join("..", "..", "deploy", "grafana", "ghostwire.json"))
	n := startScraped(t)
	_, mfs := scrape(t, n)
	exported := func(name string) bool {
		if _, ok := mfs[name]; ok {
			return true
		}
		for _, suf := range []string{"_bucket", "_sum", "_count"} {
			if fam, ok := strings.CutSuffix(name, suf); ok {
				if mf := mfs[fam]; mf != nil && (mf.GetType() == dto.MetricType_HISTOGRAM || mf.GetType() == dto.MetricType_SUMMARY) {
					return true
				}
			}
		}
		return false
	}
	var used []string
	for _, e := range exprs {
		for _, name := range metricNames.FindAllString(e, -1) {
			if !exported(name) {
				t.Errorf("the dashboard queries %s, which a node does not export (in %q)", name, e)
			}
			used = append(used, name)
		}
	}
	// The panels: tick cost, players, handoffs, NATS traffic,
	// packet loss, rejected packets.
	for _, want := range []string{"ghostwire_zone_tick_cost_seconds_bucket", "ghostwire_zone_players", "ghostwire_cluster_handoffs_total",
		"ghostwire_zone_handoffs_in_total", "ghostwire_cluster_nats_bytes_total", "ghostwire_gateway_packets_total", "ghostwire_gateway_rejected_total"} {
		if !slices.Contains(used, want) {
			t.Errorf("the dashboard does not chart %s", want)
		}
	}
}

// The test above notices a metric the dashboard wants but nodes lack.
func TestGrafanaCheckCatchesUnknownMetric(t *testing.T) {
	got := metricNames.FindAllString(`sum by (zone) (rate(ghostwire_zone_nonexistent_total{instance=~"$instance"}[$__rate_interval])) / go_goroutines`, -1)
	if !slices.Equal(got, []string{"ghostwire_zone_nonexistent_total", "go_goroutines"}) {
		t.Fatalf("metric names found: %v", got)
	}
}
