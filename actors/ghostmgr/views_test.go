package ghostmgr

import (
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/replication/ghost"
)

// TestLaggingManagerHoldsOneView: a connection whose pump comes only after
// the zone's next tick (a node behind: the nudge handled, the view not yet
// applied) costs the node one view, not two. Each tick the zone makes
// every player's view by its slot (NewViewRefs) and publishes it, the
// connection is nudged, and its manager applies every second tick. The
// view waits in the slot until applied, so the zone's next tick takes it
// back and reuses it: every view after the first is the slot's own, one
// view a player. Taken out of the slot on the nudge (main 7a0b087), it was
// the manager's until its pump, and the zone's next view came from the
// pools: 11,800 of 11,800 (every one).
func TestLaggingManagerHoldsOneView(t *testing.T) {
	reg, _, npc, sw := snapWorld(t)
	const players, ticks, n = 200, 60, 80
	slots := make([]msg.ViewSlot, players)
	ms := make([]*Manager, players)
	for p := range ms {
		m, err := New(reg, ghost.DefaultConfig(), &slots[p], nil)
		if err != nil {
			t.Fatal(err)
		}
		ms[p] = m
	}
	last := make([]*msg.View, players)
	notOwn := 0
	now := time.Second
	for k := 1; k <= ticks; k++ {
		s := sw.Next(n)
		for i := range n {
			var st ghost.State
			st.Pos = [3]float64{float64(i), 0, float64(k)}
			s.Set(i, uint64(1<<40+i), npc, &st)
		}
		sw.Seal(s)
		for p := range slots {
			v := slots[p].NewViewRefs(n, 0)
			if v != last[p] && k > 1 {
				notOwn++
			}
			last[p] = v
			v.SetSnap(s)
			for i := range n {
				v.Refs = append(v.Refs, ghost.NewViewRef(uint32(i), npc, 1))
			}
			v.Tick = uint64(k)
			if slots[p].Publish(v) {
				ms[p].Take() // the nudge, handled
			}
		}
		now += 50 * time.Millisecond
		if k%2 == 0 {
			for _, m := range ms {
				m.Apply(now) // the pump, a tick late
			}
		}
	}
	t.Logf("%d of %d views not the slot's own", notOwn, players*(ticks-1))
	if notOwn != 0 {
		t.Errorf("%d of %d views not the slot's own, want 0: a lagging manager made the zone take a second view", notOwn, players*(ticks-1))
	}
	for _, m := range ms {
		m.Close()
	}
}
