package sim

import (
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/ghost"
	"github.com/ghostwire/ghostwire/replication/move"
)

// TestHeldRefreshStagger: a slot's held entry is refreshed (a copy of its
// live entry) on every tick where (tick+slot) % heldEvery is 0, and
// carried on the others unless a refresh is owed (Snapshot: the stagger
// spreads the refreshes over the ticks).
func TestHeldRefreshStagger(t *testing.T) {
	for _, every := range []int{2, 3, 4} {
		z, now := crowdZoneWith(t, 40, 0, func(c *Config) { c.FarEvery = every })
		var mv []move.Move
		var refs []ghost.ViewRef
		staggered, carried := 0, 0
		for tick := range 30 {
			now += 50 * time.Millisecond
			refs = crowdTick(z, 40, now, tick, mv, refs)
			if z.snap == nil || z.ov.heldEvery != uint64(every) {
				t.Fatalf("every %d tick %d: no snapshot with held entries (held every %d)", every, tick, z.ov.heldEvery)
			}
			for sl := range z.snapN {
				due := (z.tick+uint64(sl))%uint64(every) == 0
				refreshed := z.refresh[sl>>6]&(1<<(uint(sl)&63)) != 0
				switch {
				case due && !refreshed:
					t.Fatalf("every %d tick %d: slot %d carried on its refresh tick", every, z.tick, sl)
				case due:
					staggered++
				case !refreshed:
					carried++
				case tick > every: // refreshed off its stagger: owed only at the start
					t.Fatalf("every %d tick %d: slot %d refreshed off its stagger", every, z.tick, sl)
				}
			}
		}
		if staggered == 0 || carried == 0 {
			t.Fatalf("every %d: %d staggered refreshes, %d carries: the test lost its held entries", every, staggered, carried)
		}
	}
}
