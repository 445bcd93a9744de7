package sim

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/zones/world"
)

// A tick's replica batches list, for every neighbour, exactly the owned
// entities within BorderRange of its rectangle, in slot order: the
// candidates sendReplicas skips (deep inside the zone) are never near a
// neighbour. The middle zone of a 3×3 world has all eight kinds of
// neighbour; players stand everywhere, most of them near the edges.
func TestReplicaBatchesListEveryEntityNearANeighbour(t *testing.T) {
	w, err := world.Grid("t", 3, 3, 600, [2]float64{-900, -900})
	if err != nil {
		t.Fatal(err)
	}
	z, err := New(Config{Zone: "x1z1", World: w, NPCs: 40, Seed: 7}, 0)
	if err != nil {
		t.Fatal(err)
	}
	r := z.Rect()
	rng := rand.New(rand.NewPCG(1, 2))
	const players = 300
	for i := range players {
		edge := func(lo, hi float64) float32 {
			if rng.IntN(3) == 0 { // anywhere
				return float32(lo + 1 + rng.Float64()*(hi-lo-2))
			}
			d := rng.Float64() * 2.2 * z.border // near an edge: within the border range and beyond
			if rng.IntN(2) == 0 {
				return float32(lo + 1 + d)
			}
			return float32(hi - 1 - d)
		}
		pos := [3]float32{edge(r.Min[0], r.Max[0]), 0, edge(r.Min[1], r.Max[1])}
		if err := z.Join(0, uint64(i+1), "c", "p", pos, 0); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Duration(0)
	listed := 0
	for tick := range 30 {
		now += z.Period()
		for p := uint64(1); p <= players; p++ {
			z.Input(now, p, []move.Move{{Seq: uint64(tick + 1), Dt: 32, Forward: 127, Yaw: uint16(p * 2654435761)}})
		}
		out := z.Step(now)
		if len(out.Replicas) != len(z.nbrs) {
			t.Fatalf("tick %d: %d batches for %d neighbours", tick, len(out.Replicas), len(z.nbrs))
		}
		for i, n := range z.nbrs {
			var want []uint64
			for s := range z.ents {
				e := &z.ents[s]
				if (e.role == roleOwned || e.role == roleFrozen) && n.Dist2(float64(e.state.Pos[0]), float64(e.state.Pos[2])) <= z.border*z.border {
					want = append(want, e.id)
				}
			}
			var got []uint64
			for _, rp := range out.Replicas[i].Entities {
				got = append(got, rp.ID)
			}
			if out.Replicas[i].To != n.ID || !slices.Equal(got, want) {
				t.Fatalf("tick %d, batch to %s (%s): %d entities %v, want %d %v", tick, out.Replicas[i].To, n.ID, len(got), got, len(want), want)
			}
			listed += len(got)
		}
	}
	if listed < 30*players/2 {
		t.Fatalf("only %d entities listed over 30 ticks: the test put too few near the borders", listed)
	}
}
