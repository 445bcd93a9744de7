package zone

import (
	"slices"
	"testing"
	"time"

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
	npcs := func() []uint64 {
		var ids []uint64
		f := RequestInspect(sys.Root, zw.PID("x1z1"), func(z *sim.Zone) {
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
