package bitstream

import "math"

// Directions and rotations. The math is in docs/protocol.md §2;
// both encodings work on integers wherever they can so the decoded floats are
// the same on every platform.

// --- unit vectors: octahedral encoding ---------------------------------------
//
// A direction is projected onto the octahedron |x|+|y|+|z| = 1, the lower half
// (z < 0) folded over the upper half's edges, and the resulting point of the
// square [−1, 1]² quantized with two symmetric quantizers (Cigolle et al.,
// "A Survey of Efficient Representations for Independent Unit Vectors", JCGT
// 2014). It spends the bits far more evenly over the sphere than angles or
// three clamped components, and axis directions are exact.

// WriteUnitVector writes the direction of (x, y, z) in 2·bits bits (bits per
// component 2..32): the octahedral codes a, b ∈ [−m, m] (m = 2^(bits−1)−1) as
// a+m then b+m. The vector need not be normalized; only its direction is
// kept. A zero, non-finite or overflowing vector (|x|+|y|+|z| not a positive
// finite binary64) is refused with ErrOutOfRange. The worst-case angle between
// the input and the decoded direction is UnitVectorMaxAngle(bits).
func (w *Writer) WriteUnitVector(x, y, z float64, bits uint) error {
	m, ok := symParams(bits)
	if !ok {
		return w.fail(ErrWidth)
	}
	a, b, ok := octEncode(x, y, z, m)
	if !ok {
		return w.fail(ErrOutOfRange)
	}
	c := uint64(a+m) | uint64(b+m)<<(bits&63) // bits ≤ 32: the mask only drops the code for shifts of 64
	if w.tryPut(c, 2*bits) {
		return nil
	}
	return w.writeBitsSlow(c, 2*bits)
}

// ReadUnitVector reads a direction written by WriteUnitVector; the result has
// unit length (to binary64 rounding). The unused top code and the
// non-canonical codes of the folded edges (see octDecode) are rejected with
// ErrOutOfRange, so every accepted encoding re-encodes to the same bits.
func (r *Reader) ReadUnitVector(bits uint, field string) (x, y, z float64, err error) {
	m, ok := symParams(bits)
	if !ok {
		return 0, 0, 0, r.errAt(field, r.bit, ErrWidth)
	}
	at := r.bit
	c, ok := r.TryReadBits(2 * bits)
	if !ok {
		if c, err = r.readBitsSlow(2*bits, field); err != nil {
			return 0, 0, 0, err
		}
	}
	mask := uint64(1)<<(bits&63) - 1
	ca, cb := c&mask, c>>(bits&63)&mask
	if ca > uint64(2*m) || cb > uint64(2*m) {
		return 0, 0, 0, r.fail(field, at, ErrOutOfRange)
	}
	x, y, z, ok = octDecode(int64(ca)-m, int64(cb)-m, m)
	if !ok {
		return 0, 0, 0, r.fail(field, at, ErrOutOfRange)
	}
	return x, y, z, nil
}

// signNZ is the sign with zero (and −0) counted as positive.
func signNZ(v float64) float64 {
	if v >= 0 {
		return 1
	}
	return -1
}

