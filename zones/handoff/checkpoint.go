package handoff

import "github.com/ghostwire/ghostwire/replication/move"

// Checkpoint is what a player's persistent record keeps of its entity: enough
// to put it back where it was after its zone's node died, or when the player
// reconnects later. Only settled, owned players are checkpointed (a player
// mid-handoff is checkpointed by whichever zone ends up owning it).
type Checkpoint struct {
	Entity uint64
	// Epoch is the player's handoff epoch in the zone that wrote it: the
	// record only takes a checkpoint from the zone and epoch it names.
	Epoch       Epoch
	Control     move.ControlState
	LastApplied uint64
	Health      int32
	Flags       uint32
	Name        string
	Extra       [4]uint32
	// Conn is the player's connection address in the zone (which node
	// holds it).
	Conn string
	// The player's ordered-event fence (docs/protocol.md §7.20): a zone
	// that restores the player drops events at or below it.
	Events EventFence
}

// EventLanes is how many ordered lanes a player's event fence covers: the
// protocol's 8 (events on higher lanes of a custom configuration are not
// fenced).
const EventLanes = 8

// EventFence is a player's ordered-event fence (docs/protocol.md §7.20):
// the numbering's generation and, per lane, the newest event number
// applied. The zero EventFence has applied nothing.
type EventFence struct {
	Gen  uint64
	Last [EventLanes]uint64
}

// Take reports whether event seq of lane (numbering gen) is new, and makes
// it the lane's fence if so. Another generation starts the lanes again (a
// new session); seq 0 (not numbered) and lanes beyond EventLanes are
// always new.
func (f *EventFence) Take(gen uint64, lane int, seq uint64) bool {
	if seq == 0 || gen == 0 || lane < 0 || lane >= EventLanes {
		return true
	}
	if gen != f.Gen {
		*f = EventFence{Gen: gen}
	}
	if seq <= f.Last[lane] {
		return false
	}
	f.Last[lane] = seq
	return true
}

// Covers reports whether every event g reports applied is within f: g is
// of f's generation and at or below it on every lane. An Output whose
// fence a restore's checkpoint covers answers events the restored zone
// will not apply again. A fence of no generation (Gen 0: no numbered
// event applied, or a client that numbers none) covers nothing known, so
// it is never covered: its events may be applied again.
func (f EventFence) Covers(g EventFence) bool {
	if g.Gen == 0 || g.Gen != f.Gen {
		return false
	}
	for i, last := range g.Last {
		if last > f.Last[i] {
			return false
		}
	}
	return true
}

// CheckpointSlice is the chunk of its zone's periodic checkpoints player's
// go in, of slices (actors/cluster's checkpoint chunks): the id mixed
// (Fibonacci hashing) before the modulo, so ids with a structure — all
// multiples of four, a block per shard — still spread over every slice.
func CheckpointSlice(player, slices uint64) uint64 {
	return (player * 0x9E3779B97F4A7C15 >> 32) % slices
}
