package zone

import (
	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/zones/handoff"
)

// A paused zone's handoffs.
//
// A pause stops the simulation (Step): no entity moves, no move is
// applied, no handoff begins, no tick is counted. The handoffs already in
// flight are not the simulation's, though: their messages keep coming
// while the zone is paused (onHandoff), and their timers — the handoff
// machine's resends and give-ups, and this actor's waits on them
// (awaiting, pendingLeave, unacked) — ran only inside the tick. A lost
// Offer, Accept or Commit was then neither resent nor given up on for as
// long as the pause lasted, and whatever waited for the handoffs to
// settle waited with them: a census (tests, World.Pause) its whole bound,
// a drain's freeze until the zone was stopped under them.
//
// So while paused the zone's tick timer goes on, one period at a time,
// and each firing runs the handoff timers alone (pausedTimers), as far as
// the zone's owners allow:
//
//   - PauseManual (a census, an admin view) and PauseHandover (a drain's
//     freeze before the zone is handed to another node) want the
//     handoffs to settle: everything runs — an unanswered Offer or Commit
//     is resent, an Offer aborted at its timeout, a Commit given up on,
//     records expire — and so do the actor's waits (a client that did
//     not come back after a Redirect leaves, a Leave or Join kept during
//     a handoff that has settled is taken or passed on, a player whose
//     Commit was never acknowledged is ended). None of it is the
//     simulation's: each would have happened at the next tick as well.
//   - PauseLease (the node's hold while its lease's renewal is overdue:
//     the node may be losing the zone, and another node may own it by
//     now) allows only what claims nothing: an Offer past its timeout is
//     aborted (its Abort only withdraws the offer; the entity is owned
//     here again, frozen no more, and still does not move), a Commit past
//     its give-up is stranded, records expire (handoff.Machine.Expire).
//     No Offer or Commit is resent: a copy sent now would claim an
//     ownership the zone may no longer have (the first one was sent while
//     the lease was good). The actor's waits wait for the let-go too:
//     each would take a player out or in (a Leave, a Join, a last
//     checkpoint written) as the zone's owner.
//
// A zone held by several owners gets the narrowest of what they allow
// (the lease's, if it is one of them). The timer is the tick's own: one
// at a time, re-armed by each firing only while the zone is paused, and
// replaced by the tick's when the last owner lets go (setPaused, arm).

// pausedResends reports whether a zone paused by p may resend its
// handoffs' messages and run the actor's waits on them (see above).
func pausedResends(p PauseReason) bool { return p&pausesClaims == 0 }

// pausesClaims are the pauses under which the zone claims nothing: the
// node's hold and the zone's own fence (below).
const pausesClaims = PauseLease | pauseFence

// pausedTimers runs a paused zone's handoff timers at the present time
// and arms the next run.
func (a *zoneActor) pausedTimers() {
	if a.paused&pauseFence != 0 && a.acting() {
		a.setPaused(&Pause{Paused: false, By: pauseFence})
		if a.paused == 0 {
			return // ticking again: setPaused armed the tick
		}
	}
	all := pausedResends(a.paused)
	a.z.HandoffTimers(a.p.Now(), all)
	a.flushPending()
	if all {
		a.settleHandoffWaits()
	}
	// An aborted Offer's held inputs go back to where the player is, and
	// those whose Join did not come in time are dropped: forwarding claims
	// nothing, so this runs under every owner's pause.
	if len(a.incoming) > 0 {
		a.sweepEarly()
	}
	a.armPaused()
}

// armPaused sets the zone's timer for the next run of pausedTimers, a
// tick period on (the handoff timers' resolution in a running zone).
func (a *zoneActor) armPaused() {
	if a.timer == nil || a.stopped.Load() {
		return
	}
	a.late.Store(false)
	a.timer.Reset(a.z.Period())
}

// settleHandoffWaits runs the actor's waits on handoffs, each tick and
// while paused (pausedTimers): a client that did not come back after a
// Redirect within its grace leaves, what was kept for a player during a
// handoff is settled once the handoff has (retryLeave), and a Commit
// never acknowledged ends its player once the machine forgets it
// (settleUnacked).
func (a *zoneActor) settleHandoffWaits() {
	if a.p.holdWaits != nil && a.p.holdWaits(a.p.Sim.Zone) {
		return
	}
	for id, until := range a.awaiting {
		if a.p.Now() >= until { // the client did not come back: leave as usual
			delete(a.awaiting, id)
			a.leave(id, nil)
		}
	}
	for id, k := range a.pendingLeave {
		a.retryLeave(id, k)
	}
	for id, u := range a.unacked {
		a.settleUnacked(id, u)
	}
}

