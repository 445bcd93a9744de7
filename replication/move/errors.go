package move

import "errors"

// Caller errors: the game handed this package something it cannot send.
var (
	// ErrSequence: Stream.Add got a move whose Seq is not Stream.NextSeq().
	ErrSequence = errors.New("move: move out of sequence")
	// ErrInvalidMove: a Move field lies outside its wire range (Forward or
	// Strafe of −128, |Pitch| > PitchMax).
	ErrInvalidMove = errors.New("move: move field out of range")
	// ErrInvalidState: a ControlState has a NaN or infinite component, a
	// PayloadLen above MaxPayload, or non-zero bytes past PayloadLen.
	ErrInvalidState = errors.New("move: invalid control state")
	// ErrConfig is wrapped by every error Config.Validate and
	// ControlConfig.Validate return.
	ErrConfig = errors.New("move: invalid config")
)

// Decoding errors. They arrive wrapped in a *bitstream.ReadError that names the
// field and its bit offset, so errors.Is and errors.As both work.
var (
	// ErrNonCanonical: a delta-coded move claims a change that is not one (the
	// "changed" flag is set on a field equal to the previous move's, or the
	// "same" flag is clear while no field changed). Only the canonical
	// encoding is accepted, so decode → encode reproduces the bits exactly.
	ErrNonCanonical = errors.New("move: non-canonical move encoding")
	// ErrBadSeq: the section's first sequence number reconstructs to 0 or
	// overflows 64 bits.
	ErrBadSeq = errors.New("move: bad move sequence")
	// ErrBadAck: a control section acknowledges a move this client never sent.
	ErrBadAck = errors.New("move: ack of an unsent move")
)
