package node

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// readyScraper is a log handler that scrapes the node's /metrics the moment
// the node logs "zoned ready" — what an operator's first scrape after the
// ready line sees.
type readyScraper struct {
	t    *testing.T
	mu   *sync.Mutex
	body *string
}

func (h readyScraper) Enabled(context.Context, slog.Level) bool { return true }
func (h readyScraper) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h readyScraper) WithGroup(string) slog.Handler            { return h }
func (h readyScraper) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "zoned ready" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "http" {
			_, body := get(h.t, "http://"+a.Value.String()+"/metrics")
			h.mu.Lock()
			*h.body = body
			h.mu.Unlock()
			return false
		}
		return true
	})
	return nil
}

// The embedding process's collectors (zoned's sizer counters) are on
// /metrics when the node reports ready, not a moment later: a scrape right
// after "zoned ready" found them missing (deploy's
// TestZonedSizesItsPsWhenIdle, once in a CI run).
func TestCollectorsServedWhenReady(t *testing.T) {
	cfg := testConfig(t)
	cfg.NPCs = 0
	c := prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ghostwire_test_embedder_total", Help: "A counter of the embedding process."},
		func() float64 { return 7 })
	cfg.Collectors = []prometheus.Collector{c}
	var mu sync.Mutex
	var body string
	n, err := Start(context.Background(), cfg, slog.New(readyScraper{t: t, mu: &mu, body: &body}))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = n.Stop(context.Background()) }()
	mu.Lock()
	defer mu.Unlock()
	if body == "" {
		t.Fatal("the node logged no \"zoned ready\" with its HTTP address")
	}
	if !strings.Contains(body, "ghostwire_test_embedder_total 7") {
		t.Fatalf("/metrics at \"zoned ready\" lacks the embedder's counter:\n%.2000s", body)
	}
}

// A collector that clashes with the node's own is Start's error, not a
// panic.
func TestCollectorsClashIsAnError(t *testing.T) {
	cfg := testConfig(t)
	cfg.NPCs = 0
	cfg.Collectors = []prometheus.Collector{prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "go_goroutines", Help: "clash"},
		func() float64 { return 0 })}
	n, err := Start(context.Background(), cfg, nil)
	if err == nil {
		_ = n.Stop(context.Background())
		t.Fatal("a collector named as the Go collector's gauge was accepted")
	}
	if !strings.Contains(err.Error(), "metrics") {
		t.Fatalf("error %q does not say it is the metrics", err)
	}
}
