package conn

import "time"

// foldEvery is how often a connection adds its packet fates to the shared
// counters: reading the session's stats on every pump would cost more than
// the metric is worth.
const foldEvery = time.Second

// folded is what a connection already added to Counters.PacketsDelivered
// and PacketsLost, and when.
type folded struct {
	at                 time.Duration
	delivered, dropped uint64
}

// foldFates adds the fates of this connection's sent packets since the last
// fold to the pool's counters: about once a second, and once more at the
// end (final).
func (c *Conn) foldFates(now time.Duration, final bool) {
	if c.srv == nil || (!final && now-c.fates.at < foldEvery) {
		return
	}
	n := c.srv.Stats().Notify
	c.pool.counters.PacketsDelivered.Add(n.Delivered - c.fates.delivered)
	c.pool.counters.PacketsLost.Add(n.Dropped - c.fates.dropped)
	c.fates = folded{at: now, delivered: n.Delivered, dropped: n.Dropped}
}
