package zone

import (
	"slices"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/zones/sim"
	"github.com/ghostwire/ghostwire/zones/world"
)

// A zone started with handed-over NPCs (SpawnWith, a handover) runs them,
// not its share; its actor restarted after a panic spawns a fresh share
// of this run's generation instead of the handed NPCs again (they have
// walked on since: restored twice, some would exist twice).
func TestHandedNPCsServeTheFirstStartOnly(t *testing.T) {
	sys := quietSystem()
	t.Cleanup(sys.Shutdown)
	clk := newClock()
	base := sim.Config{NPCs: 40, Classes: ghostClasses(t)} // 10 a zone
	src, err := sim.New(sim.Config{Zone: "x1z1", NPCs: 3, Seed: 5, NPCGeneration: 7}, 0)
	if err != nil {
		t.Fatal(err)
	}
	handed := src.AppendNPCs(nil)
	zw, err := StartZones(sys, world.Default(), base, Params{Now: clk.Now, NPCGeneration: func(string) uint64 { return 9 }}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(zw.Stop)
	if err := zw.SpawnWith("x1z1", handed); err != nil {
		t.Fatal(err)
	}
	npcs := func() []uint64 { return ownedNPCs(t, sys, zw.PID("x1z1")) }
	var want []uint64
	for _, st := range handed {
		want = append(want, st.Snap.Entity)
	}
	slices.Sort(want)
	if got := npcs(); !slices.Equal(got, want) {
		t.Fatalf("zone started with handed NPCs runs %x, want the handed %x", got, want)
	}
	sys.Root.Send(zw.PID("x1z1"), &Inspect{Fn: func(*sim.Zone) { panic("test: a zone's bug") }})
	deadline := time.Now().Add(5 * time.Second)
	for zw.Metrics().Panics.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	got := npcs()
	if len(got) != 10 {
		t.Fatalf("restarted zone runs %d NPCs (%x), want a fresh share of 10", len(got), got)
	}
	for _, id := range got {
		if slices.Contains(want, id) {
			t.Fatalf("restarted zone restored handed NPC %#x again", id)
		}
	}
}

// A zone actor restarted empty after a panic spawns its fresh share of
// NPCs under ids of its own, not the run's before it: that run's NPCs
// that walked into a neighbour zone live on there, and a second NPC of
// the same id would have its handoffs refused by each zone. One process
// (generation 0) and a cluster's run (a lease epoch's generation) alike;
// a second panic takes yet other ids.
func TestRestartedZoneSpawnsNewNPCIDs(t *testing.T) {
	for _, gen := range []uint64{0, 9} {
		sys := quietSystem()
		t.Cleanup(sys.Shutdown)
		clk := newClock()
		base := sim.Config{NPCs: 40, Classes: ghostClasses(t)} // 10 a zone
		zw, err := StartZones(sys, world.Default(), base, Params{Now: clk.Now, NPCGeneration: func(string) uint64 { return gen }}, []string{"x0z0"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(zw.Stop)
		npcs := func() []uint64 { return ownedNPCs(t, sys, zw.PID("x0z0")) }
		seen := npcs()
		if len(seen) != 10 {
			t.Fatalf("generation %d: the zone runs %d NPCs, want 10", gen, len(seen))
		}
		for panics := uint64(1); panics <= 2; panics++ {
			sys.Root.Send(zw.PID("x0z0"), &Inspect{Fn: func(*sim.Zone) { panic("test: a zone's bug") }})
			waitFor(t, 5*time.Second, "the panic counted", func() bool { return zw.Metrics().Panics.Load() == panics })
			got := npcs()
			if len(got) != 10 {
				t.Fatalf("generation %d, restart %d: %d NPCs, want a fresh share of 10", gen, panics, len(got))
			}
			for _, id := range got {
				if slices.Contains(seen, id) {
					t.Fatalf("generation %d, restart %d: NPC id %#x again, spawned by a run before", gen, panics, id)
				}
			}
			seen = append(seen, got...)
		}
	}
}

// ownedNPCs is the ids of the NPCs the zone at pid owns, sorted.
func ownedNPCs(t *testing.T, sys *actor.ActorSystem, pid *actor.PID) []uint64 {
	t.Helper()
	var ids []uint64
	f := RequestInspect(sys.Root, pid, func(z *sim.Zone) {
		z.Entities(func(e sim.EntityInfo) {
			if e.Owned && e.Kind == sim.KindNPC {
				ids = append(ids, e.ID)
			}
		})
	}, 5*time.Second)
	if _, err := msg.Await(f); err != nil {
		t.Fatal(err)
	}
	slices.Sort(ids)
	return ids
}
