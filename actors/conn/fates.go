package conn

import (
	"sync/atomic"
	"time"
)

// foldEvery is how often a connection adds its packet fates to the shared
// counters: reading the session's stats on every pump would cost more than
// the metric is worth.
const foldEvery = time.Second

// foldSecond is the second now falls in, modulo 2^8 (Conn.foldSec): an
// unsigned division (now is never negative), a multiply and a shift.
func foldSecond(now time.Duration) uint8 { return uint8(uint64(now) / uint64(foldEvery)) }

// folded is what a connection already added to Counters.PacketsDelivered
// and PacketsLost (when: Conn.foldSec; ControlsSuperseded's is
// Conn.supFolded): the low 16 bits of each count, enough for the
// difference a fold adds — a connection sends packets only when pumped,
// and a pump folds once the second changed, so a second's packets and
// those in flight; 2^16 superseded Controls would take 36 minutes of
// 30 Hz ticks without a pump. 6 bytes of the Conn, not 12.
type folded struct {
	delivered, dropped uint16
}

// foldFates adds the fates of this connection's sent packets (and its
// superseded control states) since the last fold to the pool's counters,
// and samples its RTT: about once a second, and (counts only) once more at
// the end (final).
func (c *Conn) foldFates(now time.Duration, final bool) {
	if c.srv == nil || (!final && foldSecond(now) == c.foldSec) {
		return
	}
	st := c.srv.Stats()
	n := st.Notify
	if !final && st.RTT > 0 {
		c.sh.pool.counters.RTT.observe(st.RTT)
	}
	c.sh.pool.counters.PacketsDelivered.Add(uint64(uint16(n.Delivered) - c.fates.delivered))
	c.sh.pool.counters.PacketsLost.Add(uint64(uint16(n.Dropped) - c.fates.dropped))
	c.sh.pool.counters.ControlsSuperseded.Add(uint64(uint16(st.ControlsSuperseded) - c.supFolded))
	c.fates = folded{delivered: uint16(n.Delivered), dropped: uint16(n.Dropped)}
	c.supFolded = uint16(st.ControlsSuperseded)
	c.foldSec = foldSecond(now)
	if n.FarAccepted|n.WindowEvicted != 0 {
		c.foldRare(n.FarAccepted, n.WindowEvicted)
	}
}

// foldRare adds the receive window's rare counts (notify's FarAccepted and
// WindowEvicted) since the last fold to the pool's counters. What was
// folded is kept in connRare, which a connection that never had one does
// not allocate: the Conn has no room for it.
func (c *Conn) foldRare(far, evicted uint64) {
	r := c.rareState()
	c.sh.pool.counters.FarAccepted.Add(far - r.farFolded)
	c.sh.pool.counters.WindowEvicted.Add(evicted - r.evictedFolded)
	r.farFolded, r.evictedFolded = far, evicted
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
