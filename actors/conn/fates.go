package conn

import (
	"sync/atomic"
	"time"
)

// foldEvery is how often a connection adds its packet fates to the shared
// counters: reading the session's stats on every pump would cost more than
// the metric is worth.
const foldEvery = time.Second

// folded is what a connection already added to Counters.PacketsDelivered
// and PacketsLost (when: Conn.foldAt): the low 32 bits of each count,
// enough for the difference a fold adds (a second's, or a connection's
// life at 20 packets a second for six years), in 12 bytes of the Conn.
type folded struct {
	delivered, dropped uint32
	superseded         uint32
}

// foldFates adds the fates of this connection's sent packets (and its
// superseded control states) since the last fold to the pool's counters,
// and samples its RTT: about once a second, and (counts only) once more at
// the end (final).
func (c *Conn) foldFates(now time.Duration, final bool) {
	if c.srv == nil || (!final && now-c.foldAt < foldEvery) {
		return
	}
	st := c.srv.Stats()
	n := st.Notify
	if !final && st.RTT > 0 {
		c.sh.pool.counters.RTT.observe(st.RTT)
	}
	c.sh.pool.counters.PacketsDelivered.Add(uint64(uint32(n.Delivered) - c.fates.delivered))
	c.sh.pool.counters.PacketsLost.Add(uint64(uint32(n.Dropped) - c.fates.dropped))
	c.sh.pool.counters.ControlsSuperseded.Add(uint64(uint32(st.ControlsSuperseded) - c.fates.superseded))
	c.fates = folded{delivered: uint32(n.Delivered), dropped: uint32(n.Dropped), superseded: uint32(st.ControlsSuperseded)}
	c.foldAt = now
}

// RTTBuckets are the upper bounds, in seconds, of the connections' RTT
// histogram (Counters.RTT): LAN to intercontinental.
var RTTBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 1}

// RTTHistogram samples the smoothed RTT of every connection once a second
// (a connection of a minute adds 60 samples): the distribution of round
// trips over the node's players, without a label per player. The zero
// value is ready; safe for concurrent use.
type RTTHistogram struct {
	buckets [14]atomic.Uint64 // len(RTTBuckets)+1, not cumulative; the last is +Inf
	count   atomic.Uint64
	nanos   atomic.Uint64
}

func (h *RTTHistogram) observe(d time.Duration) {
	s := d.Seconds()
	i := 0
	for i < len(RTTBuckets) && s > RTTBuckets[i] {
		i++
	}
	h.buckets[i].Add(1)
	h.count.Add(1)
	h.nanos.Add(uint64(max(d, 0)))
}

// Snapshot returns the cumulative counts by RTTBuckets bound, the count and
// the sum in seconds, as a Prometheus histogram wants them.
func (h *RTTHistogram) Snapshot() (cumulative map[float64]uint64, count uint64, sum float64) {
	cumulative = make(map[float64]uint64, len(RTTBuckets))
	var c uint64
	for i, le := range RTTBuckets {
		c += h.buckets[i].Load()
		cumulative[le] = c
	}
	return cumulative, max(h.count.Load(), c), float64(h.nanos.Load()) / 1e9
}
