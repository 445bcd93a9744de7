package sim

import (
	"math/rand/v2"
	"reflect"
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

// A tick's replica array is reused once every receiver released its
// batch, never before: a batch still held keeps its entities while the
// zone ticks on (they are those of its tick), and the array comes back
// when the last one goes. Released on another goroutine (run with -race),
// as a neighbour's actor does.
func TestReplicaArrayReusedAfterEveryRelease(t *testing.T) {
	w, err := world.Grid("t", 3, 3, 600, [2]float64{-900, -900})
	if err != nil {
		t.Fatal(err)
	}
	z, err := New(Config{Zone: "x1z1", World: w, Seed: 7}, 0)
	if err != nil {
		t.Fatal(err)
	}
	r := z.Rect()
	// One player in each corner, near four neighbours each.
	for i, pos := range [][3]float32{
		{float32(r.Min[0] + 5), 0, float32(r.Min[1] + 5)}, {float32(r.Max[0] - 5), 0, float32(r.Min[1] + 5)},
		{float32(r.Min[0] + 5), 0, float32(r.Max[1] - 5)}, {float32(r.Max[0] - 5), 0, float32(r.Max[1] - 5)},
	} {
		if err := z.Join(0, uint64(i+1), "c", "p", pos, 0); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Duration(0)
	step := func() []ReplicaBatch {
		now += z.Period()
		return slices.Clone(z.Step(now).Replicas)
	}
	array := func(bs []ReplicaBatch) *Replica {
		for i := range bs {
			if len(bs[i].Entities) > 0 {
				return &bs[i].Entities[:1][0]
			}
		}
		t.Fatal("no replicas in the tick's batches")
		return nil
	}
	release := func(bs []ReplicaBatch) {
		done := make(chan struct{})
		go func() {
			for i := range bs {
				bs[i].Release()
			}
			close(done)
		}()
		<-done
	}
	first := step()
	a := array(first)
	held := slices.Clone(first[0].Entities)
	if len(held) == 0 {
		t.Fatal("the first batch is empty")
	}
	// All but one released: the next ticks make new arrays, and the held
	// batch keeps its tick's entities.
	release(first[1:])
	for range 3 {
		next := step()
		if array(next) == a {
			t.Fatal("the array was reused while a batch of it was held")
		}
		release(next)
	}
	if !reflect.DeepEqual(first[0].Entities, held) {
		t.Fatalf("the held batch changed: %+v, want %+v", first[0].Entities, held)
	}
	release(first[:1])
	// Every batch released each tick: one array, tick after tick.
	prev := array(step())
	release(z.out.Replicas) // Step's own copies: the same batches
	for range 3 {
		next := step()
		if p := array(next); p != prev {
			t.Fatal("a released array was not reused")
		}
		release(next)
	}
}
