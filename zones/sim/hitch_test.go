package sim

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/zones/handoff"

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

// A player frozen by a handoff that takes several ticks (across processes
// it does) keeps the interest set its snapshot took to the new owner: a
// player walking into view meanwhile is not added here, or the new owner's
// first view, seeded from the snapshot, would kill that ghost and a later
// one re-create it under a new ghost id.
func TestFrozenPlayerKeepsItsSnapshotInterest(t *testing.T) {
	// The offer is never answered; it must not time out (and unfreeze the
	// player) before player 2 is in range.
	h := newHarness(t, world.Default(), 0, func(c *Config) { c.Handoff.OfferTimeout = 10 * time.Second })
	still := func(p *player, tick int) (int8, uint16) { return 0, 0 }
	h.join(1, -20, -20, still)
	h.join(2, -20, -125, func(p *player, tick int) (int8, uint16) { return 127, 0 }) // walks +z towards player 1
	h.tick(1)
	src := h.zones["x0z0"]
	if err := src.Teleport(h.now, 1, [3]float32{20, 0, -20}); err != nil { // into x1z0: offered, frozen
		t.Fatal(err)
	}
	offer := src.Pending() // held back: the handoff does not settle
	if len(offer) == 0 {
		t.Fatal("no offer")
	}
	var snap []uint64
	if offer[0].State != nil {
		snap = offer[0].State.Interest
	}
	for range 60 { // 3 s, frozen throughout: player 2, 112 m from where player 1 is frozen, walks within 100 m
		h.now += h.period
		out := src.Step(h.now)
		if ph, _, _ := src.Handoffs().Status(1); ph != handoff.PhaseOffering {
			t.Fatalf("player 1 is %v, want still offering", ph)
		}
		for _, v := range out.Views {
			if v.Entity != 1 {
				continue
			}
			for _, e := range src.AppendView(nil, v) {
				if !slices.Contains(snap, e.Entity) {
					t.Fatalf("frozen player's view gained entity %d, not in the snapshot %v", e.Entity, snap)
				}
			}
		}
		// Keep player 2 walking (its moves go to x0z0 directly).
		p2 := h.players[2]
		p2.sent++
		src.Input(h.now, 2, []move.Move{{Seq: p2.sent, Dt: 48, Forward: 127}})
	}
	if e, _ := src.Entity(2); math.Hypot(float64(e.State.Pos[0]-20), float64(e.State.Pos[2]+20)) > 95 {
		t.Fatalf("player 2 at %v never came within 100 m: the test proves nothing", e.State.Pos)
	}
}

// The target of a handoff keeps its replica of the entity while it waits
// for the Commit, even when the old owner's next batch (no longer listing
// it) comes first — across processes it can. Dropping it there took it out
// of every view in the target zone until the Commit made it owned again:
// a kill and a re-create for everyone watching.
func TestTargetKeepsReplicaUntilCommit(t *testing.T) {
	h := newHarness(t, world.Default(), 0, nil)
	still := func(p *player, tick int) (int8, uint16) { return 0, 0 }
	h.join(1, -5, -300, still) // in x0z0, 5 m from x1z0
	h.join(2, 30, -300, still) // in x1z0, watching it
	h.tick(2)
	src, dst := h.zones["x0z0"], h.zones["x1z0"]
	if e, ok := dst.Entity(1); !ok || !e.Replica {
		t.Fatalf("x1z0 has no replica of player 1: %+v", e)
	}
	if err := src.Teleport(h.now, 1, [3]float32{20, 0, -300}); err != nil { // into x1z0
		t.Fatal(err)
	}
	offer := src.Pending()
	dst.Handoff(h.now, offer[0]) // accepted: a reservation
	accept := dst.Pending()
	src.Handoff(h.now, accept[0]) // released at the source; its Commit is held back
	commit := src.Pending()
	h.now += h.period
	out := src.Step(h.now) // the source's batch, without player 1
	for i := range out.Replicas {
		if out.Replicas[i].To == "x1z0" {
			dst.Replicas(h.now, &out.Replicas[i])
		}
	}
	if e, ok := dst.Entity(1); !ok || !e.Replica {
		t.Fatalf("x1z0 dropped its replica of player 1 before the Commit: %+v, %v", e, ok)
	}
	for _, m := range commit {
		if m.Kind == handoff.KindCommit {
			dst.Handoff(h.now, m)
		}
	}
	if e, ok := dst.Entity(1); !ok || !e.Owned {
		t.Fatalf("player 1 not owned by x1z0 after the Commit: %+v", e)
	}
	if st := dst.Stats(); st.ReplicasHeldDropped != 0 {
		t.Fatalf("replicas dropped: %+v", st)
	}
}
