// Package scrape reads a server's Prometheus /metrics once a second during
// a botswarm run (--metrics-url), so the report shows the server's side of
// the load beside the bots' view: the zone tick cost
// (ghostwire_zone_tick_cost_seconds), its CPU (process_cpu_seconds_total)
// and heap (go_memstats_heap_alloc_bytes), and the inputs its zones dropped
// (ghostwire_zone_inputs_dropped_total). The text format is parsed by hand:
// only a few samples are needed. The tick cost is a histogram per zone; its
// buckets are summed over the zones and the p50/p99 are taken, as
// Prometheus' histogram_quantile does, over the ticks between two scrapes.
// (A server exporting the older quantile-labelled gauge is read as is.)
package scrape

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ghostwire/ghostwire/cmd/botswarm/internal/metrics"
)

// Sample is one scrape's raw values (NaN: absent).
type Sample struct {
	TickP50, TickP99 float64 // seconds
	CPUSeconds       float64 // process_cpu_seconds_total
	HeapBytes        float64 // go_memstats_heap_alloc_bytes
	InputsDropped    float64 // ghostwire_zone_inputs_dropped_total
	// TickBuckets are the tick cost histogram's cumulative counts by upper
	// bound (seconds; +Inf included), summed over zones; nil: absent.
	TickBuckets map[float64]float64
}

// Parse reads the Prometheus text exposition format and returns the
// samples it knows. Unknown lines are skipped; a malformed known line is
// an error.
func Parse(r io.Reader) (Sample, error) {
	nan := math.NaN()
	s := Sample{nan, nan, nan, nan, nan, nil}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		name, labels, value, ok := splitSample(line)
		if !ok {
			continue
		}
		var dst *float64
		switch name {
		case "ghostwire_zone_tick_cost_seconds_bucket":
			le, err := strconv.ParseFloat(labelValue(labels, "le"), 64)
			if err != nil {
				return s, fmt.Errorf("metrics: %s: le: %w", name, err)
			}
			v, err := strconv.ParseFloat(value, 64)
			if err != nil {
				return s, fmt.Errorf("metrics: %s: %w", name, err)
			}
			if s.TickBuckets == nil {
				s.TickBuckets = map[float64]float64{}
			}
			s.TickBuckets[le] += v
			continue
		case "ghostwire_zone_tick_cost_seconds":
			switch labelValue(labels, "quantile") {
			case "0.5":
				dst = &s.TickP50
			case "0.99":
				dst = &s.TickP99
			}
		case "process_cpu_seconds_total":
			dst = &s.CPUSeconds
		case "go_memstats_heap_alloc_bytes":
			dst = &s.HeapBytes
		case "ghostwire_zone_inputs_dropped_total":
			dst = &s.InputsDropped
		}
		if dst == nil {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return s, fmt.Errorf("metrics: %s: %w", name, err)
		}
		*dst = v
	}
	if s.TickBuckets != nil {
		s.TickP50, s.TickP99 = Quantile(0.5, s.TickBuckets), Quantile(0.99, s.TickBuckets)
	}
	return s, sc.Err()
}

// Quantile estimates the q-quantile (0..1) of a histogram given as
// cumulative counts by upper bound, as Prometheus' histogram_quantile does:
// linear within the bucket it falls in, the highest finite bound if it
// falls in +Inf. NaN without observations.
func Quantile(q float64, cumulative map[float64]float64) float64 {
	les := make([]float64, 0, len(cumulative))
	for le := range cumulative {
		les = append(les, le)
	}
	slices.Sort(les)
	if len(les) == 0 {
		return math.NaN()
	}
	total := cumulative[les[len(les)-1]]
	if !(total > 0) {
		return math.NaN()
	}
	rank := q * total
	lower, below := 0.0, 0.0
	for _, le := range les {
		c := cumulative[le]
		if c >= rank {
			if math.IsInf(le, 1) {
				return lower
			}
			if c == below {
				return le
			}
			return lower + (le-lower)*(rank-below)/(c-below)
		}
		lower, below = le, c
	}
	return lower
}

