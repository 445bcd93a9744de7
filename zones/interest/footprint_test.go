package interest

import (
	"runtime"
	"testing"
)

// TestSetFootprint measures what a player's interest set holds between
// ticks (its 24-byte header and its buffer) at cmd/capacity's ≈ 41
// members in view (1,000 players and 200 NPCs) and at ≈ 80 (2,000
// players' density). 8-byte entries, each with its priority: 515 B and
// 934 B a player; 4-byte entries, the priorities recomputed in the tick
// (AppendPriorities): 306 B and 506 B.
func TestSetFootprint(t *testing.T) {
	for _, tc := range []struct {
		name     string
		side     float64
		maxBytes float64 // a player, at the members a view measured
	}{
		{name: "41 in view", side: 910, maxBytes: 340},
		{name: "80 in view", side: 640, maxBytes: 560},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const players = 1000
			c := newCrowd(t, players, 200, tc.side, 27.5, Config{EnterRadius: 100, LeaveRadius: 110})
			for range 3 { // the tracker's tables and scratch at their size
				c.tick()
			}
			warm := c.sets
			c.sets = make([]Set, players)
			members := 0
			for range 5 {
				members = c.tick()
			}
			// The sets' bytes: the heap with them, less the heap without
			// them (after the same ticks, so nothing else differs).
			var with, without runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&with)
			c.sets = warm
			runtime.GC()
			runtime.ReadMemStats(&without)
			per := float64(with.HeapAlloc-without.HeapAlloc) / players
			view := float64(members) / players
			t.Logf("%s: %.0f B a player's set at %.1f members (%.1f B a member)", tc.name, per, view, per/view)
			if per > tc.maxBytes {
				t.Errorf("a set holds %.0f B a player at %.1f members, want ≤ %.0f", per, view, tc.maxBytes)
			}
			runtime.KeepAlive(c)
		})
	}
}
