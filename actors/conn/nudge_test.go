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
// the view — the slot nudges no more until the pump applies it.
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
	if !c.gm.ViewWaiting() || c.gm.ViewTick() != 1 {
		t.Fatalf("the nudged Control did not take the view (waiting %v, view tick %d)", c.gm.ViewWaiting(), c.gm.ViewTick())
	}
	if c.heldCtl != nil {
		t.Fatal("a Control that brought its view was held for a ViewReady")
	}
	c.gm.Apply(now) // the pump's: the slot empties

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
	c.gm.Apply(now)

	publish(4)
	control(4, 1, true) // a stale epoch: dropped, its nudge honoured
	if !c.gm.ViewWaiting() {
		t.Fatal("a stale Control's nudge was not taken: the view would wait for the next one")
	}
	if c.gm.ViewTick() != 4 {
		t.Fatalf("view tick %d after the stale Control's nudge, want 4", c.gm.ViewTick())
	}
	if c.ctlEpoch != 2 {
		t.Fatalf("control epoch %d: the stale Control was taken", c.ctlEpoch)
	}
}

// TestHeldControlWaitsViewWaitAtMost: a tick's Control held for its view
// goes without it viewWait after it arrived, not before: a pump just
// before that keeps it (and names that instant among its deadlines), the
// pump at it hands it to the session and stops waiting for views; a
// stale Control arriving meanwhile (dropped) moves neither.
func TestHeldControlWaitsViewWaitAtMost(t *testing.T) {
	x := record(t, 2)
	s, cs := benchShard(t, x, 1)
	c := cs[0]
	c.viewsFlow = true
	at := 10 * time.Millisecond
	control := func(tick, epoch uint64, now time.Duration) {
		m := msg.NewControl()
		m.Player, m.Tick, m.Epoch = c.player, tick, epoch
		s.handle(c, m, now)
	}
	control(5, 2, at)
	if c.heldCtl == nil {
		t.Fatal("a Control whose view had not come was not held")
	}
	control(4, 1, at+time.Millisecond) // the previous owner's, late: dropped
	if c.heldCtl == nil {
		t.Fatal("a stale Control handed the held one on")
	}
	if next := c.pump(at + 2*time.Millisecond); next > at+viewWait {
		t.Fatalf("pump's next deadline %v, past the held Control's %v", next, at+viewWait)
	}
	c.pump(at + viewWait - time.Microsecond)
	if c.heldCtl == nil || !c.viewsFlow {
		t.Fatalf("the held Control went %v after it arrived, before viewWait (%v)", viewWait-time.Microsecond, viewWait)
	}
	c.pump(at + viewWait)
	if c.heldCtl != nil || c.viewsFlow {
		t.Fatalf("the held Control still waits viewWait after it arrived (held %v, views flow %v)", c.heldCtl != nil, c.viewsFlow)
	}
}
