package zone

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
func pausedResends(p PauseReason) bool { return p&PauseLease == 0 }

// pausedTimers runs a paused zone's handoff timers at the present time
// and arms the next run.
func (a *zoneActor) pausedTimers() {
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
