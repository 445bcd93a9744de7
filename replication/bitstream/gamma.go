package bitstream

import (
	"io"
	"math/bits"
)

// Elias-gamma code for counts and gaps that are usually small but unbounded
// (run lengths, id deltas): v ≥ 1 with z = ⌊log2 v⌋ costs 2z+1 bits, so 1 is
// one bit, 2..3 three bits, 4..7 five bits, and 2^64−1 127 bits.
//
// Layout in stream order (the LSB-first form of the classic code): z zero
// bits, a one bit, then the low z bits of v (v without its leading one) as a
// z-bit field. Every v has exactly one encoding.

// GammaBits is the encoded size of v ≥ 1 (0 for v = 0, which has no code).
func GammaBits(v uint64) int {
	if v == 0 {
		return 0
	}
	return 2*bits.Len64(v) - 1
}

// WriteGamma writes v ≥ 1 in Elias-gamma code; v = 0 is refused with
// ErrOutOfRange (write v+1 for a count that may be zero).
func (w *Writer) WriteGamma(v uint64) error {
	if v == 0 {
		return w.fail(ErrOutOfRange)
	}
	z := uint(bits.Len64(v)) - 1 // v ≥ 1: z ∈ [0, 63], so z&63 is z (no code for shifts of 64)
	low := v &^ (1 << (z & 63))
	if z < 32 { // whole code in one field of 2z+1 ≤ 63 bits
		c := 1<<(z&63) | low<<((z+1)&63)
		if w.tryPut(c, 2*z+1) {
			return nil
		}
		return w.writeBitsSlow(c, 2*z+1)
	}
	if !w.fits(int(2*z + 1)) {
		return ErrOverflow
	}
	w.put(1<<z, z+1)
	w.put(low, z)
	return nil
}

// ReadGamma reads a value written by WriteGamma. A prefix of more than 63
// zeros (no uint64 has such a code) is rejected with ErrOutOfRange.
func (r *Reader) ReadGamma(field string) (uint64, error) {
	// Fast path: 56 readable bits hold every code with z < 28 (≤ 55 bits).
	if p, ok := r.TryReadBits(56); ok {
		if z := uint(bits.TrailingZeros64(p)); z < 28 {
			r.bit -= 56 - int(2*z+1)
			return 1<<z | p>>(z+1)&(1<<z-1), nil
		}
		r.bit -= 56
	}
	at := r.bit
	avail := r.limit - r.bit
	if avail <= 0 {
		return 0, r.errAt(field, at, io.ErrUnexpectedEOF)
	}
	p := r.peek(uint(min(avail, 64)))
	if p == 0 {
		if avail >= 64 {
			return 0, r.errAt(field, at, ErrOutOfRange)
		}
		return 0, r.errAt(field, at, io.ErrUnexpectedEOF)
	}
	z := uint(bits.TrailingZeros64(p))
	if int(2*z+1) > avail {
		return 0, r.errAt(field, at, io.ErrUnexpectedEOF)
	}
	r.bit += int(z) + 1
	v := uint64(1) << z
	if z > 0 {
		v |= r.get(z)
	}
	return v, nil
}
