package bitstream

import (
	"math"
	"math/bits"
)

// Quantized floats. Seed: Torque writeFloat(0.45, 5) "round the float to the
// nearest 1/32nd"; Multiplayer Game Programming ch. 4 "Fixed Point" (BS-7).
//
// Every encoder rounds to the nearest level (the book truncates; checklist
// E-14 shows truncation landing one step low for 7277 of 40001 grid points).
// Arithmetic is IEEE-754 binary64 with the operation order given in
// docs/protocol.md §2; explicit float64() conversions stop the
// compiler fusing a multiply and an add into one FMA on architectures that
// have it, so every platform produces the same bits.
//
// Non-finite values and values outside [min, max] are refused on write with
// ErrOutOfRange (never clamped: an out-of-range position is a simulation bug
// the caller should see). Decoders return values inside [min, max] only.

// MaxQuantBits is the widest quantized float (WriteQuantized, WriteUnitFloat,
// WriteSignedFloat, WriteFixed's level count, unit-vector components).
const MaxQuantBits = 32

// resolution is the largest ratio max(|min|,|max|)/step this package accepts:
// finer steps than 2^-40 of the magnitude cannot round-trip exactly in
// binary64, so such a range/width pair is refused with ErrWidth.
const resolution = 1 << 40

// slack is the allowance the *MaxError helpers add for binary64 rounding.
func slack(step, mag float64) float64 { return step*0x1p-20 + mag*0x1p-48 }

// validRange reports whether [min, max] is a usable finite, non-empty range.
func validRange(min, max float64) bool {
	return min < max && max-min <= math.MaxFloat64 // false for NaN and infinities
}

// magnitude is max(|min|, |max|) without math.Max, which is an assembly call
// on amd64 (NaN handling we do not need: callers validated the range).
func magnitude(min, max float64) float64 {
	a, b := math.Abs(min), math.Abs(max)
	if a > b {
		return a
	}
	return b
}

// quantParams validates a bit-count quantizer and returns its top code
// L = 2^bits-1. err is ErrWidth or ErrOutOfRange.
func quantParams(min, max float64, bits uint) (uint64, error) {
	if bits-1 >= MaxQuantBits {
		return 0, ErrWidth
	}
	if !validRange(min, max) {
		return 0, ErrOutOfRange
	}
	l := uint64(1)<<bits - 1
	if (max-min)*resolution < math.Abs(min)*float64(l) || (max-min)*resolution < math.Abs(max)*float64(l) { // step·2^40 < magnitude
		return 0, ErrWidth
	}
	return l, nil
}

// quantOK is quantParams' fast path, small enough to inline.
func quantOK(min, max float64, bits uint) bool {
	l := float64(uint64(1)<<(bits&63) - 1)
	return bits-1 < MaxQuantBits && min < max && max-min <= math.MaxFloat64 &&
		(max-min)*resolution >= math.Abs(min)*l && (max-min)*resolution >= math.Abs(max)*l
}

// WriteQuantized writes v ∈ [min, max] in bits (1..32) bits as one of the
// 2^bits evenly spaced levels from min to max inclusive, rounded to the
// nearest: q = ⌊(v−min)·(L/(max−min)) + 0.5⌋ with L = 2^bits−1, so min and max
// are exact. The worst-case error is QuantizedMaxError(min, max, bits).
// NaN, ±Inf and v outside [min, max] are refused with ErrOutOfRange, as is an
// empty or infinite range; a bits outside 1..32, or a range so far from zero
// that binary64 cannot resolve its steps, with ErrWidth.
func (w *Writer) WriteQuantized(v, min, max float64, bits uint) error {
	if !quantOK(min, max, bits) {
		_, err := quantParams(min, max, bits)
		return w.fail(err)
	}
	l := uint64(1)<<bits - 1
	if !(v >= min && v <= max) {
		return w.fail(ErrOutOfRange)
	}
	q := uint64(float64((v-min)*(float64(l)/(max-min))) + 0.5)
	if q > l {
		q = l
	}
	if w.tryPut(q, bits) {
		return nil
	}
	return w.writeBitsSlow(q, bits)
}

// ReadQuantized reads a value written by WriteQuantized with the same min, max
// and bits: min + q·((max−min)/L), exactly max for the top code.
func (r *Reader) ReadQuantized(min, max float64, bits uint, field string) (float64, error) {
	if !quantOK(min, max, bits) {
		_, err := quantParams(min, max, bits)
		return 0, r.errAt(field, r.bit, err)
	}
	l := uint64(1)<<bits - 1
	q, ok := r.TryReadBits(bits)
	if !ok {
		var err error
		if q, err = r.readBitsSlow(bits, field); err != nil {
			return 0, err
		}
	}
	return dequantize(q, l, min, max), nil
}

func dequantize(q, l uint64, min, max float64) float64 {
	if q >= l {
		return max
	}
	return min + float64(float64(int64(q))*((max-min)/float64(l))) // < max: q < L; q < 2^32
}

