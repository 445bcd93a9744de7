package conn

import (
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/replication/move"
)

// TestPumpFilesTheDeadlineItsPartsGive: after every round, the deadline
// a connection's pump filed in the shard's heap is no later than the one
// its session and ghost manager give when asked afresh — a guard for any
// copy of their state the pump keeps (a view taken and left unapplied, a
// table made pending by a lost record, an ack owed, the ghosts' slot). A
// connection replays a client that loses some of the server's datagrams
// and sends acks alone (no moves: not streaming, so the ghosts' slot is
// the deadline, not the ack's), with the tick's view on every Control, a
// second view nudged on its own within the millisecond after the first
// was applied (it waits for the clock), and the client's datagrams in
// rounds of their own; the ghosts move only on the steps whose datagrams
// are lost, so the table goes idle between and the lost records make it
// pending again.
func TestPumpFilesTheDeadlineItsPartsGive(t *testing.T) {
	const steps = 60
	x := recordWith(t, steps, false, func(i int) bool { return i%5 == 2 })
	s, cs := benchShard(t, x, 1)
	c := cs[0]
	g := newGhostWorld(t, s.pool.cfg.Registry, 1, 20, 200)
	var ctl move.ControlState
	var waited, pend, idle int
	check := func(i int, what string, now time.Duration) {
		t.Helper()
		want := c.srv.NextDeadlineFor(now, c.gm)
		if c.srv.GhostFatesWaiting() {
			want = min(want, c.srv.GhostSlot(now)) // TestWaitingFatesKeepTheDeadline
		}
		if c.heldCtl != nil {
			want = min(want, c.heldUntil())
		}
		want = max(want, now+time.Microsecond)
		if c.hidx < 0 || s.heap.deadline(c) > want {
			t.Fatalf("step %d, after the %s round: the next pump is later than %v, the deadline the session and the ghost manager give (in the heap: %v)",
				i, what, want, c.hidx >= 0)
		}
		switch {
		case c.gm.ViewWaiting():
			waited++
		case c.gm.Pending():
			pend++
		default:
			idle++
		}
	}
	for i := range steps {
		now := time.Duration(i+1) * benchStep
		if i < 3 || i%5 == 2 {
			g.tick(now, benchStep)
		}
		ctl.Pos[0] += 0.2
		m := c.views.NewControl()
		m.Player, m.Tick, m.View = c.player, uint64(i+1), g.publish(c, 0, uint64(i+1))
		m.LastApplied, m.State, m.Force = c.srv.LastApplied(), ctl, true
		s.post(c, m)
		s.round(now)
		check(i, "tick", now)

		now += time.Millisecond / 2
		if g.publish(c, 0, uint64(i+1)) {
			s.post(c, msg.ViewReadyMsg)
		}
		s.round(now)
		check(i, "nudge", now)

		for _, p := range x.steps[i] {
			now += benchStep / 4
			postClient(s, c, p)
			s.round(now)
			check(i, "datagram", now)
		}
	}
	if waited == 0 || pend == 0 || idle == 0 {
		t.Fatalf("after the rounds a view waited %d times, the ghosts were pending %d times, neither %d: the check did not bite", waited, pend, idle)
	}
}
