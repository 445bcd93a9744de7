package zone

import (
	"strconv"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/zones/sim"
	"github.com/ghostwire/ghostwire/zones/world"
)

// TestViewNudgeRidesTheControl: a connection that joined with
// ViewWithControl gets one message a tick — its Control, carrying the
// nudge of the view published before it — and no ViewReady; one that did
// not gets a Control and a ViewReady, as before. Every view is taken.
func TestViewNudgeRidesTheControl(t *testing.T) {
	sys := quietSystem()
	defer sys.Shutdown()
	classes := ghostClasses(t)
	m := new(Metrics)
	clk := newClock()
	zw, err := Start(sys, world.Default(), sim.Config{NPCs: 20, Classes: classes}, Params{Now: clk.Now, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	defer zw.Stop()
	zpid := zw.PID("x0z0")
	const players = 8
	conns := make([]*benchConn, players)
	for i := range conns {
		c := &benchConn{}
		c.views.AcceptRefs()
		pid, _ := sys.ProcessRegistry.Add(c, "nconn$"+strconv.Itoa(i))
		conns[i] = c
		// Even players take the view with the Control; odd ones as before.
		sys.Root.Send(zpid, &msg.Join{Player: uint64(i + 1), Conn: pid, Ghosts: pid, Views: &c.views, ViewWithControl: i%2 == 0})
	}
	waitFor(t, 5*time.Second, "joins", func() bool { return m.Joins.Load() == players })
	waitFor(t, 5*time.Second, "20 controls each", func() bool {
		for _, c := range conns {
			if c.controls.Load() < 20 {
				return false
			}
		}
		return true
	})
	_ = sys.Root.RequestFuture(zpid, &Pause{Paused: true}, time.Second).Wait()
	time.Sleep(50 * time.Millisecond) // what the last tick sent arrives
	for i, c := range conns {
		ctl, nudged, readies, taken, msgs := c.controls.Load(), c.nudged.Load(), c.readies.Load(), c.taken.Load(), c.messages.Load()
		if i%2 == 0 {
			if readies != 0 || nudged != ctl || msgs != ctl {
				t.Errorf("player %d (view with control): %d messages, %d controls, %d nudged, %d ViewReady; want one Control with the nudge a tick", i+1, msgs, ctl, nudged, readies)
			}
		} else if nudged != 0 || readies < ctl-1 {
			t.Errorf("player %d: %d controls, %d nudged, %d ViewReady; want a ViewReady a tick and no nudged Control", i+1, ctl, nudged, readies)
		}
		if taken < ctl-1 {
			t.Errorf("player %d: %d views taken for %d controls", i+1, taken, ctl)
		}
		if v := c.views.Take(); v != nil {
			t.Errorf("player %d: a view left in the slot (tick %d) with no nudge to take it", i+1, v.Tick)
			v.Release()
		}
	}
}
