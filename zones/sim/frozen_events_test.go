package sim

import "testing"

// An event the owner takes while its player is frozen by an open Offer
// (it still owns the player and applies its events) is in the fence the
// Commit carries: the Offer's snapshot was taken at Begin, before it, and
// a Commit carrying that one let the new owner apply the event again when
// the client resent it (the Control that would have told the client the
// event was applied may never have reached it).
func TestEventTakenWhileFrozenIsInTheCommitsFence(t *testing.T) {
	const gen = 0x9e9
	h, src, dst, offer := offerPlayerAcross(t, gen)
	if !src.TakeEvent(1, gen, 0, 2) { // frozen, still the owner's
		t.Fatal("x0z0 refused e2 while its offer of player 1 was open")
	}
	dst.Handoff(h.now, offer)
	src.Handoff(h.now, dst.Pending()[0]) // the Accept: the Commit goes
	commit := commitOf(t, src)
	if got := commit.State.Events.Last[0]; got != 2 {
		t.Errorf("the Commit's fence ends at e%d, want e2 (taken while frozen)", got)
	}
	if offer.State.Events.Last[0] != 1 {
		t.Errorf("the Offer's snapshot changed after it was sent: its fence ends at e%d, want e1", offer.State.Events.Last[0])
	}
	dst.Handoff(h.now, commit)
	if !dst.Handoffs().Owns(1) {
		t.Fatal("x1z0 does not own player 1 after the Commit")
	}
	if dst.TakeEvent(1, gen, 0, 2) {
		t.Error("x1z0 took e2 again, which x0z0 applied while the player was frozen: applied twice")
	}
	if !dst.TakeEvent(1, gen, 0, 3) {
		t.Error("x1z0 refused e3")
	}
}
