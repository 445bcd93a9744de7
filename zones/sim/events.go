package sim

import "github.com/ghostwire/ghostwire/zones/handoff"

// TakeEvent reports whether a player's ordered event (lane, per-player
// number seq, numbering gen; docs/protocol.md §7.20) is new and should be
// applied, and records it in the player's fence if so. An event the
// player's fence already covers — a client resending after a Redirect
// what the zone applied before, a connection resending after a restore —
// is not. The fence travels with the player (handoffs, checkpoints).
//
// Nor is an event of a player this zone does not own. One it has
// reserved (accepted its Offer) but does not own yet: the fence it would
// join comes with the Commit, so taken now it would be applied before the
// Commit and outside the fence the player carries on (applied again when
// its client resends it); its caller holds such events for the Commit and
// asks then (actors/zone holdEarly). One it has handed away: its caller
// passes the events on to the owner, whose fence takes them
// (actors/zone eventsAway). One it does not know: nobody's fence would
// cover it here; the client resends it on its next connection.
func (z *Zone) TakeEvent(entity, gen uint64, lane int, seq uint64) bool {
	s, ok := z.byID.get(entity)
	if !ok || (z.ents[s].role != roleOwned && z.ents[s].role != roleFrozen) || z.ents[s].kind != KindPlayer {
		return false // not owned here (unknown, or a replica)
	}
	p := z.pl(&z.ents[s])
	if !p.events.Take(gen, lane, seq) {
		return false
	}
	p.evNew = true // the next Control carries the fence (ControlInto)
	if z.ents[s].role == roleFrozen {
		z.hand.TookEvents(entity, p.events) // the Commit carries it
	}
	return true
}

// OwnsEvents reports whether the zone takes player entity's events: it
// owns the player (frozen by an open offer too). Those of a player it
// does not own are not applied here, whatever their class: numbered
// ordered ones TakeEvent refuses; the others, which no fence numbers,
// its caller drops when this is false (actors/zone handleEvents). It is
// false for a player the zone has reserved, handed away, forgotten or
// holds a replica of.
func (z *Zone) OwnsEvents(entity uint64) bool {
	s, ok := z.byID.get(entity)
	return ok && (z.ents[s].role == roleOwned || z.ents[s].role == roleFrozen) && z.ents[s].kind == KindPlayer
}

// EventFence is an owned player's ordered-event fence (false if the zone
// does not own it): its connection reports it to the client, which stops
// keeping those events for a resend.
func (z *Zone) EventFence(entity uint64) (handoff.EventFence, bool) {
	s, ok := z.byID.get(entity)
	if !ok {
		return handoff.EventFence{}, false
	}
	e := &z.ents[s]
	if (e.role != roleOwned && e.role != roleFrozen) || e.kind != KindPlayer {
		return handoff.EventFence{}, false
	}
	return e.p().events, true
}

// ControlEvents is EventFence for the player of c (from this tick's
// Output, before the next Step), found by its slot: no lookup by id.
func (z *Zone) ControlEvents(c *Control) (handoff.EventFence, bool) {
	if int(c.slot) >= len(z.ents) || z.ents[c.slot].id != c.Entity {
		return z.EventFence(c.Entity)
	}
	e := &z.ents[c.slot]
	if (e.role != roleOwned && e.role != roleFrozen) || e.kind != KindPlayer {
		return handoff.EventFence{}, false
	}
	return e.p().events, true
}
