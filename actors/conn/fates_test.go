package conn

import (
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/replication/notify"
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
	now := replayPumped(s, c, x, false)
	counters := s.pool.counters
	secs := uint64(now / foldEvery)
	if n := counters.RTT.count.Load(); n < secs-1 || n > secs+1 {
		t.Errorf("%d RTT samples in %v of pumps, want one a second (%d)", n, now, secs)
	}
	if d := counters.PacketsDelivered.Load(); d == 0 {
		t.Errorf("no delivered packet folded in %v (the connection's own count: %d)", now, c.srv.Stats().Notify.Delivered)
	}
}

// TestFoldCountsTheWindowsJump: a client heard again after a blackout
// longer than the receive window (its datagrams of 280 steps, one or more
// a step, lost on the way) has its next packet accepted far ahead
// (notify's AcceptFar), and the connection's fold adds that to the pool's
// FarAccepted once, not again at later folds nor at the final one.
func TestFoldCountsTheWindowsJump(t *testing.T) {
	const gapFrom, gapTo, steps = 30, 310, 400
	sent := 0
	// The client sends acks alone, one a step: the server forces its
	// control state every step, in the recording as in the replay.
	x := recordOpts(t, steps, false, nil, false, func(i int) bool {
		in := i >= gapFrom && i < gapTo
		if in {
			sent++
		}
		return in
	})
	if sent <= notify.DefaultAckWindow {
		t.Fatalf("%d datagrams cut, want more than the window (%d)", sent, notify.DefaultAckWindow)
	}
	s, cs := benchShard(t, x, 1)
	c := cs[0]
	now := replayPumped(s, c, x, true)
	st := c.srv.Stats()
	if st.Notify.FarAccepted != 1 || st.Rejected() != 0 {
		t.Fatalf("session: FarAccepted %d, %d datagrams rejected; want 1, 0 (%d datagrams cut): %+v", st.Notify.FarAccepted, st.Rejected(), sent, st)
	}
	counters := s.pool.counters
	if n := counters.FarAccepted.Load(); n != 1 {
		t.Fatalf("pool FarAccepted %d after the replay's folds, want 1", n)
	}
	c.foldFates(now, true)
	if n := counters.FarAccepted.Load(); n != 1 {
		t.Fatalf("pool FarAccepted %d after the final fold, want 1 (counted once)", n)
	}
}

// replayPumped replays x on c, a step at a time: each of the client's
// datagrams handled and pumped, then the zone's Control for the tick
// (forcing its control state out if force), pumped; it returns the last
// step's time.
func replayPumped(s *shard, c *Conn, x *recording, force bool) time.Duration {
	var ctl move.ControlState
	now := time.Duration(0)
	for i := range x.steps {
		now = time.Duration(i+1) * benchStep
		for _, p := range x.steps[i] {
			feed(s, c, p, now)
			s.pumpOne(c, now)
			s.flush()
		}
		ctl.Pos[0] += 0.2
		m := msg.NewControl()
		m.LastApplied, m.State, m.Force = c.srv.LastApplied(), ctl, force
		s.handle(c, m, now)
		s.pumpOne(c, now)
		s.flush()
	}
	return now
}
