package bitstream

import (
	"encoding/binary"
	"io"
)

// Formats: a fixed-point or quantized encoding with its parameters validated
// once, for a packet whose fields have fixed shapes (every ghost position in
// one range at one precision). WriteFixed and WriteQuantized re-validate
// their range on every call and divide to derive it; a format keeps what
// they derive (the step count, the width, the scale and the step), so its
// Write and Read do only the per-value work, with the same binary64
// operations in the same order: a format writes exactly the bits the
// matching WriteFixed or WriteQuantized call writes, and reads exactly the
// values ReadFixed or ReadQuantized returns (TestFormatsMatchFieldCalls,
// FuzzFormats). The vector methods (Write3, Read3) put three components in
// one field, which is the same stream as three consecutive fields because
// the stream is least significant bit first.

// FixedFormat is WriteFixed's encoding for one (min, max, precision),
// validated once by NewFixedFormat. A value, it may be copied and shared:
// its methods only read it, so any number of goroutines may use one at once.
// The zero FixedFormat encodes only 0, in no bits.
type FixedFormat struct {
	min, max, precision float64
	steps               uint64 // S, the top code
	bits                uint   // RangeBits(0, S)
}

// NewFixedFormat validates the parameters as WriteFixed does and returns
// their format; the error is the one WriteFixed would return (ErrOutOfRange
// or ErrWidth).
func NewFixedFormat(min, max, precision float64) (FixedFormat, error) {
	steps, n, err := fixedParams(min, max, precision)
	if err != nil {
		return FixedFormat{}, err
	}
	return FixedFormat{min: min, max: max, precision: precision, steps: steps, bits: n}, nil
}

// Bits is the width of one value: FixedBits(min, max, precision).
func (f *FixedFormat) Bits() uint { return f.bits }

// MaxError is FixedMaxError(min, max, precision).
func (f *FixedFormat) MaxError() float64 { return FixedMaxError(f.min, f.max, f.precision) }

// in reports whether v lies in [min, max] (false for NaN).
func (f *FixedFormat) in(v float64) bool { return v >= f.min && v <= f.max }

// code is WriteFixed's q for v ∈ [min, max]: the quotient is at least 0.5
// and below 2^33, where the signed conversion equals the unsigned one and
// is a single instruction. It needs no cap at S: S is this expression at
// max (fixedParams), and every step of it is monotonic, so v ≤ max gives
// q ≤ S (TestCodesWithinTop).
func (f *FixedFormat) code(v float64) uint64 {
	return uint64(int64((v-f.min)/f.precision + 0.5))
}

// value is ReadFixed's result for a code q ≤ S. The cap is ReadFixed's
// comparison, not the built-in min, which would turn a +0 below a max of −0
// into −0 (and costs more: it orders signed zeros and NaN).
func (f *FixedFormat) value(q uint64) float64 {
	v := f.min + float64(float64(int64(q))*f.precision)
	if v > f.max {
		v = f.max
	}
	return v
}

// Write writes v as WriteFixed(v, min, max, precision) would: the same bits,
// the same refusals (ErrOutOfRange for v outside [min, max] or NaN,
// ErrOverflow when it does not fit).
func (f *FixedFormat) Write(w *Writer, v float64) error {
	if !f.in(v) {
		return w.fail(ErrOutOfRange)
	}
	q := f.code(v)
	if w.tryPut(q, f.bits) || f.bits == 0 {
		return nil
	}
	return w.writeBitsSlow(q, f.bits)
}

// Read reads a value written by Write (or by WriteFixed with the same
// parameters), as ReadFixed would.
func (f *FixedFormat) Read(r *Reader, field string) (float64, error) {
	if f.bits == 0 {
		return f.min, nil
	}
	at := r.bit
	q, ok := r.TryReadBits(f.bits)
	if !ok {
		var err error
		if q, err = r.readBitsSlow(f.bits, field); err != nil {
			return 0, err
		}
	}
	if q > f.steps {
		return 0, r.fail(field, at, ErrOutOfRange)
	}
	return f.value(q), nil
}

// Write3 writes x, y and z as three consecutive values (the bits of Write(x),
// Write(y), Write(z)) in one call. It is atomic: when any component is
// refused (ErrOutOfRange) or the three do not fit (ErrOverflow), it writes
// nothing.
func (f *FixedFormat) Write3(w *Writer, x, y, z float64) error {
	if !(f.in(x) && f.in(y) && f.in(z)) {
		return w.fail(ErrOutOfRange)
	}
	a, b, c, n := f.code(x), f.code(y), f.code(z), f.bits
	if n <= 21 && w.tryPut64(a|b<<(n&63)|c<<(2*n&63), 3*n) {
		return nil
	}
	return w.put3(a, b, c, n)
}

