package zone

import (
	"github.com/ghostwire/ghostwire/actors/msg"
)

// A player put back from its record (Join.Restore, with Params.Restored
// set: a cluster) is the zone's only once the record's compare-and-set
// from the epoch it was read at lands: two zones may restore the same
// player from the same record (a connection that woke from a pause
// rejoined with a record it read before another node took the zone over
// and restored the player itself), and only one write can land. Until it
// does, the player's events are kept, not applied: applied, the losing
// zone's echoes reached the client beside the winner's (an echo twice, 10
// in a row, by hand with a node SIGSTOPped 10 s), and its Outputs' fences
// told the connection that events were applied which the winner never
// had (lost). Moves are applied meanwhile: a move is state the winner
// overwrites, an event is an act.
//
// The write's outcome comes back as a restoreSettled: written, the kept
// events are applied in the order they came; not written (refused, a KV
// error, the writers' queue full), the player is dropped as a refused
// restore is (onUnplace) and its kept events with it: nothing acknowledged
// them, so the connection sends them again to whichever zone the record
// names when it joins there.

// heldRestore is a restored player whose record write has not landed
// yet: the epoch it was restored at here, and the inputs whose events
// wait for the write (their moves applied).
type heldRestore struct {
	epoch uint64
	kept  []*msg.Input
}

// restoreSettled is the outcome of the record write of a player restored
// at epoch (Params.Restored's settled).
type restoreSettled struct {
	player, epoch uint64
	written       bool
}

// maxHeldRestoreInputs bounds the inputs a restored player's events wait
// in: a write takes a round trip or two, a fenced one waits for the
// lease's renewal (a hold: at most 2 × TTL, 6 s), ≈ 8.5 s of a client
// sending events in every packet at 30 Hz. Beyond it, or beyond
// maxPausedEvents for all the zone's restored players together (a
// takeover restores them all at once), an input's events are dropped,
// counted in Metrics.EventsPausedDropped.
const maxHeldRestoreInputs = 256

// holdRestore marks player, just restored here at epoch, as waiting for
// its record write.
func (a *zoneActor) holdRestore(player, epoch uint64) {
	if a.unconfirmed == nil {
		a.unconfirmed = map[uint64]*heldRestore{}
	}
	if old := a.unconfirmed[player]; old != nil {
		a.releaseHeld(old)
	}
	a.unconfirmed[player] = &heldRestore{epoch: epoch}
}

// keepUnconfirmed keeps in, whose moves were applied, for its events when
// its player waits for its restore's record write, and reports whether it
// did (in is then the hold's).
func (a *zoneActor) keepUnconfirmed(in *msg.Input) bool {
	if len(a.unconfirmed) == 0 {
		return false
	}
	h := a.unconfirmed[in.Player]
	if h == nil {
		return false
	}
	if len(h.kept) >= maxHeldRestoreInputs || a.heldRestoreInputs >= maxPausedEvents {
		a.m.EventsPausedDropped.Add(uint64(len(in.Events)))
		in.Release()
		return true
	}
	in.Moves, in.LostBefore = in.Moves[:0], 0
	h.kept = append(h.kept, in)
	a.heldRestoreInputs++
	return true
}

// onRestoreSettled ends the wait of a player restored at s.epoch: its
// kept events are applied as apply would have (kept again if the zone is
// paused meanwhile, passed on if the player was handed away), or, the
// write not made, the player is dropped with them.
func (a *zoneActor) onRestoreSettled(s *restoreSettled) {
	h := a.unconfirmed[s.player]
	if h == nil || h.epoch != s.epoch {
		return // a newer restore waits for its own write
	}
	delete(a.unconfirmed, s.player)
	if !s.written {
		a.releaseHeld(h)
		a.onUnplace(&unplace{player: s.player, epoch: s.epoch})
		return
	}
	a.heldRestoreInputs -= len(h.kept)
	for i, in := range h.kept {
		h.kept[i] = nil
		if !a.z.OwnsEvents(in.Player) && a.eventsAway(in) {
			continue
		}
		if a.paused&pausesEvents != 0 || a.fenceLapsed() {
			a.pauseEvents(in)
			continue
		}
		a.handleEvents(in)
		in.Release()
	}
	a.flushOutputs()
	a.flushPending()
}

// releaseHeld drops h's kept inputs, counted.
func (a *zoneActor) releaseHeld(h *heldRestore) {
	a.heldRestoreInputs -= len(h.kept)
	for i, in := range h.kept {
		a.m.EventsPausedDropped.Add(uint64(len(in.Events)))
		h.kept[i] = nil
		in.Release()
	}
	h.kept = nil
}

// dropUnconfirmed releases every kept input: the zone stops.
func (a *zoneActor) dropUnconfirmed() {
	for id, h := range a.unconfirmed {
		a.releaseHeld(h)
		delete(a.unconfirmed, id)
	}
}
