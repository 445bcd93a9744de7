package conn

import (
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/replication/move"
)

// TestRejectedDatagramIsNotPumped: a datagram the session rejects — a
// forged one (a bit of its tag flipped), a replayed one (a copy of the
// previous step's) — is counted and leaves the connection out of the
// round's pumps, and the deadline its last pump filed is still no later
// than the one its session and ghost manager give when asked afresh: the
// rejection changed nothing a pump would act on (Conn.onDatagram). A
// datagram the session takes is pumped, as every other event.
func TestRejectedDatagramIsNotPumped(t *testing.T) {
	const steps = 40
	x := record(t, steps)
	s, cs := benchShard(t, x, 1)
	c := cs[0]
	var ctl move.ControlState
	rejected := func(what string, i int, p []byte, now time.Duration) {
		t.Helper()
		before := s.pool.counters.Rejected()
		d := clientDatagram(p)
		s.handleOne(c, d, now)
		if got := s.pool.counters.Rejected(); got != before+1 {
			t.Fatalf("step %d: a %s datagram counted %d rejections, want 1", i, what, got-before)
		}
		if c.dirty || len(s.dirty) != 0 {
			t.Fatalf("step %d: a %s datagram left the connection to be pumped", i, what)
		}
		want := c.srv.NextDeadlineFor(now, c.gm)
		if c.srv.GhostFatesWaiting() {
			want = min(want, c.srv.GhostSlot(now))
		}
		want = max(want, now+time.Microsecond)
		if c.hidx < 0 || s.heap.deadline(c) > want {
			t.Fatalf("step %d, after a %s datagram: the next pump is later than %v, the deadline the session gives", i, what, want)
		}
	}
	var taken int
	for i := range steps {
		now := time.Duration(i+1) * benchStep
		for _, p := range x.steps[i] {
			s.handleOne(c, clientDatagram(p), now)
			if !c.dirty {
				t.Fatalf("step %d: a datagram the session took left the connection unpumped", i)
			}
			taken++
			s.round(now) // the pump, the deadline filed
			if i > 0 && i+1 < steps {
				// The next step's datagram (a sequence not seen yet, so
				// the AEAD decides), forged; it is taken as sent next step.
				forged := append([]byte(nil), x.steps[i+1][0]...)
				forged[len(forged)-1] ^= 1
				rejected("forged", i, forged, now)
				rejected("replayed", i, x.steps[i-1][0], now)
			}
		}
		ctl.Pos[0] += 0.2
		m := msg.NewControl()
		m.LastApplied, m.State = c.srv.LastApplied(), ctl
		s.post(c, m)
		s.round(now)
	}
	if taken < steps || s.pool.counters.AuthFailed.Load() == 0 || s.pool.counters.Replayed.Load() == 0 {
		t.Fatalf("%d datagrams taken, %d forged and %d replayed rejected: the replay did not run",
			taken, s.pool.counters.AuthFailed.Load(), s.pool.counters.Replayed.Load())
	}
}
