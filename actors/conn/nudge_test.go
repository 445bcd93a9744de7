package conn

import (
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/actors/msg"
)

// TestControlCarriesTheViewNudge: a Control with View set (the zone's
// answer to Join.ViewWithControl) takes the tick's view before its
// control state goes to the session, so the Control is not held waiting
// for a ViewReady; and a stale one (an older epoch, dropped) still takes
// the view — the slot nudges no more until it is taken.
func TestControlCarriesTheViewNudge(t *testing.T) {
	x := record(t, 2)
	s, cs := benchShard(t, x, 1)
	c := cs[0]
	now := 10 * time.Millisecond
	publish := func(tick uint64) {
		v := msg.NewView()
		v.Player, v.Tick = c.player, tick
		if !c.views.Publish(v) {
			t.Fatalf("tick %d: the slot held a view already", tick)
		}
	}
	control := func(tick, epoch uint64, view bool) {
		m := msg.NewControl()
		m.Player, m.Tick, m.Epoch, m.View = c.player, tick, epoch, view
		s.handle(c, m, now)
		now += time.Millisecond
	}

	c.viewsFlow = true // views have been coming with the controls
	publish(1)
	control(1, 2, true)
	if c.views.Take() != nil || c.gm.ViewTick() != 1 {
		t.Fatalf("the nudged Control left the view in the slot (view tick %d)", c.gm.ViewTick())
	}
	if c.heldCtl != nil {
		t.Fatal("a Control that brought its view was held for a ViewReady")
	}

	// No nudge, and the view taken is an older tick's: held for the view.
	control(2, 2, false)
	if c.heldCtl == nil {
		t.Fatal("a Control whose view had not come was not held")
	}
	publish(2)
	control(3, 2, true) // the next tick's nudge releases the held one too
	if c.heldCtl != nil || c.gm.ViewTick() != 2 {
		t.Fatalf("held %v, view tick %d after the next nudged Control", c.heldCtl != nil, c.gm.ViewTick())
	}

	publish(4)
	control(4, 1, true) // a stale epoch: dropped, its nudge honoured
	if v := c.views.Take(); v != nil {
		t.Fatal("a stale Control's nudge left the view in the slot")
	}
	if c.gm.ViewTick() != 4 {
		t.Fatalf("view tick %d after the stale Control's nudge, want 4", c.gm.ViewTick())
	}
	if c.ctlEpoch != 2 {
		t.Fatalf("control epoch %d: the stale Control was taken", c.ctlEpoch)
	}
}
