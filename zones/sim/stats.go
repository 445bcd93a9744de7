package sim

// Stats counts what a zone did. Players, NPCs, Frozen, Replicas and Level
// are current values; the rest are totals.
type Stats struct {
	Players, NPCs, Frozen, Replicas int
	Level                           int

	Joins, Leaves     uint64
	Restores          uint64 // players put back from a checkpoint (Restore)
	MovesApplied      uint64
	MovesThrottled    uint64 // ticks a player's moves waited for time credit
	MovesCaughtUp     uint64 // moves applied on owed time: late input catching up
	MovesInvalid      uint64
	MovesDropped      uint64 // a player's move queue was full (MaxQueuedMoves)
	MovesLost         uint64 // skipped after waiting GapTimeout for a missing move
	EdgeClamps        uint64
	TeleportsDetected uint64
	Teleports         uint64 // Teleport calls

	HandoffsBegun, HandoffsOut, HandoffsIn, HandoffsAborted, HandoffErrors uint64
	DwellHeld                                                              uint64 // entity-ticks past the margin, held by MinDwell

	ReplicaBatches, ReplicasIgnored, ReplicasExpired, ReplicasMisrouted uint64
	// ReplicasHeld: replicas a neighbour stopped listing because it handed
	// them to another neighbour, kept until that one lists them (handoff
	// grace). ReplicasHeldDropped: held replicas (these, and those this
	// zone handed away) that no batch adopted within the grace.
	ReplicasHeld, ReplicasHeldDropped uint64

	Overruns, MissedTicks, LevelUps, LevelDowns uint64
	TicksAtLevel                                [MaxLevel + 1]uint64
	HeldEntries                                 uint64 // view entries served a held (older) state
	InterestSkipped                             uint64 // player-ticks without an interest update
	NPCStepsSkipped                             uint64
	// CellChanges: grid cell size changes (a zone's crowding crossed
	// the threshold; Config.CellSize left 0).
	CellChanges uint64
}
