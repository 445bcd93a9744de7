package zone

import (
	"sync"
	"sync/atomic"
	"time"
)

// TickBuckets are the upper bounds, in seconds, of the per-zone tick cost
// histogram (ZoneTicks). They straddle the 25 ms tick-p99 objective and the
// 50 ms tick period finely enough for histogram_quantile to tell a healthy
// zone (well under a millisecond) from one near overload.
var TickBuckets = []float64{
	0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.003, 0.005,
	0.0075, 0.01, 0.015, 0.025, 0.05, 0.1, 0.25,
}

// ZoneTicks keeps one tick-cost histogram per zone, so an operator can find
// the hot zone (the node-wide Metrics.TickCost ring mixes all zones). The
// zero value is ready; safe for concurrent use: each zone actor observes its
// own, the metrics scrape reads them all.
type ZoneTicks struct {
	mu sync.RWMutex
	m  map[string]*TickHistogram
}

// TickHistogram is one zone's tick cost: counts per TickBuckets bound (not
// cumulative; the last slot is +Inf), their total and sum.
type TickHistogram struct {
	buckets [16]atomic.Uint64 // len(TickBuckets)+1
	count   atomic.Uint64
	nanos   atomic.Uint64
}

// Observe records one tick of zone.
func (t *ZoneTicks) Observe(zone string, d time.Duration) {
	t.mu.RLock()
	h := t.m[zone]
	t.mu.RUnlock()
	if h == nil {
		t.mu.Lock()
		if h = t.m[zone]; h == nil {
			if t.m == nil {
				t.m = map[string]*TickHistogram{}
			}
			h = new(TickHistogram)
			t.m[zone] = h
		}
		t.mu.Unlock()
	}
	s := d.Seconds()
	i := 0
	for i < len(TickBuckets) && s > TickBuckets[i] {
		i++
	}
	h.buckets[i].Add(1)
	h.count.Add(1)
	h.nanos.Add(uint64(max(d, 0)))
}

// Histogram returns zone's histogram as Prometheus wants it: cumulative
// counts per TickBuckets bound, the total count and the sum in seconds; ok
// is false for a zone that never ticked here. The counts are read one by
// one while the zone may tick, so they may be a tick apart.
func (t *ZoneTicks) Histogram(zone string) (cumulative map[float64]uint64, count uint64, sum float64, ok bool) {
	t.mu.RLock()
	h := t.m[zone]
	t.mu.RUnlock()
	if h == nil {
		return nil, 0, 0, false
	}
	cumulative = make(map[float64]uint64, len(TickBuckets))
	var c uint64
	for i, le := range TickBuckets {
		c += h.buckets[i].Load()
		cumulative[le] = c
	}
	// Keep count ≥ every bucket: a tick observed between the reads must
	// not make the histogram inconsistent.
	return cumulative, max(h.count.Load(), c), float64(h.nanos.Load()) / 1e9, true
}
