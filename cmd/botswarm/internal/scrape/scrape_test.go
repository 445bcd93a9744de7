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
