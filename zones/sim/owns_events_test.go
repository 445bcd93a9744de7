package sim

import (
	"testing"

	"github.com/ghostwire/ghostwire/zones/handoff"
)

// OwnsEvents is what keeps the events no fence numbers (unguaranteed,
// unordered, staggered, unnumbered ordered) from a zone's game when the
// zone does not own their player (actors/zone handleEvents): it must be
// true while the zone owns the player, frozen by its open offer too, and
// false wherever the player is not the zone's — a replica of a
// neighbour's player, reserved by an accepted Offer, handed away, and
// forgotten once the forwarding record expired.
func TestOwnsEventsOnlyWhereThePlayerIsOwned(t *testing.T) {
	h, src, dst, offer := offerPlayerAcross(t, 0x0e5)
	owns := func(z *Zone, want bool, state string) {
		t.Helper()
		if got := z.OwnsEvents(1); got != want {
			t.Errorf("%s, player 1 %s: OwnsEvents %v, want %v", z.ID(), state, got, want)
		}
	}
	if e, ok := dst.Entity(1); !ok || !e.Replica {
		t.Fatalf("x1z0 holds no replica of player 1, 5 m from its border: %+v", e)
	}
	owns(src, true, "frozen by x0z0's open offer")
	owns(dst, false, "a replica")
	dst.Handoff(h.now, offer)
	if _, ok := dst.Handoffs().Reserved(1); !ok {
		t.Fatal("x1z0 did not reserve player 1")
	}
	owns(dst, false, "reserved, not committed")
	src.Handoff(h.now, dst.Pending()[0]) // the Accept: the Commit goes
	dst.Handoff(h.now, commitOf(t, src))
	owns(dst, true, "committed")
	if ph, _, _ := src.Handoffs().Status(1); ph != handoff.PhaseCommitting && ph != handoff.PhaseForwarding {
		t.Fatalf("player 1 is %s in x0z0, want handed away", ph)
	}
	owns(src, false, "handed away")
	for _, m := range dst.Pending() { // the Commit's Ack
		if m.To == src.ID() {
			src.Handoff(h.now, m)
		}
	}
	cfg := handoff.DefaultConfig()
	h.now += cfg.CommitGiveUp + cfg.ForwardTTL + h.period
	src.Step(h.now)
	if ph, _, _ := src.Handoffs().Status(1); ph != handoff.PhaseUnknown {
		t.Fatalf("player 1 is %s in x0z0 after ForwardTTL, want forgotten", ph)
	}
	owns(src, false, "forgotten")
}
