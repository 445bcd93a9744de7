package sim

import (
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/zones/world"
)

// TestHandoffCostsNoUpdate: a player crossing a border hears of its moves
// every tick, handoff or not. The old owner reports the moves it applied in
// the tick the player froze (before, frozen players got no Control, and
// the new owner's first one came a tick later: one update skipped at every
// crossing, the 100 ms "hitch" botswarm measured at 20 Hz); the new owner
// applies the moves that travelled with the Commit in its next tick.
func TestHandoffCostsNoUpdate(t *testing.T) {
	h := newHarness(t, world.Default(), 20, func(c *Config) { c.MinDwell = 300 * time.Millisecond })
	for i := range 40 {
		x := float32(h.rng.Float64()*60 - 30)
		zz := float32(h.rng.Float64()*60 - 30)
		h.join(uint64(i+1), x, zz, randomWalk(h.rng))
	}
	h.tick(400)
	crossings := 0
	for _, p := range h.players {
		for i := 1; i < len(p.advanced); i++ {
			a, b := p.advanced[i-1], p.advanced[i]
			if b.routes == a.routes {
				continue
			}
			crossings++
			if gap := b.at - a.at; gap != h.period {
				t.Fatalf("player %d: moves acknowledged at %v, then after its handoff at %v: %v without an update",
					p.id, a.at, b.at, gap-h.period)
			}
		}
	}
	if crossings < 40 {
		t.Fatalf("only %d crossings: the test did not exercise handoffs", crossings)
	}
}
