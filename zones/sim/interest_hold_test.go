package sim

import (
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/zones/world"
)

// A frozen player's views keep the priorities of its set's last Update
// while the handoff takes ticks: the set keeps no priorities between
// ticks (interest.Tracker.AppendPriorities recomputes them from the
// tracker's table), so freezing holds them (interest.Tracker.Hold).
// Recomputed instead from the moving members' new positions, the views
// of a set that stays as it was would drift in priority.
func TestFrozenPlayerKeepsItsPriorities(t *testing.T) {
	h := newHarness(t, world.Default(), 0, func(c *Config) { c.Handoff.OfferTimeout = 10 * time.Second })
	still := func(p *player, tick int) (int8, uint16) { return 0, 0 }
	h.join(1, -20, -20, still)
	h.join(2, -20, -80, still)
	h.tick(1)
	src := h.zones["x0z0"]
	priority := func(out *Output) (float32, bool) {
		for _, v := range out.Views {
			if v.Entity != 1 {
				continue
			}
			for _, e := range src.AppendView(nil, v) {
				if e.Entity == 2 {
					return e.Priority, true
				}
			}
		}
		return 0, false
	}
	h.now += h.period
	last, ok := priority(src.Step(h.now))
	if !ok {
		t.Fatal("player 2 not in player 1's view")
	}
	if err := src.Teleport(h.now, 1, [3]float32{20, 0, -20}); err != nil { // into x1z0: offered, frozen
		t.Fatal(err)
	}
	if len(src.Pending()) == 0 {
		t.Fatal("no offer")
	}
	p2 := h.players[2]
	for tick := range 20 { // player 2 walks towards where player 1 was
		p2.sent++
		src.Input(h.now, 2, []move.Move{{Seq: p2.sent, Dt: 48, Forward: 127}})
		h.now += h.period
		got, ok := priority(src.Step(h.now))
		if !ok {
			t.Fatalf("tick %d: player 2 left the frozen player's view", tick)
		}
		if got != last {
			t.Fatalf("tick %d: frozen player's view gives player 2 priority %g, its last update %g", tick, got, last)
		}
	}
	if e, _ := src.Entity(2); e.State.Pos[2] < -75 {
		t.Fatalf("player 2 did not move (at %v): the test proves nothing", e.State.Pos)
	}
}
