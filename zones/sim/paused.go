package sim

import "time"

// HandoffTimers runs the handoff machine's timers at now outside Step,
// for a zone whose ticks are paused (a census, a drain's freeze, a
// lease's hold: actors/zone): nothing else of a tick runs — no entity
// moves, no move is applied, no NPC steps, no handoff begins, no view or
// replica is made and the tick count stays. With resend an unanswered
// Offer or Commit is sent again every RetryInterval as in a tick
// (handoff.Machine.Tick); without, only what ends a handoff runs: an
// offer past its timeout is aborted (its entity owned here again, its
// buffered moves queued for the next tick), a Commit past its give-up
// is stranded, and forwarding records, reservations and stashed moves
// expire (handoff.Machine.Expire). Messages go out with Pending.
//
// Without it a paused zone's handoffs stood still: a lost Offer, Accept
// or Commit was neither resent nor given up on until the ticks came back,
// and a census that waited for the zones to have no handoff in flight
// waited its whole bound.
func (z *Zone) HandoffTimers(now time.Duration, resend bool) {
	if resend {
		z.hand.Tick(now, &z.hout)
	} else {
		z.hand.Expire(now, &z.hout)
	}
	z.applyHandoff(now)
}
