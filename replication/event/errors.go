package event

import "errors"

// Send-side errors. The Send methods return them to the caller without
// queueing anything; Write returns them without writing anything.
var (
	// ErrTooLarge: the payload exceeds MaxEventSize (guaranteed classes) or
	// MaxFragment (unguaranteed and staggered events travel in one record).
	ErrTooLarge = errors.New("event: payload too large")
	// ErrQueueFull: queueing the payload would exceed MaxQueuedBytes, or
	// MaxUnguaranteed unguaranteed events are already queued.
	ErrQueueFull = errors.New("event: send queue full")
	// ErrLaneFull: the lane (or the unordered stream) already holds
	// MaxInFlightPerLane events that are queued or not yet acknowledged.
	ErrLaneFull = errors.New("event: too many events in flight on lane")
	// ErrBadLane: an ordered lane outside [0, Lanes).
	ErrBadLane = errors.New("event: no such lane")
	// ErrBadKey: a staggered key outside [0, StaggerKeys).
	ErrBadKey = errors.New("event: no such staggered key")
	// ErrNoRoom: the writer has no room for even the section's end bit.
	ErrNoRoom = errors.New("event: no room for the event section")
	// ErrSeqOrder: Write was given a packet sequence number not above the
	// previous one; transmission records are kept in send order.
	ErrSeqOrder = errors.New("event: packet sequence not increasing")
	// ErrConfig is wrapped by every error Config.Validate returns.
	ErrConfig = errors.New("event: invalid config")
)

// Receive-side errors. A section that fails to parse is rejected whole
// (nothing delivered, no state changed); a *bitstream.ReadError is returned
// for a truncated or out-of-range field. ErrMalformed and ErrReceiverFull can
// also come from the second, delivering pass (the fragment order of a lane is
// only known then); only a peer that breaks the protocol causes them, and the
// connection should be closed.
var (
	// ErrMalformed: a record the protocol forbids (a fragment out of order, a
	// length beyond its bounds, inconsistent fragment fields).
	ErrMalformed = errors.New("event: malformed section")
	// ErrReceiverFull: buffering the record would exceed MaxQueuedBytes or
	// MaxPartial. An honest sender with the same Config never causes it.
	ErrReceiverFull = errors.New("event: receive buffers full")
)