// A lease's hold and the handoff messages that come during it.
//
// The hold (PauseLease) stops the ticks so that a zone whose node may be
// losing it acknowledges nothing a new owner would not have. Its timers
// already claim nothing (above); its handoff messages used to be handled
// as they came (onHandoff), so a held zone still committed and released
// a player on an Accept and took one on a Commit (the player's record
// written with it). Now, per kind, while the hold lasts:
//
//   - Offer (a neighbour asks this zone to take a player): dropped. Its
//     answer is the claim: an Accept reserves the player here, promising
//     the zone will take it. The sender resends every RetryInterval and
//     aborts at OfferTimeout (500 ms; a hold lasts longer), resuming the
//     player where it is: nothing is lost, and a copy resent after the
//     let-go is answered then. A kept Offer would be answered at the
//     let-go for an offer its sender has most likely withdrawn.
//   - Accept (the neighbour this zone offered a player to takes it):
//     kept, handled at the let-go. Handling it commits the player to the
//     neighbour and releases it here: an ownership handed on that the
//     node may no longer have. Its sender does not resend it on its own
//     (only in answer to an Offer, which a held zone does not resend), so
//     it is kept rather than dropped: at the let-go it commits the offer
//     still open, or, if the offer has been aborted meanwhile (Expire, at
//     OfferTimeout), the machine answers the late Accept with an Abort.
//   - Commit (a neighbour hands this zone a player): kept, handled at the
//     let-go. Handling it takes the player, writes its record (Placed)
//     and acknowledges it (CommitAck): all claims. The sender resends it
//     every RetryInterval until CommitGiveUp; only the newest copy of each
//     is kept (the youngest, for MaxAge at the let-go) and a late one
//     taken at the let-go still ends a give-up (handoff.Machine.Step's
//     stranded CommitAck).
//   - Abort, Reject, CommitAck, Forward: handled at once. An Abort only
//     withdraws a reservation and is not answered; a Reject and a
//     CommitAck end this zone's own offer or Commit, made while the lease
//     was good (the player owned here again, or forgotten); a Forward's
//     moves are inputs, queued as the connections' are and applied after
//     the let-go (passed on if the player has gone on). None claims what
//     the zone did not have before the hold.
//
// A zone that loses its lease is stopped and what it kept goes with it:
// the senders resend to the zone's new owner. The kept messages are
// bounded (maxLeaseKept; copies of one message replace each other); past
// the bound one is dropped, as an Offer is (its sender's resend or, for
// an Accept, the zone's own Offer resent after the let-go brings it
// back). The other owners' pauses (a census, a drain's freeze) keep
// nothing: they let handoffs settle.

// maxLeaseKept bounds the handoff messages a held zone keeps.
const maxLeaseKept = 1024

// keepDuringHold reports whether env is kept or dropped for the let-go of
// a lease's hold (see above); false: handle it now.
func (a *zoneActor) keepDuringHold(env *HandoffEnvelope) bool {
	if a.paused&pausesClaims == 0 {
		return false
	}
	switch env.Msg.Kind {
	case handoff.KindOffer:
		return true
	case handoff.KindAccept, handoff.KindCommit:
	default:
		return false
	}
	m := &env.Msg
	for i, k := range a.leaseKept {
		if k.Msg.Kind == m.Kind && k.Msg.Entity == m.Entity && k.Msg.Epoch == m.Epoch && k.Msg.From == m.From {
			if m.Sent >= k.Msg.Sent {
				a.leaseKept[i] = env // a newer copy of the same message
			}
			return true
		}
	}
	if len(a.leaseKept) >= maxLeaseKept {
		return true
	}
	a.leaseKept = append(a.leaseKept, env)
	return true
}

// letGo handles the handoff messages kept during a lease's hold, in the
// order they came, once the hold is off (setPaused).
func (a *zoneActor) letGo() {
	kept := a.leaseKept
	a.leaseKept = nil
	for _, env := range kept {
		a.onHandoff(env)
	}
}