// QuantizedMaxError is the largest |decoded − v| WriteQuantized can cause for
// v ∈ [min, max]: half a step, (max−min)/(2·(2^bits−1)), plus a tiny allowance
// for binary64 rounding. It returns NaN for parameters WriteQuantized refuses.
func QuantizedMaxError(min, max float64, bits uint) float64 {
	l, err := quantParams(min, max, bits)
	if err != nil {
		return math.NaN()
	}
	step := (max - min) / float64(l)
	return step/2 + slack(step, magnitude(min, max))
}

// WriteUnitFloat writes v ∈ [0, 1] in bits (1..32) bits: WriteQuantized(v, 0,
// 1, bits). 0 and 1 are exact. Torque's writeFloat(0.45, 5) is
// WriteUnitFloat(0.45, 5), decoding to 14/31.
func (w *Writer) WriteUnitFloat(v float64, bits uint) error {
	return w.WriteQuantized(v, 0, 1, bits)
}

// ReadUnitFloat reads a value written by WriteUnitFloat.
func (r *Reader) ReadUnitFloat(bits uint, field string) (float64, error) {
	return r.ReadQuantized(0, 1, bits, field)
}

// UnitFloatMaxError is QuantizedMaxError(0, 1, bits).
func UnitFloatMaxError(bits uint) float64 { return QuantizedMaxError(0, 1, bits) }

// symParams validates the width of a symmetric quantizer (2..32 bits) and
// returns m = 2^(bits−1)−1, its largest magnitude.
func symParams(bits uint) (int64, bool) {
	if bits-2 > MaxQuantBits-2 {
		return 0, false
	}
	return int64(1)<<(bits-1) - 1, true
}

// roundSym rounds x half away from zero and clamps it to [−m, m]:
// sign(x)·⌊|x| + 0.5⌋, computed as trunc(x ± 0.5) (the same binary64 sum,
// mirrored), without a branch on the sign. Symmetric rounding keeps
// encode(−v) = −encode(v), so mirrored values stay mirrored on the wire.
// |x| must be well inside the int64 range.
func roundSym(x float64, m int64) int64 {
	// Callers pass products (v·m): round x first, or Go fuses the product
	// into the sum below (an FMA on arm64, ppc64, s390x, GOAMD64=v3).
	x = float64(x)
	return max(-m, min(int64(x+math.Copysign(0.5, x)), m))
}

// roundAway is roundSym without the clamp: x rounded half away from zero.
// |x| must be well inside the int64 range.
func roundAway(x float64) int64 {
	x = float64(x) // see roundSym
	return int64(x + math.Copysign(0.5, x))
}

// WriteSignedFloat writes v ∈ [−1, 1] in bits (2..32) bits with a symmetric
// quantizer: k = round(v·m) with m = 2^(bits−1)−1, sent as k+m. −1, 0 and 1
// are exact; the code 2^bits−1 is never sent, and a reader rejects it.
// The worst-case error is SignedFloatMaxError(bits).
func (w *Writer) WriteSignedFloat(v float64, bits uint) error {
	m, ok := symParams(bits)
	if !ok {
		return w.fail(ErrWidth)
	}
	if !(v >= -1 && v <= 1) {
		return w.fail(ErrOutOfRange)
	}
	c := uint64(roundSym(v*float64(m), m) + m)
	if w.tryPut(c, bits) {
		return nil
	}
	return w.writeBitsSlow(c, bits)
}

// ReadSignedFloat reads a value written by WriteSignedFloat: (c−m)/m. The
// unused top code is rejected with ErrOutOfRange.
func (r *Reader) ReadSignedFloat(bits uint, field string) (float64, error) {
	m, ok := symParams(bits)
	if !ok {
		return 0, r.errAt(field, r.bit, ErrWidth)
	}
	at := r.bit
	c, ok := r.TryReadBits(bits)
	if !ok {
		var err error
		if c, err = r.readBitsSlow(bits, field); err != nil {
			return 0, err
		}
	}
	if c > uint64(2*m) {
		return 0, r.fail(field, at, ErrOutOfRange)
	}
	return float64(int64(c)-m) / float64(m), nil
}

// SignedFloatMaxError is the largest |decoded − v| WriteSignedFloat can cause:
// 1/(2m) plus a tiny allowance for rounding; NaN for a bad width.
func SignedFloatMaxError(bits uint) float64 {
	m, ok := symParams(bits)
	if !ok {
		return math.NaN()
	}
	step := 1 / float64(m)
	return step/2 + slack(step, 1)
}

// fixedParams validates a precision quantizer and returns its step count S
// (the top code) and width RangeBits(0, S). Checklist E-1: [−2000, 2000] at 0.1
// has S = 40000, i.e. 40001 values, 16 bits. Kept cheap (one division, no
// math.Floor/Max calls): it runs on every WriteFixed and ReadFixed.
func fixedParams(min, max, precision float64) (uint64, uint, error) {
	d := max - min
	if !(min < max && d <= math.MaxFloat64 && precision > 0 && precision <= math.MaxFloat64) {
		return 0, 0, ErrOutOfRange
	}
	s := d/precision + 0.5
	if !(s < 1<<MaxQuantBits) || precision*resolution < math.Abs(min) || precision*resolution < math.Abs(max) {
		return 0, 0, ErrWidth
	}
	steps := uint64(s) // ⌊(max−min)/precision + 0.5⌋: s ≥ 0.5, so truncation is floor
	return steps, uint(bits.Len64(steps)), nil
}

