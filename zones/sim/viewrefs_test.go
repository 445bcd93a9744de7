package sim

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/ghost"
	"github.com/ghostwire/ghostwire/replication/move"
)

// refBucketsAgree accepts a range of priorities where refBuckets gives
// ghost.WeightedViewRef's reference for every priority in it (checked on
// 100,000 random ones), and refuses one where it does not for some
// (a witness is found): where WeightedViewRef's clamps of the priority
// (below 1e-6, above 1e12) or of the bucket (a weighted priority below
// 2^-32) give another bucket than the weighted priority's own.
func TestRefBucketsAgree(t *testing.T) {
	for _, tc := range []struct {
		name      string
		lo, hi, w float32
		want      bool
	}{
		{name: "players by default", lo: 0.1, hi: 3277.75, w: 2, want: true},
		{name: "npcs by default", lo: 0.1, hi: 3277.75, w: 1, want: true},
		{name: "odd weight", lo: 0.013, hi: 977.3, w: 0.37, want: true},
		{name: "one priority", lo: 1, hi: 1, w: 1, want: true},
		// At weight 1 the clamps give the same buckets either way.
		{name: "priority clamped below at weight 1", lo: 1e-9, hi: 1, w: 1, want: true},
		{name: "bucket clamped above", lo: 1, hi: 1e3, w: 1e10, want: true},
		{name: "priority clamped below", lo: 1e-9, hi: 1, w: 3, want: false},
		{name: "priority clamped above", lo: 1, hi: 1e13, w: 1e-3, want: false},
		{name: "bucket clamped below", lo: 1e-5, hi: 1, w: 1e-6, want: false},
		{name: "no weight", lo: 1, hi: 2, w: 0, want: false},
		{name: "infinite range", lo: 1, hi: float32(math.Inf(1)), w: 1, want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := refBucketsAgree(tc.lo, tc.hi, tc.w); got != tc.want {
				t.Fatalf("refBucketsAgree(%g, %g, %g) = %v, want %v", tc.lo, tc.hi, tc.w, got, tc.want)
			}
			if !(tc.w > 0) || math.IsInf(float64(tc.hi), 0) {
				return
			}
			rng := rand.New(rand.NewPCG(1, 2))
			a, b := math.Float32bits(tc.lo), math.Float32bits(tc.hi)
			witness := false
			for range 100000 {
				p := math.Float32frombits(a + uint32(rng.Uint64N(uint64(b-a)+1)))
				idx := uint32(rng.IntN(1 << 24))
				got, want := fastRef(idx, tc.w, p), ghost.WeightedViewRef(idx, tc.w, p)
				if got != want && tc.want {
					t.Fatalf("fastRef(%d, %g, %g) = %#x, WeightedViewRef %#x", idx, tc.w, p, got, want)
				}
				witness = witness || got != want
			}
			if !tc.want && !witness {
				t.Fatalf("refused [%g, %g] at weight %g, but fastRef matched every priority tried", tc.lo, tc.hi, tc.w)
			}
		})
	}
}

// A zone's view references carry exactly ghost.WeightedViewRef's bucket of
// each member's priority by its class weight, whether the zone makes them
// by refBuckets (the default classes and interest config) or, where
// refBuckets would not be exact for some priority the tracker can give,
// by WeightedViewRef itself.
func TestViewRefBucketsExact(t *testing.T) {
	for _, tc := range []struct {
		name     string
		fast     bool
		far      int
		kindW    float32 // the players' interest weight (0: default)
		npcClass float32 // the NPC class's weight (0: default)
	}{
		{name: "default", fast: true},
		{name: "default, far every tick", fast: true, far: 1},
		{name: "player priorities clamped", kindW: 1e-9},
		{name: "npc buckets clamped", npcClass: 1e-12},
		{name: "npc buckets clamped, far every tick", npcClass: 1e-12, far: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg, err := ghost.NewRegistry(ghost.DefaultBounds())
			if err != nil {
				t.Fatal(err)
			}
			pc, nc := ghost.PlayerClass(nil), ghost.NPCClass(nil)
			if tc.npcClass != 0 {
				nc.Weight = tc.npcClass
			}
			if err := reg.Register(pc, nc); err != nil {
				t.Fatal(err)
			}
			z := oneZone(t, func(c *Config) {
				c.NPCs = 40
				c.Classes[KindPlayer], c.Classes[KindNPC] = pc, nc
				if tc.far != 0 {
					c.FarEvery = tc.far
				}
				if tc.kindW != 0 {
					c.Interest.KindWeight[KindPlayer] = tc.kindW
				}
			})
			for i := range 12 {
				z.Join(0, uint64(i+1), "c", "p", [3]float32{-500 + 12*float32(i), 0, -500 + 9*float32(i%3)}, 0)
			}
			now, refs := time.Duration(0), 0
			for tick := range 30 {
				now += 50 * time.Millisecond
				for i := range 12 {
					z.Input(now, uint64(i+1), []move.Move{fwd(uint64(tick+1), uint16(i*5000))})
				}
				out := z.Step(now)
				for _, v := range out.Views {
					ents := z.AppendView(nil, v)
					got := z.AppendViewRefs(nil, v)
					if len(got) != len(ents) {
						t.Fatalf("tick %d player %d: %d references, %d entries", tick, v.Entity, len(got), len(ents))
					}
					for i, e := range ents {
						want := ghost.WeightedViewRef(got[i].Index(), e.Class.PriorityWeight(), e.Priority)
						if got[i] != want {
							t.Fatalf("tick %d player %d entity %d (priority %g, weight %g): reference %#x, want %#x", tick, v.Entity, e.Entity, e.Priority, e.Class.PriorityWeight(), got[i], want)
						}
					}
					refs += len(got)
				}
			}
			if z.refFast != tc.fast {
				t.Errorf("references by refBuckets: %v, want %v", z.refFast, tc.fast)
			}
			if refs == 0 {
				t.Fatal("no references made")
			}
		})
	}
}
