package conn

import (
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/actors/msg"
)

// TestControlsMergeWhileWaiting: a shard that is behind holds one Control
// per connection, not one per zone tick: a Control posted while an older
// one of the same connection and owner waits, with only datagrams between
// them, is merged into it (the newer state, the larger applied move, a view nudge
// from either; one of an older epoch dropped), counted as superseded; so
// is one after the same owner's Outputs. Another owner's Control or
// Output, any other message in between, or a round that took the older
// one, keeps them apart.
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

	output := func(epoch uint64) {
		o := msg.NewOutput()
		o.Epoch = epoch
		s.post(a, o)
	}
	output(2) // the same owner's events between its ticks: merged across
	ctl(a, 4, 13, 2, false)
	if n, m := controls(); n != 1 || m.Tick != 4 || superseded() != 3 {
		t.Fatalf("a Control after the same owner's Output: %d waiting, tick %d (%d superseded), want 1, 4 (3)", n, m.Tick, superseded())
	}
	ctl(a, 5, 14, 3, false) // another owner's (a handoff): apart
	if n, _ := controls(); n != 2 || superseded() != 3 {
		t.Fatalf("a Control of a newer epoch: %d waiting (%d superseded), want 2 (3)", n, superseded())
	}
	output(2) // the previous owner's events after the new owner's Control
	ctl(a, 6, 15, 3, false)
	if n, _ := controls(); n != 3 || superseded() != 3 {
		t.Fatalf("a Control after another owner's Output: %d waiting (%d superseded), want 3 (3)", n, superseded())
	}

	s.post(a, &msg.Redirect{Epoch: 3}) // not a datagram: the next Control stays apart
	ctl(a, 7, 16, 3, false)
	if n, _ := controls(); n != 4 || superseded() != 3 {
		t.Fatalf("a Control after a Redirect: %d waiting (%d superseded), want 4 (3)", n, superseded())
	}

	s.round(time.Second) // takes them all
	ctl(a, 8, 17, 3, false)
	if n, _ := controls(); n != 1 || superseded() != 3 {
		t.Fatalf("after a round: %d waiting (%d superseded), want 1 (3)", n, superseded())
	}
	if a.ctlEpoch != 3 || a.applied != 16 {
		t.Fatalf("the round handled epoch %d, applied %d; want 3, 16", a.ctlEpoch, a.applied)
	}
}
