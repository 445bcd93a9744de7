package sim

import (
	"errors"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/ghost"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/zones/world"
)

// A player's entity id is its id as given to Join (the token's PlayerID);
// ids in the NPC range are refused, so the two can never collide.
func TestPlayerIDsNeverCollideWithNPCs(t *testing.T) {
	z := oneZone(t, func(c *Config) { c.NPCs = 3 })
	var npcs []uint64
	z.Entities(func(e EntityInfo) {
		if e.Kind != KindNPC || !IsNPC(e.ID) {
			t.Fatalf("NPC %+v outside the NPC id range", e)
		}
		npcs = append(npcs, e.ID)
	})
	for _, id := range append(npcs, 1<<63, 1<<64-1) {
		if err := z.Join(0, id, "c", "p", [3]float32{-500, 0, -500}, 0); !errors.Is(err, ErrBadID) {
			t.Fatalf("join as %#x: %v, want ErrBadID", id, err)
		}
	}
	const botID = 0x4757_0000_0000 + 3<<20 | 7 // as cmd/botswarm mints them
	for _, id := range []uint64{botID, 1<<63 - 1} {
		if err := z.Join(0, id, "c", "p", [3]float32{-500, 0, -500}, 0); err != nil {
			t.Fatalf("join as %#x: %v", id, err)
		}
	}
	z.Join(0, 9, "c9", "obs", [3]float32{-490, 0, -500}, 0)
	out := z.Step(50 * time.Millisecond)
	for _, v := range out.Views {
		if v.Entity != 9 {
			continue
		}
		seen := map[uint64]bool{}
		for _, e := range z.AppendView(nil, v) {
			seen[e.Entity] = true
		}
		if !seen[botID] || !seen[1<<63-1] {
			t.Fatalf("observer's view %v lacks the players by their join ids", seen)
		}
		return
	}
	t.Fatal("no view for the observer")
}

func seqOf(s ghost.State) uint64 { return uint64(s.Extra[0]) | uint64(s.Extra[1])<<32 }

// Every copy of a player's replicated state names the move it reflects:
// Extra[0..1] = the last applied move seq at the state's tick, high bits
// included, in the owner's views and in a neighbour's (through a replica).
func TestSeqExtraNamesTheAppliedMove(t *testing.T) {
	w, _ := world.Grid("pair", 2, 1, 1000, [2]float64{-1000, -500})
	za, err := New(Config{Zone: "x0z0", World: w}, 0)
	if err != nil {
		t.Fatal(err)
	}
	zb, _ := New(Config{Zone: "x1z0", World: w}, 0)
	const base = 1<<32 + 100 // a resumed connection past 2^32 moves
	za.Join(0, 1, "c1", "walker", [3]float32{-30, 0, 0}, base)
	za.Join(0, 2, "c2", "near", [3]float32{-40, 0, 0}, 0)
	zb.Join(0, 3, "c3", "across", [3]float32{30, 0, 0}, 0)
	seq := uint64(base)
	var lastA Control
	var lastBatch *ReplicaBatch
	for tick := 1; tick <= 20; tick++ {
		now := time.Duration(tick) * 50 * time.Millisecond
		n := tick % 3 // 0–2 moves per tick: the seq does not follow the tick
		var ms []move.Move
		for range n {
			seq++
			ms = append(ms, move.Move{Seq: seq, Dt: 16, Forward: 127, Yaw: 16384})
		}
		za.Input(now, 1, ms)
		oa := za.Step(now)
		for _, c := range oa.Controls() {
			if c.Entity == 1 {
				lastA = c
			}
		}
		if lastA.LastApplied != seq {
			t.Fatalf("tick %d: applied %d, sent %d", tick, lastA.LastApplied, seq)
		}
		for _, v := range oa.Views {
			if v.Entity != 2 {
				continue
			}
			for _, e := range za.AppendView(nil, v) {
				if e.Entity == 1 && (seqOf(e.State) != lastA.LastApplied || float32(e.State.Pos[0]) != lastA.State.Pos[0]) {
					t.Fatalf("tick %d: owner's view: seq %d at x %g, control: seq %d at x %g",
						tick, seqOf(e.State), e.State.Pos[0], lastA.LastApplied, lastA.State.Pos[0])
				}
			}
		}
		// The neighbour's view this tick shows the replica from the
		// previous tick's batch: its seq must match that batch's state.
		if lastBatch != nil {
			zb.Replicas(now, lastBatch)
		}
		ob := zb.Step(now)
		for _, v := range ob.Views {
			for _, e := range zb.AppendView(nil, v) {
				if e.Entity != 1 {
					continue
				}
				var want Replica
				for _, r := range lastBatch.Entities {
					if r.ID == 1 {
						want = r
					}
				}
				if seqOf(e.State) != uint64(want.Extra[0])|uint64(want.Extra[1])<<32 || e.State.Pos[0] != float64(want.State.Pos[0]) || seqOf(e.State) < base {
					t.Fatalf("tick %d: neighbour's view: seq %d at x %g, batch: %+v", tick, seqOf(e.State), e.State.Pos[0], want)
				}
			}
		}
		for i := range oa.Replicas {
			if oa.Replicas[i].To == "x1z0" {
				lastBatch = &oa.Replicas[i]
			}
		}
		// The batch's entry for the walker is this tick's control state.
		for _, r := range lastBatch.Entities {
			if r.ID == 1 && (uint64(r.Extra[0])|uint64(r.Extra[1])<<32 != lastA.LastApplied || r.State != lastA.State) {
				t.Fatalf("tick %d: replica %+v, control %+v", tick, r, lastA)
			}
		}
	}
	if zb.Stats().Replicas == 0 {
		t.Fatal("the neighbour never held a replica: test geometry")
	}
}

// NoSeqExtra leaves Extra to the game: nothing is written into it.
func TestNoSeqExtra(t *testing.T) {
	z := oneZone(t, func(c *Config) { c.NoSeqExtra = true; c.NPCs = 0 })
	z.Join(0, 1, "c1", "a", [3]float32{-500, 0, -500}, 7)
	z.Join(0, 2, "c2", "b", [3]float32{-490, 0, -500}, 0)
	z.Input(0, 1, []move.Move{fwd(8, 0)})
	out := z.Step(50 * time.Millisecond)
	for _, v := range out.Views {
		for _, e := range z.AppendView(nil, v) {
			if e.State.Extra != [4]uint32{} {
				t.Fatalf("entity %d: Extra %v with NoSeqExtra", e.Entity, e.State.Extra)
			}
		}
	}
}

// Correct asks for a forced control-state send for owned players only.
func TestCorrect(t *testing.T) {
	z := oneZone(t, func(c *Config) { c.NPCs = 0 })
	z.Join(0, 1, "c1", "a", [3]float32{-500, 0, -500}, 0)
	z.Step(50 * time.Millisecond) // the spawn correction
	if c := z.Step(100 * time.Millisecond).Controls()[0]; c.Correct {
		t.Fatal("correction without cause")
	}
	if err := z.Correct(1); err != nil {
		t.Fatal(err)
	}
	if c := z.Step(150 * time.Millisecond).Controls()[0]; !c.Correct {
		t.Fatal("Correct did not force the next control")
	}
	if c := z.Step(200 * time.Millisecond).Controls()[0]; c.Correct {
		t.Fatal("correction repeated")
	}
	if err := z.Correct(99); !errors.Is(err, ErrNotHere) {
		t.Fatalf("Correct of an unknown entity: %v", err)
	}
}
