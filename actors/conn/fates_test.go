package conn

import (
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/replication/move"
)

// TestPumpFoldsFatesOnceASecond: the pumps add a connection's packet fates
// to the pool's counters and sample its RTT once a second (foldFates, out
// of line behind pump's own test of the second): over a replay of 120
// steps, a sample a second of it and the delivered packets counted.
func TestPumpFoldsFatesOnceASecond(t *testing.T) {
	const steps = 120
	x := record(t, steps)
	s, cs := benchShard(t, x, 1)
	c := cs[0]
	var ctl move.ControlState
	now := time.Duration(0)
	for i := range steps {
		now = time.Duration(i+1) * benchStep
		for _, p := range x.steps[i] {
			d := msg.NewDatagram()
			d.N = copy(d.Buf, p)
			d.Addr = benchClient
			s.handle(c, d, now)
			s.pumpOne(c, now)
			s.flush()
		}
		ctl.Pos[0] += 0.2
		m := msg.NewControl()
		m.LastApplied, m.State = c.srv.LastApplied(), ctl
		s.handle(c, m, now)
		s.pumpOne(c, now)
		s.flush()
	}
	counters := s.pool.counters
	secs := uint64(now / foldEvery)
	if n := counters.RTT.count.Load(); n < secs-1 || n > secs+1 {
		t.Errorf("%d RTT samples in %v of pumps, want one a second (%d)", n, now, secs)
	}
	if d := counters.PacketsDelivered.Load(); d == 0 {
		t.Errorf("no delivered packet folded in %v (the connection's own count: %d)", now, c.srv.Stats().Notify.Delivered)
	}
}