// fixedSteps is fixedParams' fast path, small enough to inline: the same
// checks in one expression, without saying which failed (the caller asks
// fixedParams then).
func fixedSteps(min, max, precision float64) (uint64, bool) {
	// Fewer tests than fixedParams, same verdict: an infinite range makes s
	// infinite or NaN; a zero, negative or NaN precision fails r ≥ |min| and
	// r ≥ |max| (one of them is non-zero since min < max) or s < 2^32.
	s := (max-min)/precision + 0.5
	r := precision * resolution
	ok := min < max && precision <= math.MaxFloat64 && s < 1<<MaxQuantBits && r >= math.Abs(min) && r >= math.Abs(max)
	return uint64(int64(s)), ok
}

// WriteFixed writes v ∈ [min, max] as a fixed-point count of precision steps
// above min, rounded to the nearest: q = ⌊(v−min)/precision + 0.5⌋, capped at
// S = ⌊(max−min)/precision + 0.5⌋, in RangeBits(0, S) bits (0 bits when S = 0).
// So [−2000, 2000] at precision 0.1 takes 16 bits and 2000 encodes as 40000
// (checklist BS-7, E-1, E-14). The worst-case error is precision/2
// (FixedMaxError). Refusals are as for WriteQuantized; precision must be
// finite and positive (ErrOutOfRange) and S below 2^32 (ErrWidth).
func (w *Writer) WriteFixed(v, min, max, precision float64) error {
	steps, ok := fixedSteps(min, max, precision)
	if !ok {
		_, _, err := fixedParams(min, max, precision)
		return w.fail(err)
	}
	if !(v >= min && v <= max) {
		return w.fail(ErrOutOfRange)
	}
	n := uint(bits.Len64(steps))
	if n == 0 {
		return nil
	}
	q := uint64((v-min)/precision + 0.5)
	if q > steps {
		q = steps
	}
	if w.tryPut(q, n) {
		return nil
	}
	return w.writeBitsSlow(q, n)
}

// ReadFixed reads a value written by WriteFixed with the same parameters:
// min + q·precision, capped at max. A code above S is rejected with
// ErrOutOfRange.
func (r *Reader) ReadFixed(min, max, precision float64, field string) (float64, error) {
	steps, ok := fixedSteps(min, max, precision)
	if !ok {
		_, _, err := fixedParams(min, max, precision)
		return 0, r.errAt(field, r.bit, err)
	}
	n := uint(bits.Len64(steps))
	if n == 0 {
		return min, nil
	}
	at := r.bit
	q, ok := r.TryReadBits(n)
	if !ok {
		var err error
		if q, err = r.readBitsSlow(n, field); err != nil {
			return 0, err
		}
	}
	if q > steps {
		return 0, r.fail(field, at, ErrOutOfRange)
	}
	v := min + float64(float64(int64(q))*precision) // q < 2^32: the signed conversion is exact and cheaper
	if v > max {
		v = max
	}
	return v, nil
}

// FixedBits is the width WriteFixed uses for these parameters, or 0 when it
// would refuse them (or when S = 0 and the value is implied).
func FixedBits(min, max, precision float64) uint {
	_, n, err := fixedParams(min, max, precision)
	if err != nil {
		return 0
	}
	return n
}

// FixedMaxError is the largest |decoded − v| WriteFixed can cause: half a
// precision step plus a tiny allowance for rounding; NaN for refused parameters.
func FixedMaxError(min, max, precision float64) float64 {
	if _, _, err := fixedParams(min, max, precision); err != nil {
		return math.NaN()
	}
	return precision/2 + slack(precision, magnitude(min, max))
}

// WriteFloat32 writes v as its 32 IEEE-754 binary32 bits (math.Float32bits,
// least significant bit first like every field). NaN and ±Inf are refused with
// ErrOutOfRange: a non-finite value on the wire poisons whatever simulates it.
// Use WriteBits(uint64(math.Float32bits(v)), 32) to send one deliberately.
func (w *Writer) WriteFloat32(v float32) error {
	u := math.Float32bits(v)
	if u&0x7f800000 == 0x7f800000 {
		return w.fail(ErrOutOfRange)
	}
	if w.tryPut(uint64(u), 32) {
		return nil
	}
	return w.writeBitsSlow(uint64(u), 32)
}

// ReadFloat32 reads a value written by WriteFloat32; NaN and ±Inf bit patterns
// are rejected with ErrOutOfRange.
func (r *Reader) ReadFloat32(field string) (float32, error) {
	at := r.bit
	u, ok := r.TryReadBits(32)
	if !ok {
		var err error
		if u, err = r.readBitsSlow(32, field); err != nil {
			return 0, err
		}
	}
	if u&0x7f800000 == 0x7f800000 {
		return 0, r.fail(field, at, ErrOutOfRange)
	}
	return math.Float32frombits(uint32(u)), nil
}
