package scrape

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

const exposition = `# HELP ghostwire_zone_tick_cost_seconds measured zone tick cost
# TYPE ghostwire_zone_tick_cost_seconds gauge
ghostwire_zone_tick_cost_seconds{quantile="0.5"} 5e-05
ghostwire_zone_tick_cost_seconds{quantile="0.99"} 0.0139
ghostwire_zone_inputs_dropped_total 12
go_memstats_heap_alloc_bytes 5.7e+07
go_gc_duration_seconds{quantile="0.5"} 0.001
process_cpu_seconds_total 25.03
`

func TestParse(t *testing.T) {
	s, err := Parse(strings.NewReader(exposition))
	if err != nil {
		t.Fatal(err)
	}
	if s.TickP50 != 5e-5 || s.TickP99 != 0.0139 || s.CPUSeconds != 25.03 || s.HeapBytes != 57e6 || s.InputsDropped != 12 {
		t.Fatalf("%+v", s)
	}
	s, err = Parse(strings.NewReader("go_goroutines 7\n"))
	if err != nil || !math.IsNaN(s.TickP99) || !math.IsNaN(s.CPUSeconds) {
		t.Fatalf("absent metrics must read NaN: %+v %v", s, err)
	}
	if _, err := Parse(strings.NewReader("process_cpu_seconds_total twelve\n")); err == nil {
		t.Fatal("a malformed value passed")
	}
}

// TestScraperRates: CPU and drops become per-second rates between scrapes;
// a failing scrape is counted, not fatal.
func TestScraperRates(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := n.Add(1)
		if i == 2 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintf(w, "process_cpu_seconds_total %d\nghostwire_zone_tick_cost_seconds{quantile=\"0.99\"} 0.002\n", 10*i)
	}))
	defer srv.Close()
	s := New(srv.URL, time.Now())
	for range 4 {
		s.Scrape(context.Background())
		time.Sleep(50 * time.Millisecond)
	}
	ps, fails, err := s.Series()
	if fails != 1 || err == nil || len(ps) != 3 {
		t.Fatalf("%d points, %d fails (%v)", len(ps), fails, err)
	}
	if !math.IsNaN(float64(ps[0].CPU)) || float64(ps[2].CPU) < 50 || float64(ps[2].TickP99) != 2 {
		t.Fatalf("points %+v", ps)
	}
}

// zoned exports the tick cost as a histogram per zone: the buckets are
// summed over zones and the quantiles read as histogram_quantile would.
const histogram = `# TYPE ghostwire_zone_tick_cost_seconds histogram
ghostwire_zone_tick_cost_seconds_bucket{zone="a",le="0.001"} 90
ghostwire_zone_tick_cost_seconds_bucket{zone="a",le="0.01"} 100
ghostwire_zone_tick_cost_seconds_bucket{zone="a",le="+Inf"} 100
ghostwire_zone_tick_cost_seconds_sum{zone="a"} 0.2
ghostwire_zone_tick_cost_seconds_count{zone="a"} 100
ghostwire_zone_tick_cost_seconds_bucket{zone="b",le="0.001"} 0
ghostwire_zone_tick_cost_seconds_bucket{zone="b",le="0.01"} 0
ghostwire_zone_tick_cost_seconds_bucket{zone="b",le="+Inf"} 100
`

func TestParseHistogram(t *testing.T) {
	s, err := Parse(strings.NewReader(histogram))
	if err != nil {
		t.Fatal(err)
	}
	// 200 ticks: 90 ≤ 1 ms, 10 in (1, 10] ms, 100 beyond the last bound.
	if s.TickBuckets[0.001] != 90 || s.TickBuckets[math.Inf(1)] != 200 {
		t.Fatalf("buckets %v", s.TickBuckets)
	}
	// The median (rank 100) is the last tick of (1, 10] ms; the p99 lies
	// in +Inf, read as the highest finite bound.
	if math.Abs(s.TickP50-0.01) > 1e-12 || s.TickP99 != 0.01 {
		t.Fatalf("p50 %v p99 %v", s.TickP50, s.TickP99)
	}
	if q := Quantile(0.5, map[float64]float64{0.001: 50, 0.002: 150, math.Inf(1): 200}); math.Abs(q-0.0015) > 1e-12 {
		t.Fatalf("interpolated median %v, want 0.0015", q)
	}
	if q := Quantile(0.5, map[float64]float64{math.Inf(1): 0}); !math.IsNaN(q) {
		t.Fatalf("no observations: %v, want NaN", q)
	}
}

// Between two scrapes only the new ticks count: a slow start does not
// hide a fast run, and a restarted server (counts going down) falls back
// to its totals.
func TestScraperTickWindow(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := n.Add(1) - 1
		total := []int64{1000, 2000, 3000, 500}[i] // ticks so far
		slow := []int64{0, 100, 100, 0}[i]         // of those, in (1, 100] ms
		fmt.Fprintf(w, "ghostwire_zone_tick_cost_seconds_bucket{zone=\"a\",le=\"0.001\"} %d\n", total-slow)
		fmt.Fprintf(w, "ghostwire_zone_tick_cost_seconds_bucket{zone=\"a\",le=\"0.1\"} %d\n", total)
		fmt.Fprintf(w, "ghostwire_zone_tick_cost_seconds_bucket{zone=\"a\",le=\"+Inf\"} %d\n", total)
	}))
	defer srv.Close()
	s := New(srv.URL, time.Now())
	for range 4 {
		s.Scrape(context.Background())
	}
	ps, _, _ := s.Series()
	// Scrape 2: 100 of 1,000 new ticks were slow, so p99 is in (1, 100] ms;
	// scrape 3: none of the new ticks were slow; scrape 4: the server
	// restarted (counts fell): its totals, all fast.
	if len(ps) != 4 || !(ps[1].TickP99 > 1) || !(ps[2].TickP99 <= 1) || !(ps[3].TickP99 <= 1) {
		t.Fatalf("points %+v", ps)
	}
}
