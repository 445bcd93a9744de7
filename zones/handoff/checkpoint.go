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
}
