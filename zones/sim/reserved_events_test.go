package sim

import (
	"testing"

	"github.com/ghostwire/ghostwire/zones/handoff"
	"github.com/ghostwire/ghostwire/zones/world"
)

// An ordered event of a player the zone has reserved (its Offer accepted,
// the Commit not here yet) is not taken: the fence it would join comes
// with the Commit. Taken before, it was applied outside the fence the
// player carried on, and the same event, resent by its client after the
// Commit, was taken — applied — a second time. Taken after the Commit,
// once, it joins the fence the player carries on.
func TestEventOfAReservedPlayerWaitsForTheCommit(t *testing.T) {
	const gen = 0x9e9
	h, src, dst, offer := offerPlayerAcross(t, gen)
	dst.Handoff(h.now, offer) // the Offer: accepted, a reservation
	if _, ok := dst.Handoffs().Reserved(1); !ok {
		t.Fatal("x1z0 did not reserve player 1")
	}
	if dst.TakeEvent(1, gen, 0, 2) {
		t.Error("x1z0 took e2 of player 1, reserved there and not owned: applied before the Commit, outside the fence")
	}
	src.Handoff(h.now, dst.Pending()[0]) // the Accept: the Commit goes
	dst.Handoff(h.now, commitOf(t, src))
	if !dst.Handoffs().Owns(1) {
		t.Fatal("x1z0 does not own player 1 after the Commit")
	}
	if dst.TakeEvent(1, gen, 0, 1) {
		t.Error("x1z0 took e1 again: the fence the Commit carries covers it")
	}
	if !dst.TakeEvent(1, gen, 0, 2) {
		t.Error("x1z0 refused e2 after the Commit")
	}
	if dst.TakeEvent(1, gen, 0, 2) {
		t.Error("x1z0 took e2 twice")
	}
	if f, ok := dst.EventFence(1); !ok || f.Gen != gen || f.Last[0] != 2 {
		t.Errorf("x1z0's fence of player 1 %+v (owned %v) does not cover e2", f, ok)
	}
	// A player handed away is not taken either: its owner's fence takes
	// its events (actors/zone passes them on), nor one never here.
	if src.TakeEvent(1, gen, 0, 3) || src.OwnsEvents(1) {
		t.Error("x0z0, which handed player 1 on, took its event: applied outside the owner's fence")
	}
	if !dst.OwnsEvents(1) {
		t.Error("x1z0, the owner, does not take player 1's events")
	}
	if dst.TakeEvent(2, gen, 0, 1) || dst.OwnsEvents(2) {
		t.Error("x1z0 took an event of player 2, never here")
	}
}

// offerPlayerAcross joins player 1 to x0z0, 5 m from x1z0, has x0z0 take
// its first ordered event (e1 of numbering gen) and teleports it into
// x1z0, and returns x0z0's Offer of it, not yet delivered.
func offerPlayerAcross(t *testing.T, gen uint64) (h *harness, src, dst *Zone, offer handoff.Msg) {
	t.Helper()
	h = newHarness(t, world.Default(), 0, nil)
	still := func(p *player, tick int) (int8, uint16) { return 0, 0 }
	h.join(1, -5, -300, still)
	h.tick(2)
	src, dst = h.zones["x0z0"], h.zones["x1z0"]
	if !src.TakeEvent(1, gen, 0, 1) {
		t.Fatal("x0z0, the owner, refused the player's first event")
	}
	if err := src.Teleport(h.now, 1, [3]float32{20, 0, -300}); err != nil {
		t.Fatal(err)
	}
	offer = src.Pending()[0]
	if offer.Kind != handoff.KindOffer {
		t.Fatalf("x0z0 sent %v, want an Offer", offer.Kind)
	}
	return h, src, dst, offer
}

// commitOf is the Commit among src's pending messages (after an Accept).
func commitOf(t *testing.T, src *Zone) handoff.Msg {
	t.Helper()
	for _, m := range src.Pending() {
		if m.Kind == handoff.KindCommit {
			return m
		}
	}
	t.Fatal("x0z0 sent no Commit")
	return handoff.Msg{}
}
