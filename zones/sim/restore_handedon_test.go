package sim

import (
	"errors"
	"testing"

	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/zones/handoff"
	"github.com/ghostwire/ghostwire/zones/world"
)

// A player's record read before its handoff's new owner wrote it names
// the zone the player left, at the epoch it left at (a connection whose
// zone stayed silent through a slow cross-process Commit looks its record
// up and joins there again). That zone refuses to put the player back
// from it: the player lives on at its new owner. Put back above the new
// owner's epoch, as it was, it had two owners, the moves its connection
// resent were applied again, and the connection — following the higher
// epoch — dropped the true owner's controls for good
// (TestClusterThreeNodesAcrossBorders under load, 2026-11-29).
func TestRestoreRefusedWhereThePlayerWasHandedOn(t *testing.T) {
	h := newHarness(t, world.Default(), 0, nil)
	still := func(p *player, tick int) (int8, uint16) { return 0, 0 }
	p := h.join(1, -5, -300, still) // in x0z0, 5 m from x1z0
	h.tick(2)
	src, dst := h.zones["x0z0"], h.zones["x1z0"]
	stale, ok := src.CheckpointOf(1) // what the record holds: x0z0 at epoch 1
	if !ok || stale.Epoch != 1 {
		t.Fatalf("checkpoint %+v, %v", stale, ok)
	}
	if err := src.Teleport(h.now, 1, [3]float32{20, 0, -300}); err != nil { // into x1z0
		t.Fatal(err)
	}
	h.queue = append(h.queue, src.Pending()...)
	h.deliver() // offer, accept, commit, commit ack
	if ph, ep, peer := src.Handoffs().Status(1); ph != handoff.PhaseForwarding || ep != 2 || peer != "x1z0" {
		t.Fatalf("x0z0 after the handoff: %v at epoch %d to %q, want forwarding at 2 to x1z0", ph, ep, peer)
	}
	h.tick(1)
	applied := h.stats().MovesApplied

	err := src.Restore(h.now, stale, p.conn, stale.LastApplied)
	if !errors.Is(err, ErrExists) || !errors.Is(err, handoff.ErrHandedOn) {
		t.Fatalf("restore from a checkpoint older than the handoff: %v, want ErrExists (handoff.ErrHandedOn)", err)
	}
	if e, ok := src.Entity(1); ok && e.Owned {
		t.Fatalf("x0z0 owns player 1 again: %+v", e)
	}
	// The rejoin's resent moves go to the old zone: forwarded, and
	// applied once, by the new owner.
	p.sent++
	src.Input(h.now, 1, []move.Move{{Seq: p.sent, Dt: 48}})
	h.queue = append(h.queue, src.Pending()...)
	h.deliver()
	h.tick(3)
	h.checkOwnership()
	if e, ok := dst.Entity(1); !ok || !e.Owned {
		t.Fatalf("x1z0 no longer owns player 1: %+v", e)
	}
	if n := h.stats().MovesApplied - applied; n != 4 {
		t.Fatalf("%d moves applied (one resent through x0z0, 3 ticks), want 4", n)
	}
	if p.route.Zone != "x1z0" || p.route.Epoch != 2 {
		t.Fatalf("route %+v, want x1z0 at epoch 2", p.route)
	}
}
