package conn

import (
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/actors/msg"
)

// TestControlsMergeWhileWaiting: a shard that is behind holds one Control
// per connection, not one per zone tick: a Control posted while an older
// one of the same connection waits, with only datagrams between them, is
// merged into it (the newer state, the larger applied move and epoch, a
// view nudge from either; one of an older epoch dropped), counted as
// superseded. Any other message in between, or a round that took the
// older one, keeps them apart.
func TestControlsMergeWhileWaiting(t *testing.T) {
	x := record(t, 1)
	s, cs := benchShard(t, x, 2)
	a, b := cs[0], cs[1]
	ctl := func(c *Conn, tick, applied, epoch uint64, view bool) *msg.Control {
		m := msg.NewControl()
		m.Tick, m.LastApplied, m.Epoch, m.View = tick, applied, epoch, view
		m.State.Pos[0] = float32(tick)
		s.post(c, m)
		return m
	}
	controls := func() (n int, first *msg.Control) {
		for _, ev := range s.inbox {
			if m, ok := ev.m.(*msg.Control); ok && ev.c == a {
				if n++; n == 1 {
					first = m
				}
			}
		}
		return n, first
	}
	superseded := func() uint64 { return s.pool.counters.ControlsSuperseded.Load() }

	first := ctl(a, 1, 10, 2, true)
	s.post(a, msg.NewDatagram()) // a datagram between: merged across it
	ctl(b, 1, 5, 2, false)       // another connection's: its own
	ctl(a, 2, 12, 2, false)
	n, m := controls()
	if n != 1 || m != first || superseded() != 1 {
		t.Fatalf("%d Controls waiting for a (%d superseded), want 1 (1)", n, superseded())
	}
	if m.Tick != 2 || m.LastApplied != 12 || m.State.Pos[0] != 2 || !m.View || m.Epoch != 2 {
		t.Fatalf("merged: tick %d applied %d pos %v view %v epoch %d; want 2 12 2 true 2",
			m.Tick, m.LastApplied, m.State.Pos[0], m.View, m.Epoch)
	}
	ctl(a, 3, 11, 1, false) // the previous owner's, late: dropped
	if n, m := controls(); n != 1 || m.Tick != 2 || m.Epoch != 2 || superseded() != 2 {
		t.Fatalf("a stale Control: %d waiting, tick %d epoch %d", n, m.Tick, m.Epoch)
	}
	if b := s.inbox[2]; b.c == a {
		t.Fatal("the other connection's Control was merged")
	}

	s.post(a, &msg.Redirect{Epoch: 3}) // not a datagram: the next Control stays apart
	ctl(a, 4, 13, 2, false)
	if n, _ := controls(); n != 2 || superseded() != 2 {
		t.Fatalf("a Control after a Redirect: %d waiting (%d superseded), want 2 (2)", n, superseded())
	}

	s.round(time.Second) // takes them all
	ctl(a, 5, 14, 2, false)
	if n, _ := controls(); n != 1 || superseded() != 2 {
		t.Fatalf("after a round: %d waiting (%d superseded), want 1 (2)", n, superseded())
	}
	if a.ctlEpoch != 2 || a.applied != 13 {
		t.Fatalf("the round handled epoch %d, applied %d; want 2, 13", a.ctlEpoch, a.applied)
	}
}
