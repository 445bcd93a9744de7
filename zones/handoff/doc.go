// Package handoff moves the ownership of an entity from one zone to another
// in two phases with a fencing epoch, so that an entity always has at most
// one owner, and a player's moves are neither lost nor applied twice while
// it crosses (checklist PART-2; DESIGN §5).
//
// Each zone has a Machine. It is pure: it takes messages and the time and
// returns messages to send and what the zone must do (take an entity, let
// one go, resume one); no goroutines, no clock, no transport. The zone
// actor delivers its messages in process, the cluster bridge over NATS; the
// wire forms are in proto/.
//
// # Protocol
//
//	source S (owner, epoch e)                 target T
//	Begin ── Offer{e, snapshot} ─────────────▶ admit? pending(e)
//	  frozen: moves buffered   ◀── Accept{e} ── (or Reject{e, reason} → S resumes)
//	Commit{e, snapshot, buffered moves} ─────▶ owner at e+1: Acquired
//	  S no longer owns: Released  ◀─ CommitAck ─ Route{e+1} ──▶ connection
//	moves still reaching S ── Forward{e+1} ──▶ applied by T (deduplicated by sequence)
//
// The source freezes the entity when it offers: it stops simulating it and
// buffers its moves, so the snapshot in the offer is exactly the state
// after move LastApplied and every later move is applied by whichever zone
// ends up owning it. Accept and Reject only answer the offer; ownership
// moves with Commit alone. The source stops owning when it sends Commit,
// the target starts when it receives it, so there is never a moment with
// two owners (there is one with none, while Commit is in flight). Commit
// carries the snapshot again, so a target that lost its pending record
// still takes the entity, and the source resends Commit until CommitAck.
//
// After Commit the source keeps a forwarding record for ForwardTTL: moves
// the connection sent before it learned the new route are forwarded to the
// new owner, in order. The target tells the connection to switch routes
// with Route{epoch}; a connection applies a Route only if its epoch is
// newer than the route it has (Route.Apply), so a late Route never points
// it back. A target that receives Forwards for an entity it owns resends
// Route at most every RetryInterval, so a lost Route heals.
//
// Epochs: an entity starts at epoch 1 where it spawns; each handoff makes
// the new owner's epoch the source's plus one. A zone remembers the epoch
// of every entity it handed away for ForwardTTL, and rejects or ignores
// messages about older epochs, so duplicated and reordered messages cannot
// resurrect an entity. That memory is finite, so messages carry their send
// time and the receiver drops any older than MaxAge; Config.Validate
// requires ForwardTTL ≥ CommitGiveUp + MaxAge, which covers every message
// about an epoch the zone has forgotten. (In a cluster the player record's
// compare-and-set on the owner lease revision is a second fence.)
//
// A MoveQueue per player, in the zone, applies moves exactly once and in
// sequence order: moves arriving from the connection and from forwarding
// interleave arbitrarily, and duplicates are dropped by sequence.
//
// # Timers
//
// Tick(now) resends an unanswered Offer every RetryInterval and aborts it
// after OfferTimeout (the entity resumes at the source, its buffered moves
// applied late but none lost); resends Commit until acknowledged, giving up
// after CommitGiveUp (counted: Stranded); and expires forwarding records and
// stashed moves. Expire(now) runs the same timers without the resends
// (for a zone that may have lost what it would resend: its lease's
// renewal overdue). A stranded handoff is still in flight (InFlight) until a
// late CommitAck or the forwarding record's expiry: a crashed target never
// takes the entity, but a slow one still can — across processes the target
// writes the player record before it takes a Commit, and on a loaded host
// that write outlasts the resends; the target then takes the last copy
// (actors/cluster) and its late CommitAck ends the handoff here. What the
// source's zone is sent for the entity meanwhile goes on to the target;
// the zone actor keeps a player's Leave beside an unacknowledged Commit
// too, passing it on again with a late CommitAck or, with none by the
// forwarding record's expiry, ending the player itself (actors/zone).
//
// Not safe for concurrent use; the zone actor owns its Machine.
package handoff
