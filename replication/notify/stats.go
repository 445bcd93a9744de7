package notify

// Stats counts what one Conn did; a plain value (the zero Stats is all zeros).
// Invariant (checklist PN-10), after every call:
// Sent == Delivered + Dropped + InFlight().
type Stats struct {
	// Sender half: our packets.
	Sent        uint64 // sequence numbers consumed by WriteHeader (every type)
	Delivered   uint64 // fates resolved delivered
	Dropped     uint64 // fates resolved dropped, ForcedDrops included
	ForcedDrops uint64 // records dropped because MaxInFlight was reached (may be false drops)
	HeaderBits  uint64 // total bits of the headers WriteHeader wrote, type included
	RTTSamples  uint64 // RTT samples taken

	// Receiver half: the peer's packets.
	Received      uint64 // packets accepted
	Duplicates    uint64 // rejected with ErrDuplicate
	Stale         uint64 // rejected with ErrStale
	TooFar        uint64 // rejected with ErrTooFar
	FarAccepted   uint64 // accepted a ring's length or more beyond the newest (Config.AcceptFar): the window jumped
	BadHeader     uint64 // rejected with ErrBadType, ErrBadAck, ErrNotDecoded or a read error
	Abandoned     uint64 // missing sequences given up (the peer learns they were dropped)
	WindowEvicted uint64 // accepted sequences that left the window before the peer was known to have learned their fate: possible false drops at the peer
}