// window returns the histogram of the observations between prev and cur
// (nil if there were none, or the server restarted).
func window(prev, cur map[float64]float64) map[float64]float64 {
	if prev == nil || cur == nil {
		return nil
	}
	d := make(map[float64]float64, len(cur))
	grew := false
	for le, c := range cur {
		v := c - prev[le]
		if v < 0 {
			return nil
		}
		d[le] = v
		grew = grew || v > 0
	}
	if !grew {
		return nil
	}
	return d
}

// splitSample splits `name{labels} value [timestamp]`.
func splitSample(line string) (name, labels, value string, ok bool) {
	rest := line
	if i := strings.IndexByte(line, '{'); i >= 0 {
		j := strings.LastIndexByte(line, '}')
		if j < i {
			return "", "", "", false
		}
		name, labels, rest = line[:i], line[i+1:j], line[j+1:]
	} else {
		i := strings.IndexAny(line, " \t")
		if i < 0 {
			return "", "", "", false
		}
		name, rest = line[:i], line[i:]
	}
	f := strings.Fields(rest)
	if len(f) == 0 {
		return "", "", "", false
	}
	return name, labels, f[0], true
}

// labelValue returns the value of key in `k="v",k2="v2"` ("" if absent).
func labelValue(labels, key string) string {
	for _, kv := range strings.Split(labels, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if ok && k == key {
			return strings.Trim(v, `"`)
		}
	}
	return ""
}

// Scraper polls one URL once a second into a series of metrics.ServerPoint.
type Scraper struct {
	url    string
	client *http.Client
	start  time.Time

	mu      sync.Mutex
	series  []metrics.ServerPoint
	prev    Sample
	prevAt  time.Time
	fails   int
	lastErr error
}

// New returns a scraper of url whose points are timed from start (the
// swarm's epoch).
func New(url string, start time.Time) *Scraper {
	nan := math.NaN()
	return &Scraper{url: url, start: start, client: &http.Client{Timeout: 900 * time.Millisecond},
		prev: Sample{nan, nan, nan, nan, nan, nil}}
}

// Run scrapes every interval until ctx ends, then once more.
func (s *Scraper) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	s.Scrape(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.Scrape(ctx)
		}
	}
}

// Scrape takes one sample now.
func (s *Scraper) Scrape(ctx context.Context) {
	now := time.Now()
	smp, err := s.fetch(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.fails++
		s.lastErr = err
		return
	}
	if w := window(s.prev.TickBuckets, smp.TickBuckets); w != nil {
		smp.TickP50, smp.TickP99 = Quantile(0.5, w), Quantile(0.99, w)
	}
	nan := metrics.Num(math.NaN())
	p := metrics.ServerPoint{T: now.Sub(s.start).Seconds(), TickP50: nan, TickP99: nan, CPU: nan, HeapBytes: nan, InputsDroppedPS: nan}
	if !math.IsNaN(smp.TickP50) {
		p.TickP50 = metrics.Num(smp.TickP50 * 1e3)
	}
	if !math.IsNaN(smp.TickP99) {
		p.TickP99 = metrics.Num(smp.TickP99 * 1e3)
	}
	p.HeapBytes = metrics.Num(smp.HeapBytes)
	if dt := now.Sub(s.prevAt).Seconds(); !s.prevAt.IsZero() && dt > 0 {
		if d := smp.CPUSeconds - s.prev.CPUSeconds; !math.IsNaN(d) && d >= 0 {
			p.CPU = metrics.Num(d / dt)
		}
		if d := smp.InputsDropped - s.prev.InputsDropped; !math.IsNaN(d) && d >= 0 {
			p.InputsDroppedPS = metrics.Num(d / dt)
		}
	}
	s.prev, s.prevAt = smp, now
	s.series = append(s.series, p)
}

func (s *Scraper) fetch(ctx context.Context) (Sample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return Sample{}, err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return Sample{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Sample{}, fmt.Errorf("GET %s: %s", s.url, resp.Status)
	}
	return Parse(io.LimitReader(resp.Body, 8<<20))
}

// Series returns the points so far and how many scrapes failed (with the
// last error).
func (s *Scraper) Series() ([]metrics.ServerPoint, int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]metrics.ServerPoint(nil), s.series...), s.fails, s.lastErr
}
