package bitstream

import (
	"errors"
	"fmt"
)

var (
	// ErrOverflow means a write did not fit in the writer's buffer.
	ErrOverflow = errors.New("bitstream: buffer full")
	// ErrOutOfRange means a value lies outside the range its encoding allows,
	// on write (caller bug: NaN, ±Inf, beyond [min, max], bad range
	// parameters) or on read (malformed or hostile input).
	ErrOutOfRange = errors.New("bitstream: value out of range")
	// ErrTooLong means a length exceeds the field's declared maximum.
	ErrTooLong = errors.New("bitstream: length exceeds field maximum")
	// ErrWidth means a bit width outside what the encoding allows (1..64 for
	// WriteBits), or a value wider than its width.
	ErrWidth = errors.New("bitstream: bad bit width")
	// ErrDuplicate means StringTable.Set was given a string another slot holds.
	ErrDuplicate = errors.New("bitstream: string already in another table slot")
)

// ReadError says which field of a packet failed to decode, where, and why.
// Every failed Read returns one; errors.As finds it and errors.Is sees
// through it to Err:
//
//	var re *bitstream.ReadError
//	if errors.As(err, &re) { log.Warn("bad packet", "field", re.Field, "bit", re.Bit) }
//	if errors.Is(err, io.ErrUnexpectedEOF) { /* truncated packet */ }
type ReadError struct {
	Field string // schema name of the field, e.g. "ghost.id"
	Bit   int    // stream bit offset at which the field started
	Err   error  // io.ErrUnexpectedEOF, ErrOutOfRange, ErrTooLong or ErrWidth
}

func (e *ReadError) Error() string {
	return fmt.Sprintf("bitstream: reading %s at bit %d: %v", e.Field, e.Bit, e.Err)
}

func (e *ReadError) Unwrap() error { return e.Err }
