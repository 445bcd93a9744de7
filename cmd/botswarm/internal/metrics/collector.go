package metrics

import (
	"encoding/json"
	"math"
	"time"
)

// Num is a float64 that writes NaN (no data) as JSON null and reads null
// back as NaN.
type Num float64

// MarshalJSON implements json.Marshaler.
func (n Num) MarshalJSON() ([]byte, error) {
	f := float64(n)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return []byte("null"), nil
	}
	return json.Marshal(f)
}

// UnmarshalJSON implements json.Unmarshaler.
func (n *Num) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*n = Num(math.NaN())
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	*n = Num(f)
	return nil
}

// Point is one second of the run's time series. Rates are per connected
// bot per second; percentiles cover the samples of that second.
type Point struct {
	T            float64 `json:"t"` // seconds since the start
	Target       int     `json:"target"`
	Connected    int64   `json:"connected"`
	PacketsInPS  Num     `json:"packets_in_per_bot_s"`
	PacketsOutPS Num     `json:"packets_out_per_bot_s"`
	BytesInPS    Num     `json:"bytes_in_per_bot_s"`
	BytesOutPS   Num     `json:"bytes_out_per_bot_s"`
	RTTP50       Num     `json:"rtt_p50_ms"`
	RTTP90       Num     `json:"rtt_p90_ms"`
	RTTP99       Num     `json:"rtt_p99_ms"`
	Loss         Num     `json:"loss"`     // protocol, both directions, this second
	NetLoss      Num     `json:"net_loss"` // simulated network drops / offered, this second
	Handoffs     uint64  `json:"handoffs"` // this second
	// Sessions this second: unexpected disconnects, failed reconnects and
	// followed redirects (when a server stopped, and whether a drain held).
	Disconnects    uint64 `json:"disconnects"`
	ReconnectFails uint64 `json:"failed_reconnects"`
	Redirects      uint64 `json:"redirects"`
	HandoffsTotal  uint64 `json:"handoffs_total"`
	Errors         uint64 `json:"errors_total"`
	ViewErrP99     Num    `json:"view_err_p99_m"`
	Ghosts         Num    `json:"ghosts_per_bot"`
	CPU            Num    `json:"cpu_cores"` // CPU this process used, in cores
	// Draining: taken after the bots stopped moving (the run's end or a
	// cancel), while they drain and quit; not the run's steady state.
	Draining bool `json:"draining,omitempty"`
}

// ServerPoint is one scrape of the server's own metrics (--metrics-url):
// the zones' tick cost, the process's CPU and heap, zone input drops.
type ServerPoint struct {
	T               float64 `json:"t"`                 // seconds since the start
	TickP50         Num     `json:"tick_p50_ms"`       // ghostwire_zone_tick_cost_seconds histogram, between scrapes
	TickP99         Num     `json:"tick_p99_ms"`       // … p99
	CPU             Num     `json:"cpu_cores"`         // process_cpu_seconds_total, rate
	HeapBytes       Num     `json:"heap_bytes"`        // go_memstats_heap_alloc_bytes
	InputsDroppedPS Num     `json:"inputs_dropped_ps"` // ghostwire_zone_inputs_dropped_total, rate
}

// Collector turns the shards' counters into a per-second time series and
// keeps the whole run's histograms. Sample is called from one goroutine.
type Collector struct {
	shards   []*Shard
	target   int
	start    time.Time
	last     time.Time
	prev     Counters
	prevCPU  time.Duration
	startCPU time.Duration
	cur      Counters
	total    Hists // whole run
	second   Hists // scratch: one second
	series   []Point
	cpu      func() time.Duration
	draining bool
}

// NewCollector returns a collector over shards for a run of target bots
// that started at start.
func NewCollector(shards []*Shard, target int, start time.Time) *Collector {
	c := &Collector{shards: shards, target: target, start: start, last: start,
		total: NewHists(), second: NewHists(), cpu: ProcessCPU}
	c.prevCPU = c.cpu()
	c.startCPU = c.prevCPU
	return c
}

