package ghost

import (
	"math/bits"

	"github.com/ghostwire/ghostwire/replication/bitstream"
)

// extrasInWindow is ExtraGroup(n)'s Decode as a rule (n values, each + 1 as
// an Elias-gamma code). Every update of a player ghost carries its move
// stamp in the extra group (Extra[0..1] of four, the other three zero as a
// rule), and a ReadGamma call a value was ≈ 320 instructions a ghost, a
// quarter of an observing client's decode; this reads the codes from one
// peeked window and consumes them with one read (≈ 115). Whatever does not
// end inside the window — a code of a value ≥ 2^27, the end of the packet,
// a malformed code — it leaves (false: nothing read, s as it was) to
// readExtrasPlain, which reads the same bits the same way or returns the
// error (FuzzExtraRead holds the two together on any bytes).
func extrasInWindow(r *bitstream.Reader, s *State, n int) bool {
	v, w, ok := r.PeekWindow()
	if !ok {
		return false
	}
	// Bits past the window read as zeros: a code that does not end inside
	// it leaves l past w (shifts masked: no range checks).
	var l uint
	if n == 4 {
		// A player's: its move stamp, then (as a rule) three zeros, the
		// codes 111: one test for the three.
		tz := uint(bits.TrailingZeros64(v))
		z := tz & 63
		l = 2*tz + 1
		if v>>(l&63)&7 == 7 && l+3 <= uint(w) {
			s.Extra = [4]uint32{uint32(1<<z | v>>((z+1)&63)&(1<<z-1) - 1)}
			r.TryReadBits(l + 3)
			return true
		}
		l = 0
	}
	x := s.Extra // read here only: a cold ghost's line is a store miss above, a load miss here
	for i := range n {
		u := v >> (l & 63)
		if u&1 != 0 { // value 0: the code "1"
			x[i&3] = 0
			l++
			continue
		}
		tz := uint(bits.TrailingZeros64(u)) // 64 when u is 0: l goes past w
		z := tz & 63
		x[i&3] = uint32(1<<z | u>>((z+1)&63)&(1<<z-1) - 1)
		l += 2*tz + 1
	}
	if l > uint(w) {
		return false
	}
	s.Extra = x
	r.TryReadBits(l) // 1 ≤ l ≤ w: in the window PeekWindow checked
	return true
}

// readExtrasPlain reads the n codes one ReadGamma at a time: the extra
// group's definition, and its Decode's path for what extrasInWindow's
// window does not hold. Not inlined: the rare path, kept out of the
// Decode's body.
//
//go:noinline
func readExtrasPlain(r *bitstream.Reader, s *State, n int) error {
	for i := range n {
		v, err := r.ReadGamma("ghost.extra")
		if err != nil {
			return err
		}
		if v > 1<<32 {
			return &bitstream.ReadError{Field: "ghost.extra", Bit: r.Pos(), Err: bitstream.ErrOutOfRange}
		}
		s.Extra[i&3] = uint32(v - 1)
	}
	return nil
}