func abs64(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// octEncode maps a direction to its canonical octahedral codes.
func octEncode(x, y, z float64, m int64) (a, b int64, ok bool) {
	l1 := math.Abs(x) + math.Abs(y) + math.Abs(z)
	if !(l1 > 0 && l1 <= math.MaxFloat64) {
		return 0, 0, false
	}
	px, py := x/l1, y/l1
	if z < 0 { // fold the lower half over the diamond's edges
		px, py = (1-math.Abs(py))*signNZ(px), (1-math.Abs(px))*signNZ(py)
	}
	fm := float64(m)
	a, b = roundSym(px*fm, m), roundSym(py*fm, m)
	// On the square's border the fold identifies (±m, t) with (±m, −t) and
	// (t, ±m) with (−t, ±m), and all four corners with (0, 0, −1). Send the one
	// representative octDecode accepts, so decode∘encode is a bijection.
	if abs64(a)+abs64(b) > m {
		if abs64(a) == m && b < 0 {
			b = -b
		}
		if abs64(b) == m && a < 0 {
			a = -a
		}
	}
	return a, b, true
}

// octDecode maps codes back to a unit vector. It unfolds in integers (exact:
// |X|+|Y|+|Z| = m on both halves) and normalizes once. ok is false for the
// non-canonical border codes octEncode never sends.
func octDecode(a, b, m int64) (x, y, z float64, ok bool) {
	aa, ab := abs64(a), abs64(b)
	X, Y, Z := a, b, m-aa-ab
	if Z < 0 {
		if (aa == m && b < 0) || (ab == m && a < 0) {
			return 0, 0, 0, false
		}
		// Both a and b are non-zero here (aa+ab > m and each ≤ m).
		X, Y = m-ab, m-aa
		if a < 0 {
			X = -X
		}
		if b < 0 {
			Y = -Y
		}
	}
	// X²+Y²+Z² ≤ (|X|+|Y|+|Z|)² = m² < 2^62: exact in an int64.
	inv := 1 / math.Sqrt(float64(X*X+Y*Y+Z*Z))
	return float64(X) * inv, float64(Y) * inv, float64(Z) * inv, true
}

// UnitVectorMaxAngle is the worst-case angle in radians between a direction
// and its decoding at bits per component (NaN for a bad width). Derivation
// (docs/protocol.md §2): each square coordinate moves by at most
// e = 1/(2m); lifting to the octahedron is √3-Lipschitz, so the octahedron
// point moves by at most √6·e; normalizing from |p| ≥ 1/√3 at most doubles
// that over |p|, so the chord is at most 6√2·e.
func UnitVectorMaxAngle(bits uint) float64 {
	m, ok := symParams(bits)
	if !ok {
		return math.NaN()
	}
	e := 1 / (2 * float64(m))
	chord := 6 * math.Sqrt2 * e
	return 2*math.Asin(math.Min(1, chord/2)) + 1e-12
}

// --- quaternions: smallest three ----------------------------------------------
//
// A unit quaternion has one component of magnitude ≥ 1/2; the other three lie
// in [−1/√2, 1/√2]. Send the index of the largest (2 bits) and the other three
// quantized, and rebuild the largest as √(1 − Σc²). q and −q are the same
// rotation, so the sign is chosen to make the largest positive and costs no
// bit. (The book's "drop W" variant, BS-9, spends 3×16+1 = 49 bits and loses
// precision when W is small; this one is 47 bits at 15 bits per component.)

const (
	// QuatBits is the default bits per component: 2 + 3·15 = 47 bits per
	// quaternion.
	QuatBits = 15
	// MaxQuatBits is the widest component WriteQuatBits accepts, so that a
	// quaternion is one field of at most 62 bits.
	MaxQuatBits = 20
	// minQuatBits: below it the quantization is too coarse to be useful and
	// the error bounds' small-e assumptions (6e² ≤ e) fail.
	minQuatBits = 6
)

// quatM is m for QuatBits: the codes' bound.
const quatM = 1<<(QuatBits-1) - 1

// WriteQuat writes a rotation in 2 + 3·QuatBits = 47 bits; see
// WriteQuatBits, whose bits it writes with the width's shifts constant.
func (w *Writer) WriteQuat(q [4]float64) error {
	c, ok := quatField(&q)
	if !ok {
		return w.fail(ErrOutOfRange)
	}
	if w.tryPut(c, 2+3*QuatBits) {
		return nil
	}
	return w.writeBitsSlow(c, 2+3*QuatBits)
}

// ReadQuat reads a rotation written by WriteQuat, as ReadQuatBits(QuatBits)
// does.
func (r *Reader) ReadQuat(field string) (q [4]float64, err error) {
	at := r.bit
	c, ok := r.TryReadBits(2 + 3*QuatBits)
	if !ok {
		if c, err = r.readBitsSlow(2+3*QuatBits, field); err != nil {
			return q, err
		}
	}
	k0, k1, k2 := quatUnpack(c, quatM, QuatBits)
	if !quatFill(&q, c&3, k0, k1, k2, quatM, quatStep[QuatBits]) {
		return q, r.fail(field, at, ErrOutOfRange)
	}
	return q, nil
}

// WriteQuatBits writes the rotation q (components in any fixed order;
// ghostwire uses [x, y, z, w]) in 2 + 3·bits bits, bits per component 6..20.
// q need not be normalized (only its rotation is kept); a zero or non-finite
// q (Σq² not a positive finite binary64) is refused with ErrOutOfRange. q and −q encode identically. The
// worst-case rotation angle between q and its decoding is QuatMaxAngle(bits).
func (w *Writer) WriteQuatBits(q [4]float64, bits uint) error {
	if bits-minQuatBits > MaxQuatBits-minQuatBits {
		return w.fail(ErrWidth)
	}
	c, ok := quatEncode(q, bits)
	if !ok {
		return w.fail(ErrOutOfRange)
	}
	n := 2 + 3*bits
	if w.tryPut(c, n) {
		return nil
	}
	return w.writeBitsSlow(c, n)
}

// ReadQuatBits reads a rotation written by WriteQuatBits with the same bits.
// The result is a unit quaternion whose rebuilt (largest) component is
// positive. Rejected with ErrOutOfRange: a code equal to 2^bits−1 (never
// sent), and sent components that leave the rebuilt one not strictly the
// largest, Σk² + max k² ≥ 2m² (never sent: no unit quaternion has them, or
// they would re-encode differently), so every accepted field is canonical.
func (r *Reader) ReadQuatBits(bits uint, field string) ([4]float64, error) {
	if bits-minQuatBits > MaxQuatBits-minQuatBits {
		return [4]float64{}, r.errAt(field, r.bit, ErrWidth)
	}
	at := r.bit
	n := 2 + 3*bits
	c, ok := r.TryReadBits(n)
	if !ok {
		var err error
		if c, err = r.readBitsSlow(n, field); err != nil {
			return [4]float64{}, err
		}
	}
	q, ok := quatDecode(c, bits)
	if !ok {
		return [4]float64{}, r.fail(field, at, ErrOutOfRange)
	}
	return q, nil
}

// quatOthers lists, for each dropped index, the sent indices in order.
// A read-only lookup table.
var quatOthers = [4][3]uint8{{1, 2, 3}, {0, 2, 3}, {0, 1, 3}, {0, 1, 2}}

// quatEncode returns the packed field: index in bits 0..1, then the other
// three components in increasing index order, each as code k+m in bits bits.
func quatEncode(q [4]float64, bits uint) (uint64, bool) {
	// bits ∈ [6, 20] here and in quatDecode: every shift masked by 63 is the
	// same shift without Go's code for counts of 64 and more.
	m := int64(1)<<((bits-1)&63) - 1
	i, k0, k1, k2, ok := quatCodes(&q, m)
	return quatPack(i, k0, k1, k2, m, bits), ok
}

// quatPack packs quatCodes' index and codes into the field. Small enough to
// inline: with bits a constant (WriteQuat's) its shifts are constants.
func quatPack(i int, k0, k1, k2, m int64, bits uint) uint64 {
	return uint64(i) | uint64(k0+m)<<2 | uint64(k1+m)<<((2+bits)&63) | uint64(k2+m)<<((2+2*bits)&63)
}

// quatCodes is quatEncode before the packing: the dropped index and the
// three sent codes in [−m, m], m = 2^(bits−1) − 1; ok is false for a zero
// or non-finite q. (Separate results, not an array: an array result goes
// through memory.)
func quatCodes(q *[4]float64, m int64) (i int, k0, k1, k2 int64, ok bool) {
	ss := float64(q[0]*q[0]) + float64(q[1]*q[1]) + float64(q[2]*q[2]) + float64(q[3]*q[3])
	if !(ss > 0 && ss <= math.MaxFloat64) { // zero, NaN, ±Inf, overflow
		return 0, 0, 0, 0, false
	}
	// i: the component of largest magnitude, the lowest index on a tie.
	// Comparing the magnitudes' bit patterns (ordered like the values for
	// finite floats) compiles to conditional moves, not branches that
	// mispredict on random rotations.
	const absMask = 1<<63 - 1
	a0, a1 := math.Float64bits(q[0])&absMask, math.Float64bits(q[1])&absMask
	a2, a3 := math.Float64bits(q[2])&absMask, math.Float64bits(q[3])&absMask
	i01, m01 := 0, a0
	if a1 > a0 {
		i01, m01 = 1, a1
	}
	i23, m23 := 2, a2
	if a3 > a2 {
		i23, m23 = 3, a3
	}
	i = i01
	if m23 > m01 {
		i = i23
	}
	// Scale so the sent components land in [−m, m] code units, with the
	// sign that makes the dropped component positive (q and −q are one
	// rotation): x = q_j · (±√2·m/|q|). A quaternion already normalized in
	// binary64 (|Σq² − 1| ≤ 2^-40; rounding leaves ~2^-52) skips the square
	// root and division, which are most of the encoder's latency; the 2^-41
	// relative error that admits is far inside the error bound's slack.
	t := math.Sqrt2 * float64(m)
	if math.Abs(ss-1) > 0x1p-40 {
		t /= math.Sqrt(ss)
	}
	t = math.Copysign(t, q[i]) // q[i] ≠ 0; no branch on a random sign
	o := &quatOthers[i&3]
	x0, x1, x2 := q[o[0]&3]*t, q[o[1]&3]*t, q[o[2]&3]*t
	// Rounded half away from zero as roundSym, without its clamp to
	// [−m, m]: a code past m (possible only when Σq² was rounded far from
	// |q|², a quaternion of subnormal components) makes the codes
	// non-canonical either way (2(m+1)² > 2m² unclamped, 2m² clamped), and
	// both go to quatTowardZero with the same x, which clamps; otherwise
	// the clamp changes nothing.
	k0, k1, k2 = roundAway(x0), roundAway(x1), roundAway(x2)
	if !quatCanonical([3]int64{k0, k1, k2}, m) {
		k0, k1, k2 = quatTowardZero(x0, x1, x2, m)
	}
	return i, k0, k1, k2, true
}

// quatScale is quatCodes' √2·m for QuatBits, rounded as quatCodes rounds
// it at run time (math.Sqrt2 in binary64 times m, one rounding): a
// constant expression would round the exact product once, which may differ
// in the last bit. Set once at package initialisation; read-only.
var quatScale = func() float64 {
	s, m := float64(math.Sqrt2), float64(quatM)
	return s * m
}()

// quatField is WriteQuat's 47-bit field: quatCodes and quatPack with the
// width QuatBits fixes, so m, √2·m and the canonical bound 2m² are
// constants and the field is packed here — the same bits for every q
// (TestQuatFieldMatchesCodes, FuzzQuatField). ok is false for a zero or
// non-finite q.
func quatField(q *[4]float64) (c uint64, ok bool) {
	ss := float64(q[0]*q[0]) + float64(q[1]*q[1]) + float64(q[2]*q[2]) + float64(q[3]*q[3])
	if !(ss > 0 && ss <= math.MaxFloat64) { // zero, NaN, ±Inf, overflow
		return 0, false
	}
	// The largest magnitude, the lowest index on a tie (see quatCodes).
	const absMask = 1<<63 - 1
	a0, a1 := math.Float64bits(q[0])&absMask, math.Float64bits(q[1])&absMask
	a2, a3 := math.Float64bits(q[2])&absMask, math.Float64bits(q[3])&absMask
	i01, m01 := uint(0), a0
	if a1 > a0 {
		i01, m01 = 1, a1
	}
	i23, m23 := uint(2), a2
	if a3 > a2 {
		i23, m23 = 3, a3
	}
	i := i01
	if m23 > m01 {
		i = i23
	}
	t := quatScale
	if math.Abs(ss-1) > 0x1p-40 {
		t /= math.Sqrt(ss)
	}
	t = math.Copysign(t, q[i&3])
	o := &quatOthers[i&3]
	x0, x1, x2 := q[o[0]&3]*t, q[o[1]&3]*t, q[o[2]&3]*t
	k0, k1, k2 := roundAway(x0), roundAway(x1), roundAway(x2)
	if s := k0*k0 + k1*k1 + k2*k2; s+max(k0*k0, k1*k1, k2*k2) >= 2*quatM*quatM { // !quatCanonical
		k0, k1, k2 = quatTowardZero(x0, x1, x2, quatM)
	}
	return uint64(i) | uint64(k0+quatM)<<2 | uint64(k1+quatM)<<(2+QuatBits) | uint64(k2+quatM)<<(2+2*QuatBits), true
}

// quatTowardZero is quatCodes' rare path. Rounding to nearest can leave a
// sent component at or above the rebuilt one (only when another component
// is within a few steps of the largest), and the field would re-encode
// with another index. Rounded toward zero instead, every |c'| ≤ |c|, so
// the rebuilt √(1−Σc'²) ≥ the true largest ≥ every |c'|; if that is an
// exact tie (a quaternion exactly on the grid), step the tied codes once
// more toward zero. (Its own function, so quatCodes keeps its scaled
// components and codes in registers.)
func quatTowardZero(x0, x1, x2 float64, m int64) (k0, k1, k2 int64) {
	x := [3]float64{x0, x1, x2}
	var k [3]int64
	for j := range k {
		k[j] = max(-m, min(int64(x[j]), m))
	}
	for !quatCanonical(k, m) {
		room := 2*m*m - (k[0]*k[0] + k[1]*k[1] + k[2]*k[2])
		for j := range k {
			if k[j]*k[j] >= room {
				k[j] -= sign64(k[j])
			}
		}
	}
	return k[0], k[1], k[2]
}

// quatCanonical reports whether the rebuilt component is strictly larger
// than every sent one: with c = k/(√2·m), w² = 1 − Σc² > c_j² ⇔
// Σk² + k_j² < 2m². Exact in integers (≤ 2^40), so encoder and decoder — in
// any language — agree, and the strict integer gap keeps the decoded floats
// strictly ordered, so decode∘encode is the identity.
func quatCanonical(k [3]int64, m int64) bool {
	top := max(k[0]*k[0], k[1]*k[1], k[2]*k[2])
	return k[0]*k[0]+k[1]*k[1]+k[2]*k[2]+top < 2*m*m
}

func sign64(v int64) int64 {
	if v < 0 {
		return -1
	}
	return 1
}

// quatDecode unpacks a field; ok is false for an unused code or a
// non-canonical field (see quatCanonical), which no encoder sends.
func quatDecode(c uint64, bits uint) (q [4]float64, ok bool) {
	m := int64(1)<<((bits-1)&63) - 1
	k0, k1, k2 := quatUnpack(c, m, bits)
	return quatFromCodes(c&3, k0, k1, k2, m, quatStep[bits])
}

// quatUnpack is the three sent codes of a field, as k − m. Small enough to
// inline: with bits a constant (ReadQuat's) its shifts are constants.
func quatUnpack(c uint64, m int64, bits uint) (k0, k1, k2 int64) {
	mask := uint64(1)<<(bits&63) - 1
	return int64(c>>2&mask) - m, int64(c>>((2+bits)&63)&mask) - m, int64(c>>((2+2*bits)&63)&mask) - m
}

// quatFromCodes is quatDecode after the unpacking: i the dropped index, k
// the sent codes, m their bound and d = quatStep[bits].
func quatFromCodes(i uint64, k0, k1, k2, m int64, d float64) (q [4]float64, ok bool) {
	ok = quatFill(&q, i, k0, k1, k2, m, d)
	return q, ok
}

// quatFill is quatFromCodes writing into *q, which a caller returning the
// rotation passes as its own result (an array result goes through memory:
// one copy instead of two). *q is left unchanged when ok is false.
func quatFill(q *[4]float64, i uint64, k0, k1, k2, m int64, d float64) bool {
	// quatCanonical. It also refuses a code past m, the unused top code
	// 2^bits − 1: unpacked codes are at most m+1, and k = m+1 gives
	// Σk² + max k² ≥ 2(m+1)² > 2m², so no test of its own.
	s := k0*k0 + k1*k1 + k2*k2
	if s+max(k0*k0, k1*k1, k2*k2) >= 2*m*m {
		return false
	}
	i &= 3
	o := &quatOthers[i]
	q[o[0]&3] = float64(k0) * d
	q[o[1]&3] = float64(k1) * d
	q[o[2]&3] = float64(k2) * d
	// w = √(1 − Σc²) = √(2m² − Σk²)·d: the radicand is an exact integer
	// (positive: canonical), so no division and only two roundings.
	q[i] = math.Sqrt(float64(2*m*m-s)) * d
	return true
}

// quatStep[bits] is the decoded size of one code step, d = √2/(2m): the
// binary64 constant math.Sqrt2 divided by 2m in binary64. Filled once at
// package initialisation and never written again.
var quatStep = func() (t [MaxQuatBits + 1]float64) {
	for b := minQuatBits; b <= MaxQuatBits; b++ {
		t[b] = math.Sqrt2 / float64(2*(int64(1)<<(b-1)-1))
	}
	return t
}()

// QuatMaxAngle is the worst-case rotation angle in radians between a
// quaternion and its decoding at bits per component (NaN for a bad width):
// 4·asin(2√3·e) with e = 1/(2√2·m), half a step of a sent component, plus
// 1e-11 rad for binary64 rounding. At 15 bits that is 2.99e-4 rad (0.017°).
// Derivation (docs/protocol.md §2): rounded to nearest, each
// sent component moves by ≤ e and the rebuilt one by ≤ (2·(√3/2)·√3e + 3e²)/(1/2)
// = 6e+6e²; rounded toward zero (near ties), by ≤ 2e and ≤ 6e. The 4-D
// distance D is then at most √48·e, and two unit quaternions D apart are
// rotations 4·asin(D/2) apart.
func QuatMaxAngle(bits uint) float64 {
	if bits-minQuatBits > MaxQuatBits-minQuatBits {
		return math.NaN()
	}
	e := 1 / (2 * math.Sqrt2 * float64(int64(1)<<(bits-1)-1))
	return 4*math.Asin(2*math.Sqrt(3)*e*(1+1e-9)) + 1e-11
}

// QuatAngle is the rotation angle in radians between the rotations a and b
// (unit quaternions; a and −a are the same rotation), accurate for small
// angles: 4·asin(|a ∓ b|/2), with the sign that brings b closer to a.
func QuatAngle(a, b [4]float64) float64 {
	dot := a[0]*b[0] + a[1]*b[1] + a[2]*b[2] + a[3]*b[3]
	s := 1.0
	if dot < 0 {
		s = -1
	}
	var d2 float64
	for j := range 4 {
		d := a[j] - s*b[j]
		d2 += d * d
	}
	return 4 * math.Asin(math.Min(1, math.Sqrt(d2)/2))
}