// A frozen or held zone's events.
//
// A drain freezes the zone (PauseHandover) and then takes every player's
// checkpoint, which the next owner restores. The freeze stops the moves
// (they wait in the zone's queues), but an event used to be applied as it
// came: one applied after the checkpoint was applied twice — its effect
// (an echo sent) is not in the checkpoint's fence, and the client, never
// told it was applied (no tick, no Control), sends it again to the next
// owner, which takes it (TestZonedDrainedMidRunRedirectsTheBots: an echo
// came back twice).
//
// A lease's hold (PauseLease: the renewal is overdue, the zone may be
// another node's by now) is the same case: no tick reports an event
// applied, no checkpoint can be written (the fence closed first), and a
// hold ends with the zone lost as often as not. Events applied as they
// came were applied twice whenever it was lost — 70 to 76 echoes of 1,199
// came back twice with the node that embeds NATS paused 17 s, every zone
// held for its 6 s and then lost. So the inputs that bring events while
// the zone is frozen or held keep them, in order, and:
//   - when the zone stops (handed over, or lost), they are dropped: the
//     client sends the numbered ones again to the next owner, whose fence
//     is the checkpoint's, so each is applied once. The others are lost,
//     as their classes allow at a switch of owner (§7.20 numbers only
//     ordered events);
//   - when the freeze or the hold ends with the zone still here (no
//     handover; the lease renewed), they are applied before anything
//     newer (their moves went to the zone's queues when they came, as
//     every paused input's do).
//
// A census (PauseManual) hands nothing over: under it an event is applied
// as it comes.
//
// maxPausedEvents bounds the inputs kept: a freeze lasts a few NATS round
// trips, a hold at most 2 × TTL; beyond the bound an input's events are
// dropped and counted (Metrics.EventsPausedDropped), the numbered ones to
// be resent to the next owner.
const maxPausedEvents = 8192

// pausesEvents are the pauses under which the zone keeps its events.
const pausesEvents = PauseHandover | pausesClaims

// The zone's own fence.
//
// The node's hold (PauseLease) comes from its lease's renewal loop, as a
// message behind whatever the zone has queued. A node paused past its
// lease (SIGSTOP, a VM frozen) wakes with its timers all due at once: the
// zone's tick and its inputs' events can run before the renewal loop has
// noticed the lease overdue, let alone before its hold reaches the zone —
// moves applied and events echoed by a zone another node may own by now.
// So the zone asks Params.Acting itself before each tick, before applying
// events and before a handoff message that claims; while it says no, the
// zone is paused by pauseFence, which is the hold's pause in all it allows
// and keeps, and which the zone takes off itself once Acting says yes
// again (at its paused timer's next run, or at the hold's let-go). A zone
// whose lease is lost meanwhile is stopped with what it kept, as a held
// one is.

// acting reports whether the zone's node may still run it (Params.Acting).
func (a *zoneActor) acting() bool { return a.p.Acting == nil || a.p.Acting(a.p.Sim.Zone) }

// fenceLapsed pauses the zone by its own fence when its node may no longer
// run it, and reports whether the zone is fenced.
func (a *zoneActor) fenceLapsed() bool {
	if a.paused&pauseFence != 0 {
		return true
	}
	if a.acting() {
		return false
	}
	a.m.Fenced.Add(1)
	a.log.Warn("zone fenced: its node may no longer run it (lease overdue); nothing applied until the lease is good again", "zone", a.p.Sim.Zone)
	a.setPaused(&Pause{Paused: true, By: pauseFence})
	return true
}

// claims reports whether a handoff message of kind k is one that a held
// zone keeps or drops rather than handles (keepDuringHold).
func claims(k handoff.Kind) bool {
	return k == handoff.KindOffer || k == handoff.KindAccept || k == handoff.KindCommit
}

// pauseEvents keeps in, whose moves went to the zone's queues, for its
// events: the zone is frozen for a handover or held for its lease.
func (a *zoneActor) pauseEvents(in *msg.Input) {
	if len(a.pausedEvents) >= maxPausedEvents {
		a.m.EventsPausedDropped.Add(uint64(len(in.Events)))
		in.Release()
		return
	}
	in.Moves, in.LostBefore = in.Moves[:0], 0
	a.pausedEvents = append(a.pausedEvents, in)
}

// applyPausedEvents applies the events kept while the zone was frozen, in
// the order they came, as apply would have: a player handed away
// meanwhile (a handoff in flight when the freeze began) has them passed
// on to its owner.
func (a *zoneActor) applyPausedEvents() {
	if len(a.pausedEvents) == 0 {
		return
	}
	for i, in := range a.pausedEvents {
		a.pausedEvents[i] = nil
		if !a.z.OwnsEvents(in.Player) && a.eventsAway(in) {
			continue
		}
		if a.keepUnconfirmed(in) {
			continue // restore_hold.go
		}
		a.handleEvents(in)
		in.Release()
	}
	a.pausedEvents = a.pausedEvents[:0]
	a.flushOutputs()
	a.flushPending()
}

// dropPausedEvents releases the inputs kept while frozen: the zone stops
// (handed over, or its node stopping).
func (a *zoneActor) dropPausedEvents() {
	for i, in := range a.pausedEvents {
		a.m.EventsPausedDropped.Add(uint64(len(in.Events)))
		a.pausedEvents[i] = nil
		in.Release()
	}
	a.pausedEvents = nil
}
