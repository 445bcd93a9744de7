package conn

import (
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/actors/msg"
)

// TestPostControlsKeepsOrderOnce: a zone's batch of Controls is filed as
// posting each would file it — every Control once, each connection's in
// the batch's order (a newer owner's after the older owner's), merged
// into one still waiting of the same owner — under one wake-up; a
// connection stopped between the tick and the round never handles its
// Control (released with it), the others do.
func TestPostControlsKeepsOrderOnce(t *testing.T) {
	x := record(t, 1)
	s, cs := benchShard(t, x, 3)
	a, b, c := cs[0], cs[1], cs[2]
	ctl := func(tick, applied, epoch uint64) *msg.Control {
		m := msg.NewControl()
		m.Tick, m.LastApplied, m.Epoch = tick, applied, epoch
		return m
	}
	a1, b1, c1, a2 := ctl(1, 10, 2), ctl(1, 5, 2), ctl(1, 7, 2), ctl(2, 11, 3)
	batch := []msg.PortControl{{Conn: a, Control: a1}, {Conn: b, Control: b1}, {Conn: c, Control: c1}, {Conn: a, Control: a2}}
	if p := a.port(); p.Queue != &s.cq || p.Conn != a || c.port().Queue != p.Queue || s.cq.Taker != s {
		t.Fatal("a shard's connections do not share its queue")
	}
	s.wake = make(chan struct{}, 1) // benchShard's has none
	s.PostControls(batch)
	want := []envelope{{a, a1}, {b, b1}, {c, c1}, {a, a2}}
	if len(s.inbox) != len(want) {
		t.Fatalf("%d events filed for a batch of %d", len(s.inbox), len(want))
	}
	for i, ev := range s.inbox {
		if ev.c != want[i].c || ev.m != want[i].m {
			t.Fatalf("event %d: %p %v, want %p %v", i, ev.c, ev.m, want[i].c, want[i].m)
		}
	}
	select {
	case <-s.wake:
	default:
		t.Fatal("no wake-up for a batch into an empty inbox")
	}
	// The same owner's next tick merges into the waiting one, as a post.
	b2 := ctl(2, 6, 2)
	s.PostControls([]msg.PortControl{{Conn: b, Control: b2}})
	if len(s.inbox) != 4 || s.pool.counters.ControlsSuperseded.Load() != 1 {
		t.Fatalf("%d events, %d superseded; want b's tick 2 merged into its tick 1 (4, 1)",
			len(s.inbox), s.pool.counters.ControlsSuperseded.Load())
	}
	if b1.Tick != 2 || b1.LastApplied != 6 {
		t.Fatalf("b's waiting Control: tick %d applied %d, want 2 6", b1.Tick, b1.LastApplied)
	}
	c.stopped = true // gone between the tick and the round (onStop; benchShard has no actor system)
	s.round(time.Second)
	if a.ctlEpoch != 3 || a.applied != 11 {
		t.Fatalf("a handled epoch %d, applied %d; want 3, 11 (its Controls in order)", a.ctlEpoch, a.applied)
	}
	if b.applied != 6 {
		t.Fatalf("b applied %d, want 6", b.applied)
	}
	if c.ctlAt != 0 || c.applied != 0 {
		t.Fatalf("the stopped connection handled its Control (applied %d)", c.applied)
	}
}

// TestPostControlsToAStoppedShardReleasesThem: a batch that reaches a
// shard that stopped is released, each Control once: those made by a
// player's ViewSlot come back to it, one by one.
func TestPostControlsToAStoppedShardReleasesThem(t *testing.T) {
	x := record(t, 1)
	s, cs := benchShard(t, x, 2)
	s.shutdown()
	var slots [2]msg.ViewSlot
	ms := []*msg.Control{slots[0].NewControl(), slots[1].NewControl()}
	s.PostControls([]msg.PortControl{{Conn: cs[0], Control: ms[0]}, {Conn: cs[1], Control: ms[1]}})
	if len(s.inbox) != 0 {
		t.Fatalf("a stopped shard filed %d events", len(s.inbox))
	}
	for i := range slots {
		if got := slots[i].NewControl(); got != ms[i] {
			t.Fatalf("slot %d: its Control not back from the stopped shard", i)
		}
		if again := slots[i].NewControl(); again == ms[i] {
			t.Fatalf("slot %d handed its Control out twice (released twice)", i)
		}
	}
}