// Sample takes the shards' counters and samples at now, appends a point
// to the series and returns it.
func (c *Collector) Sample(now time.Time) Point {
	var cur Counters
	c.second.Reset()
	for _, s := range c.shards {
		s.Mu.Lock()
		cur.Add(&s.C)
		c.second.Merge(s.H)
		s.H.Reset()
		s.Mu.Unlock()
	}
	c.total.Merge(c.second)
	dt := now.Sub(c.last).Seconds()
	cpuNow := c.cpu()
	d := delta(&cur, &c.prev)
	per := func(v uint64) Num {
		if cur.Connected <= 0 || dt <= 0 {
			return Num(math.NaN())
		}
		return Num(float64(v) / dt / float64(cur.Connected))
	}
	p := Point{
		T:              now.Sub(c.start).Seconds(),
		Target:         c.target,
		Connected:      cur.Connected,
		PacketsInPS:    per(d.PacketsIn),
		PacketsOutPS:   per(d.PacketsOut),
		BytesInPS:      per(d.BytesIn),
		BytesOutPS:     per(d.BytesOut),
		RTTP50:         Num(c.second.RTT.Quantile(0.50)),
		RTTP90:         Num(c.second.RTT.Quantile(0.90)),
		RTTP99:         Num(c.second.RTT.Quantile(0.99)),
		Loss:           lossOf(&d),
		NetLoss:        ratio(d.NetDropped, d.NetSent),
		Handoffs:       d.Handoffs,
		Disconnects:    d.Disconnects,
		ReconnectFails: d.ReconnectFails,
		Redirects:      d.Redirects,
		HandoffsTotal:  cur.Handoffs,
		Errors:         cur.Errors,
		ViewErrP99:     Num(c.second.ViewErr.Quantile(0.99)),
		Ghosts:         ratio(d.GhostsHeld, d.GhostSamples),
		CPU:            Num(math.NaN()),
		Draining:       c.draining,
	}
	if cpuNow >= 0 && c.prevCPU >= 0 && dt > 0 {
		p.CPU = Num((cpuNow - c.prevCPU).Seconds() / dt)
	}
	c.prev, c.cur, c.last, c.prevCPU = cur, cur, now, cpuNow
	c.series = append(c.series, p)
	return p
}

// Draining marks every later Sample as taken while the bots drain (they
// stopped moving: the run's end or a cancel), so the report reads the
// run's end from the samples before it.
func (c *Collector) Draining() { c.draining = true }

// Second returns the histograms of the latest Sample's second (read-only).
func (c *Collector) Second() Hists { return c.second }

// Totals returns the counters as of the latest Sample.
func (c *Collector) Totals() Counters { return c.cur }

// Hists returns the whole run's histograms as of the latest Sample.
func (c *Collector) Hists() Hists { return c.total }

// Series returns the points so far.
func (c *Collector) Series() []Point { return c.series }

// Elapsed is the time from the start to the latest Sample.
func (c *Collector) Elapsed() time.Duration { return c.last.Sub(c.start) }

func ratio(a, b uint64) Num {
	if b == 0 {
		return Num(math.NaN())
	}
	return Num(float64(a) / float64(b))
}

// lossOf is the protocol's loss over both directions: our packets declared
// dropped plus the server's packets given up, over all resolved.
func lossOf(c *Counters) Num {
	lost := c.FatesDropped + c.InAbandoned
	return ratio(lost, lost+c.FatesDelivered+c.InReceived)
}

// delta returns cur − prev for the counters the series needs.
func delta(cur, prev *Counters) Counters {
	return Counters{
		PacketsIn: cur.PacketsIn - prev.PacketsIn, PacketsOut: cur.PacketsOut - prev.PacketsOut,
		BytesIn: cur.BytesIn - prev.BytesIn, BytesOut: cur.BytesOut - prev.BytesOut,
		FatesDropped: cur.FatesDropped - prev.FatesDropped, FatesDelivered: cur.FatesDelivered - prev.FatesDelivered,
		InReceived: cur.InReceived - prev.InReceived, InAbandoned: cur.InAbandoned - prev.InAbandoned,
		NetDropped: cur.NetDropped - prev.NetDropped, NetSent: cur.NetSent - prev.NetSent,
		Handoffs:    cur.Handoffs - prev.Handoffs,
		Disconnects: cur.Disconnects - prev.Disconnects, ReconnectFails: cur.ReconnectFails - prev.ReconnectFails,
		Redirects:  cur.Redirects - prev.Redirects,
		GhostsHeld: cur.GhostsHeld - prev.GhostsHeld, GhostSamples: cur.GhostSamples - prev.GhostSamples,
	}
}
