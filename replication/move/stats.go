package move

// StreamStats counts what a Stream did; a plain value.
// Invariant: Added == Acked + Dropped + Len() (an ack never covers a dropped move twice).
type StreamStats struct {
	Added        uint64 // moves added
	Acked        uint64 // moves released by Ack
	Dropped      uint64 // moves dropped from a full window before any ack covered them
	LastAck      uint64 // highest ack received
	Skipped      uint64 // samples Due skipped after a stall
	Held         uint64 // samples Due held back because the window was full
	Sections     uint64 // sections written
	Truncated    uint64 // sections that left kept moves out for lack of budget
	MovesWritten uint64 // moves written, redundant copies included
	Bits         uint64 // section bits written
}

// ApplierStats counts what an Applier did; a plain value.
type ApplierStats struct {
	Sections   uint64 // well-formed sections read
	Malformed  uint64 // sections rejected (Read returned an error)
	Applied    uint64 // moves handed to apply
	Duplicates uint64 // decoded moves skipped because they were applied before
	Lost       uint64 // moves never received: the client dropped them (gaps)
	// Ticks is the sum of the applied moves' Dt, in 1/DtHz s: the game time
	// the client claims. A server compares it with its own clock to catch a
	// client that runs fast (speed hack); this package only counts.
	Ticks uint64
}

// ControlStats counts what a ControlWriter did; a plain value.
type ControlStats struct {
	Sections    uint64 // control sections written
	Full        uint64 // of which carried the full state
	Initial     uint64 // full states sent because nothing was sent yet
	Corrections uint64 // full states sent because a CRC mismatched (or a dropped one was resent)
	Periodic    uint64 // full states sent because Period elapsed
	Forced      uint64 // full states sent because of Force
	Checks      uint64 // CRC reports compared
	Mismatches  uint64 // reports that did not match
	Held        uint64 // mismatches ignored while a full state was in flight
	Deferred    uint64 // full states postponed because they did not fit the budget
}

// PredictorStats counts what a Predictor did; a plain value.
type PredictorStats struct {
	Predicted  uint64 // moves predicted
	Reconciled uint64 // authoritative states rewound to
	Replayed   uint64 // moves re-simulated during reconciliations
	Stale      uint64 // updates ignored because a newer ack was already processed
}