// Read3 reads three values written by Write3 (or by three Writes). It is
// atomic: a code above S in any component (ErrOutOfRange) or a stream too
// short for all three (io.ErrUnexpectedEOF) consumes nothing, and the
// *ReadError names field at the first component's bit.
func (f *FixedFormat) Read3(r *Reader, field string) (x, y, z float64, err error) {
	at := r.bit
	n := f.bits
	v, ok := r.tryWindow(3*n, n-1 < 21)
	mask := uint64(1)<<(n&63) - 1
	a, b, c := v&mask, v>>(n&63)&mask, v>>(2*n&63)&mask
	if !ok {
		if a, b, c, err = r.get3(n, field); err != nil {
			return 0, 0, 0, err
		}
	}
	if a > f.steps || b > f.steps || c > f.steps {
		return 0, 0, 0, r.fail(field, at, ErrOutOfRange)
	}
	return f.value(a), f.value(b), f.value(c), nil
}

// QuantizedFormat is WriteQuantized's encoding for one (min, max, bits),
// validated once by NewQuantizedFormat; WriteUnitFloat's is
// NewQuantizedFormat(0, 1, bits). A value, it may be copied and shared: its
// methods only read it. The zero QuantizedFormat encodes only 0, in no bits.
type QuantizedFormat struct {
	min, max float64
	scale    float64 // L/(max−min), WriteQuantized's factor
	step     float64 // (max−min)/L, ReadQuantized's
	top      uint64  // L = 2^bits − 1
	bits     uint
}

// NewQuantizedFormat validates the parameters as WriteQuantized does and
// returns their format; the error is the one WriteQuantized would return
// (ErrWidth or ErrOutOfRange).
func NewQuantizedFormat(min, max float64, bits uint) (QuantizedFormat, error) {
	l, err := quantParams(min, max, bits)
	if err != nil {
		return QuantizedFormat{}, err
	}
	return QuantizedFormat{min: min, max: max, scale: float64(l) / (max - min), step: (max - min) / float64(l), top: l, bits: bits}, nil
}

// Bits is the width of one value.
func (f *QuantizedFormat) Bits() uint { return f.bits }

// MaxError is QuantizedMaxError(min, max, bits).
func (f *QuantizedFormat) MaxError() float64 { return QuantizedMaxError(f.min, f.max, f.bits) }

func (f *QuantizedFormat) in(v float64) bool { return v >= f.min && v <= f.max }

// code is WriteQuantized's q for v ∈ [min, max] (the sum lies in
// [0.5, 2^33), where the signed conversion is exact and cheaper). It needs
// no cap at L: the expression is monotonic in v, and at max the product
// (max−min)·(L/(max−min)) is within a few ulps of L, so the sum truncates
// to L (TestCodesWithinTop).
func (f *QuantizedFormat) code(v float64) uint64 {
	return uint64(int64(float64((v-f.min)*f.scale) + 0.5))
}

// value is ReadQuantized's result for a code q ≤ L.
func (f *QuantizedFormat) value(q uint64) float64 {
	if q >= f.top {
		return f.max
	}
	return f.min + float64(float64(int64(q))*f.step)
}

// Write writes v as WriteQuantized(v, min, max, bits) would: the same bits,
// the same refusals.
func (f *QuantizedFormat) Write(w *Writer, v float64) error {
	if !f.in(v) {
		return w.fail(ErrOutOfRange)
	}
	q := f.code(v)
	if w.tryPut(q, f.bits) || f.bits == 0 {
		return nil
	}
	return w.writeBitsSlow(q, f.bits)
}

// Read reads a value written by Write (or by WriteQuantized with the same
// parameters), as ReadQuantized would.
func (f *QuantizedFormat) Read(r *Reader, field string) (float64, error) {
	if f.bits == 0 {
		return f.min, nil
	}
	q, ok := r.TryReadBits(f.bits)
	if !ok {
		var err error
		if q, err = r.readBitsSlow(f.bits, field); err != nil {
			return 0, err
		}
	}
	return f.value(q), nil
}

