package sim

import (
	"errors"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/zones/world"
)

// A zone's NPCs handed to a new run of the zone (a handover) walk on
// there exactly as they would have: the same ids, states and wander
// generators, so after a minute more of ticks both runs hold the same
// world, bit for bit (Checksum), at epochs above the old ones.
func TestNPCsRestoredWalkOnAsBefore(t *testing.T) {
	w, err := world.Grid("one", 1, 1, 1000, [2]float64{-500, -500})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Zone: "x0z0", World: w, NPCs: 60, Seed: 9}
	old, err := New(cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	tick := func(z *Zone, from, n int) {
		for i := from; i < from+n; i++ {
			z.Step(time.Duration(i) * 50 * time.Millisecond)
		}
	}
	tick(old, 1, 200) // they have walked and turned
	npcs := old.AppendNPCs(nil)
	if len(npcs) != 60 {
		t.Fatalf("AppendNPCs: %d NPCs, want 60", len(npcs))
	}

	cfg.NPCs = 0 // the new run spawns none: it takes the handed-over ones
	next, err := New(cfg, 200*50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range npcs {
		if err := next.RestoreNPC(200*50*time.Millisecond, st); err != nil {
			t.Fatalf("RestoreNPC %#x: %v", st.Snap.Entity, err)
		}
	}
	if a, b := old.Checksum(), next.Checksum(); a != b {
		t.Fatalf("restored zone differs at once: %x, want %x", b, a)
	}
	tick(old, 201, 1200)
	tick(next, 201, 1200)
	if a, b := old.Checksum(), next.Checksum(); a != b {
		t.Fatalf("restored NPCs walked elsewhere: checksum %x, want %x", b, a)
	}
	epochs := map[uint64]uint64{}
	for _, st := range npcs {
		epochs[st.Snap.Entity] = uint64(st.Epoch)
	}
	n := 0
	next.Entities(func(e EntityInfo) {
		if e.Kind == KindNPC {
			n++
			if uint64(e.Epoch) <= epochs[e.ID] {
				t.Errorf("NPC %#x at epoch %d, not above its old %d", e.ID, e.Epoch, epochs[e.ID])
			}
		}
	})
	if n != 60 {
		t.Fatalf("%d NPCs after the restore, want 60", n)
	}

	// What a restore refuses.
	st := npcs[0]
	if err := next.RestoreNPC(0, st); !errors.Is(err, ErrExists) {
		t.Fatalf("restoring an NPC the zone has: %v, want ErrExists", err)
	}
	empty, _ := New(cfg, 0)
	bad := st
	bad.Snap.Entity = 42 // a player's id
	if err := empty.RestoreNPC(0, bad); !errors.Is(err, ErrBadState) {
		t.Fatalf("a player id: %v, want ErrBadState", err)
	}
	bad = st
	bad.Snap.Kind = KindPlayer
	if err := empty.RestoreNPC(0, bad); !errors.Is(err, ErrBadState) {
		t.Fatalf("a player's kind: %v, want ErrBadState", err)
	}
	bad = st
	bad.Snap.Speed = 1e30
	if err := empty.RestoreNPC(0, bad); !errors.Is(err, ErrBadState) {
		t.Fatalf("a speed past MaxSpeed: %v, want ErrBadState", err)
	}
	bad = st
	bad.Snap.Control.Pos[0] = 9000
	if err := empty.RestoreNPC(0, bad); !errors.Is(err, ErrOutside) {
		t.Fatalf("outside the world: %v, want ErrOutside", err)
	}
}

// A zone run of another generation spawns other NPC ids (a zone started
// again after a crash, while NPCs of its old run walk in its neighbours),
// and generations are never 0 (one process's) and stay in their 20 bits.
func TestNPCGenerationsSpawnOtherIDs(t *testing.T) {
	ids := func(gen uint64) map[uint64]bool {
		z := oneZone(t, func(c *Config) { c.NPCs = 50; c.NPCGeneration = gen })
		out := map[uint64]bool{}
		z.Entities(func(e EntityInfo) {
			if e.Kind == KindNPC {
				out[e.ID] = true
			}
		})
		if len(out) != 50 {
			t.Fatalf("generation %d: %d NPC ids, want 50", gen, len(out))
		}
		return out
	}
	a, b := ids(0), ids(NPCGenerationOf(77))
	for id := range b {
		if a[id] {
			t.Fatalf("generations 0 and %d share NPC id %#x", NPCGenerationOf(77), id)
		}
		if !IsNPC(id) {
			t.Fatalf("%#x is not an NPC id", id)
		}
	}
	seen := map[uint64]bool{}
	for e := range uint64(5000) {
		g := NPCGenerationOf(e)
		if g == 0 || g >= 1<<20 {
			t.Fatalf("NPCGenerationOf(%d) = %d, want 1 ≤ g < 2^20", e, g)
		}
		seen[g] = true
	}
	if len(seen) < 4980 { // 5,000 draws from 2^20: ≈ 12 repeats expected
		t.Fatalf("NPCGenerationOf: %d distinct of 5,000 epochs", len(seen))
	}
	for _, c := range []Config{
		{Zone: "x0z0", NPCGeneration: 1 << 20},
		{Zone: "x0z0", NPCs: 1 << 20},
	} {
		if _, err := New(c, 0); err == nil {
			t.Fatalf("New(%+v): no error", c)
		}
	}
}

// A restarted run's generation is valid, never its run's own, and spread
// over the restarts of one run and over the runs.
func TestNPCGenerationOfRestart(t *testing.T) {
	seen := map[uint64]bool{}
	for _, gen := range []uint64{0, 1, NPCGenerationOf(77), 1<<20 - 1} {
		for r := uint64(1); r <= 1000; r++ {
			g := NPCGenerationOfRestart(gen, r)
			if g == 0 || g >= 1<<20 || g == gen {
				t.Fatalf("NPCGenerationOfRestart(%d, %d) = %d, want 1 ≤ g < 2^20, not %d", gen, r, g, gen)
			}
			seen[g] = true
		}
	}
	if len(seen) < 3980 { // 4,000 draws from 2^20: ≈ 8 repeats expected
		t.Fatalf("NPCGenerationOfRestart: %d distinct of 4,000", len(seen))
	}
}
