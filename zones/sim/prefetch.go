package sim

import (
	"unsafe"

	"github.com/ghostwire/ghostwire/replication/prefetch"
	"github.com/ghostwire/ghostwire/zones/grid"
	"github.com/ghostwire/ghostwire/zones/interest"
)

// stepPlayerBytes is what stepPlayer reads of a player's record: its
// flags, queue, credit and owed, from the record's start.
const stepPlayerBytes = unsafe.Offsetof(playerSlot{}.owed) + unsafe.Sizeof(playerSlot{}.owed)

// prefetchStep asks the CPU for what stepSlots will read of the players
// after slot s, in two stages a slot apart, each reading only lines the
// stage before asked for: the record of the player two slots on, then
// the head of the move queue of the next one. On a loaded node both have
// left the caches since the last tick (a tick reads ≈ 600 slots; the
// connections' work between two ticks runs through tens of megabytes),
// and each was a trip to memory a player a tick, one after the other:
// the slot's record, then from it the queue's moves. Hints: they change
// nothing.
func (z *Zone) prefetchStep(s int) {
	if k := s + 2; k < len(z.ents) {
		if e := &z.ents[k]; e.pl != nil && e.role == roleOwned {
			prefetch.Lines(unsafe.Pointer(e.pl), stepPlayerBytes)
		}
	}
	if k := s + 1; k < len(z.ents) {
		if e := &z.ents[k]; e.pl != nil && e.role == roleOwned {
			e.pl.queue.PrefetchHead()
		}
	}
}

// prefetchInterest asks the CPU for the interest set updateInterest will
// update after the i-th filed slot's: the next player's set's members
// (its record's line with the set's header was read by stepSlots this
// tick). Tracker.Update's first read of a set was a trip to memory a
// player a tick. A hint: it changes nothing.
func (z *Zone) prefetchInterest(sas []grid.SlotAux, i int) {
	if k := i + 1; k < len(sas) && interest.AuxKind(sas[k].Aux) == KindPlayer {
		if p := z.owned[sas[k].Slot]; p != nil {
			p.set.Prefetch()
		}
	}
}