// Write3 writes x, y and z as three consecutive values in one call,
// atomically (see FixedFormat.Write3).
func (f *QuantizedFormat) Write3(w *Writer, x, y, z float64) error {
	if !(f.in(x) && f.in(y) && f.in(z)) {
		return w.fail(ErrOutOfRange)
	}
	a, b, c, n := f.code(x), f.code(y), f.code(z), f.bits
	if n <= 21 && w.tryPut64(a|b<<(n&63)|c<<(2*n&63), 3*n) {
		return nil
	}
	return w.put3(a, b, c, n)
}

// Read3 reads three values written by Write3 (or by three Writes),
// atomically: a stream too short for all three consumes nothing.
func (f *QuantizedFormat) Read3(r *Reader, field string) (x, y, z float64, err error) {
	n := f.bits
	v, ok := r.tryWindow(3*n, n-1 < 21)
	mask := uint64(1)<<(n&63) - 1
	a, b, c := v&mask, v>>(n&63)&mask, v>>(2*n&63)&mask
	if !ok {
		if a, b, c, err = r.get3(n, field); err != nil {
			return 0, 0, 0, err
		}
	}
	return f.value(a), f.value(b), f.value(c), nil
}

// put3 writes a, b and c (each below 2^n, n ≤ 32) as three n-bit fields,
// all or nothing.
func (w *Writer) put3(a, b, c uint64, n uint) error {
	if n <= 21 { // 3n ≤ 63: one field
		v := a | b<<(n&63) | c<<(2*n&63)
		if w.tryPut64(v, 3*n) || n == 0 {
			return nil
		}
		if !w.fits(int(3 * n)) {
			return ErrOverflow
		}
		w.put(v, 3*n)
		return nil
	}
	if !w.fits(int(3 * n)) {
		return ErrOverflow
	}
	w.put(a|b<<(n&63), 2*n) // 2n ≤ 64
	w.put(c, n)
	return nil
}

// tryPut64 is tryPut for fields of up to 64 bits: one 8-byte store and the
// spill byte, when the 9 bytes from the field's first byte are in the
// buffer. v must fit in n bits.
func (w *Writer) tryPut64(v uint64, n uint) bool {
	if i := uint(w.bit) >> 3; i+9 <= uint(len(w.buf)) {
		off := uint(w.bit) & 7
		p := w.buf[i : i+9]
		binary.LittleEndian.PutUint64(p, uint64(p[0])&uint64(lowBits[off])|v<<off)
		p[8] = byte(v >> 1 >> ((63 - off) & 63)) // v >> (64−off): 0 when off is 0
		w.bit += int(n)
		return true
	}
	return false
}

// tryWindow consumes n bits when ok (the caller's condition on n) holds, the
// n bits are within the limit and the 9 bytes from the current byte are in
// the buffer, and returns the 64 stream bits from the current bit (those
// past n belong to later fields). Otherwise it consumes nothing and returns
// ok false.
func (r *Reader) tryWindow(n uint, ok bool) (uint64, bool) {
	if i := uint(r.bit) >> 3; ok && r.bit+int(n) <= r.limit && i+9 <= uint(len(r.buf)) {
		off := uint(r.bit) & 7
		p := r.buf[i : i+9]
		r.bit += int(n)
		return binary.LittleEndian.Uint64(p)>>off | uint64(p[8])<<1<<((63-off)&63), true // the spill byte's bits << (64−off)
	}
	return 0, false
}

// get3 reads three n-bit fields (n ≤ 32), all or nothing: on failure it
// consumes nothing and returns a *ReadError at the first field's bit.
func (r *Reader) get3(n uint, field string) (a, b, c uint64, err error) {
	if n == 0 {
		return 0, 0, 0, nil
	}
	if int(3*n) > r.limit-r.bit {
		return 0, 0, 0, r.errAt(field, r.bit, io.ErrUnexpectedEOF)
	}
	mask := uint64(1)<<n - 1
	if n <= 21 {
		var v uint64
		if i := uint(r.bit) >> 3; i+9 <= uint(len(r.buf)) {
			off := uint(r.bit) & 7
			p := r.buf[i : i+9]
			v = binary.LittleEndian.Uint64(p)>>off | uint64(p[8])<<1<<((63-off)&63) // the spill byte's bits << (64−off)
			r.bit += int(3 * n)
		} else {
			v = r.get(3 * n)
		}
		return v & mask, v >> n & mask, v >> (2 * n) & mask, nil
	}
	ab := r.get(2 * n)
	return ab & mask, ab >> n & mask, r.get(n), nil
}
