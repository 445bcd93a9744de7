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
	// them on (to another neighbour, or from this zone to it), kept until
	// the new owner lists them (awaitHeir). ReplicasHeldDropped: held
	// replicas a batch the new owner built past the grace left out (those
	// that waited ReplicaTTL count as ReplicasExpired).
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
