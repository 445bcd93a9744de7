package bitstream

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

// argmaxAbs is the index of the component of largest magnitude, the lowest
// index on a tie (the encoder's rule, written plainly).
func argmaxAbs(n [4]float64) int {
	i := 0
	for j := 1; j < 4; j++ {
		if math.Abs(n[j]) > math.Abs(n[i]) {
			i = j
		}
	}
	return i
}

// randomQuat is uniform over rotations (four Gaussians, normalized).
func randomQuat(rng *rand.Rand) [4]float64 {
	var q [4]float64
	normalize(q[:], []float64{rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()})
	return q
}

func encodeQuat(t *testing.T, q [4]float64, bits uint) uint64 {
	t.Helper()
	w := NewWriter(make([]byte, 16))
	if err := w.WriteQuatBits(q, bits); err != nil {
		t.Fatalf("WriteQuatBits(%v, %d): %v", q, bits, err)
	}
	if w.BitLen() != int(2+3*bits) {
		t.Fatalf("quaternion took %d bits, want %d", w.BitLen(), 2+3*bits)
	}
	c, _ := NewReader(w.Bytes()).ReadBits(2+3*bits, "c")
	return c
}

func decodeQuat(c uint64, bits uint) ([4]float64, error) {
	w := NewWriter(make([]byte, 16))
	_ = w.WriteBits(c, 2+3*bits)
	return NewReader(w.Bytes()).ReadQuatBits(bits, "rot")
}

// BS-9 (smallest-three variant): 47 bits at the default width, within the
// documented angular bound over 10^5 random rotations; and the errors of the
// sent components are those of rounding to nearest — mean ≈ 0 and RMS ≈
// half-step/√3 — which a truncating or mis-scaled quantizer would miss.
func TestQuatAngularError(t *testing.T) {
	w := NewWriter(make([]byte, 16))
	if err := w.WriteQuat([4]float64{0, 0, 0, 1}); err != nil || w.BitLen() != 47 {
		t.Fatalf("WriteQuat: %v, %d bits, want 47", err, w.BitLen())
	}
	bound := QuatMaxAngle(QuatBits)
	if bound > 3.0e-4 || bound < 2.9e-4 {
		t.Fatalf("QuatMaxAngle(15) = %g, documented as 2.99e-4", bound)
	}
	rng := rand.New(rand.NewPCG(42, 47))
	e := 1 / (2 * math.Sqrt2 * float64(int64(1)<<(QuatBits-1)-1))
	var worst, sumErr, sumSq float64
	var nErr int
	var r Reader
	for range 100000 {
		q := randomQuat(rng)
		w.Reset(w.buf)
		if err := w.WriteQuat(q); err != nil {
			t.Fatal(err)
		}
		r.Reset(w.Bytes())
		got, err := r.ReadQuat("rot")
		if err != nil {
			t.Fatalf("%v: %v", q, err)
		}
		a := QuatAngle(q, got)
		if !(a <= bound) {
			t.Fatalf("%v → %v: angle %g above bound %g", q, got, a, bound)
		}
		worst = math.Max(worst, a)
		// Per-component error of the three sent components, in the
		// canonical sign.
		i := argmaxAbs(q)
		s := 1.0
		if q[i] < 0 {
			s = -1
		}
		for j := range 4 {
			if j != i {
				d := got[j] - s*q[j]
				sumErr += d
				sumSq += d * d
				nErr++
			}
		}
		if got[i] < 0 {
			t.Fatalf("%v decoded with a negative largest component: %v", q, got)
		}
	}
	mean, rms := sumErr/float64(nErr), math.Sqrt(sumSq/float64(nErr))
	if math.Abs(mean) > 0.02*e {
		t.Errorf("mean component error %g: biased (half-step %g)", mean, e)
	}
	if want := e / math.Sqrt(3); math.Abs(rms-want) > 0.03*want {
		t.Errorf("RMS component error %g, want %g ± 3%% (uniform rounding noise)", rms, want)
	}
	t.Logf("worst angle %.3g rad over 1e5 rotations (bound %.3g)", worst, bound)
}

// q and −q are the same rotation and encode to the same bits.
func TestQuatSignCanonical(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 2000 {
		q := randomQuat(rng)
		neg := [4]float64{-q[0], -q[1], -q[2], -q[3]}
		if a, b := encodeQuat(t, q, QuatBits), encodeQuat(t, neg, QuatBits); a != b {
			t.Fatalf("%v encodes to %#x, its negation to %#x", q, a, b)
		}
	}
}

// decode∘encode is the identity on encoder output, including at ties, where
// the decoded largest component could otherwise lose its place.
func TestQuatReencodeIsIdempotent(t *testing.T) {
	h := 0.5
	s := math.Sqrt2 / 2
	cases := [][4]float64{
		{h, h, h, h}, {-h, h, -h, h}, {h, h, h, -h},
		{s, s, 0, 0}, {0, s, -s, 0}, {0, 0, s, s},
		{1, 0, 0, 0}, {0, 0, 0, -1},
		{1, 1, 1, 1.0000001}, {1, 1, 1, 0.9999999}, {1, 1.0000001, 0, 0}, {0.3, 0.3, 0.3, 0.3 - 1e-5},
		{0.6, 0.6, 0.3, 0.1}, {0.6, -0.6, 0.3, 0.1},
	}
	rng := rand.New(rand.NewPCG(8, 9))
	for range 20000 {
		// near-ties: two or more components almost equal
		q := randomQuat(rng)
		q[1] = q[0] * (1 + (rng.Float64()-0.5)*1e-3)
		if rng.IntN(2) == 0 {
			q[2] = -q[0] * (1 + (rng.Float64()-0.5)*1e-3)
		}
		cases = append(cases, q)
	}
	for _, bits := range []uint{6, 9, 13, QuatBits, 20} {
		for _, q := range cases {
			c := encodeQuat(t, q, bits)
			got, err := decodeQuat(c, bits)
			if err != nil {
				t.Fatalf("%d bits: %v encoded as %#x, which the reader rejects: %v", bits, q, c, err)
			}
			var unit [4]float64
			normalize(unit[:], q[:])
			if a := QuatAngle(unit, got); !(a <= QuatMaxAngle(bits)) {
				t.Fatalf("%d bits: %v → %v: angle %g above bound %g", bits, q, got, a, QuatMaxAngle(bits))
			}
			if c2 := encodeQuat(t, got, bits); c2 != c {
				t.Fatalf("%d bits: %v → %#x → %v → %#x", bits, q, c, got, c2)
			}
		}
	}
}

func TestQuatRefusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		q    [4]float64
		bits uint
		want error
	}{
		{"zero", [4]float64{}, QuatBits, ErrOutOfRange},
		{"NaN", [4]float64{math.NaN(), 0, 0, 1}, QuatBits, ErrOutOfRange},
		{"Inf", [4]float64{0, math.Inf(-1), 0, 1}, QuatBits, ErrOutOfRange},
		{"overflowing norm", [4]float64{1e200, 1e200, 0, 0}, QuatBits, ErrOutOfRange},
		{"underflowing norm", [4]float64{1e-200, 0, 0, 0}, QuatBits, ErrOutOfRange},
		{"5 bits", [4]float64{0, 0, 0, 1}, 5, ErrWidth},
		{"21 bits", [4]float64{0, 0, 0, 1}, 21, ErrWidth},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := NewWriter(make([]byte, 16))
			if err := w.WriteQuatBits(tc.q, tc.bits); !errors.Is(err, tc.want) || w.BitLen() != 0 {
				t.Fatalf("err %v, BitLen %d; want %v", err, w.BitLen(), tc.want)
			}
		})
	}
	if !math.IsNaN(QuatMaxAngle(5)) {
		t.Fatal("QuatMaxAngle(5) is not NaN")
	}
	// Unnormalized input encodes its rotation.
	if a, b := encodeQuat(t, [4]float64{0, 0, 3, 4}, QuatBits), encodeQuat(t, [4]float64{0, 0, 0.6, 0.8}, QuatBits); a != b {
		t.Fatalf("scaled quaternion encodes differently: %#x vs %#x", a, b)
	}
	const bits = QuatBits
	m := uint64(1)<<(bits-1) - 1
	pack := packQuatCode
	for _, bad := range []struct {
		name string
		c    uint64
	}{
		{"unused top code", pack(3, 1<<bits-1, m, m)},
		{"components beyond the unit sphere", pack(0, 2*m, 2*m, 2*m)},
		{"a sent component larger than the rebuilt one", pack(0, 2*m, m+m/2, m)},
		{"a sent component tied with the rebuilt one at a lower index", pack(1, 2*m, m, m)},
		{"tie resolved to a lower index", pack(1, 2*m, 2*m, m)},
	} {
		t.Run(bad.name, func(t *testing.T) {
			if _, err := decodeQuat(bad.c, bits); !errors.Is(err, ErrOutOfRange) {
				t.Fatalf("%#x: %v, want ErrOutOfRange", bad.c, err)
			}
		})
	}
}

func TestUnitVectorError(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 11))
	for _, bits := range []uint{4, 8, 12, 16, 22, 32} {
		bound := UnitVectorMaxAngle(bits)
		var worst float64
		w := NewWriter(make([]byte, 16))
		var r Reader
		for i := range 20000 {
			var v [3]float64
			normalize(v[:], []float64{rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()})
			if i < 6 { // the axes are exact
				v = [3]float64{}
				v[i/2] = float64(1 - 2*(i%2))
			}
			w.Reset(w.buf)
			if err := w.WriteUnitVector(v[0], v[1], v[2], bits); err != nil || w.BitLen() != int(2*bits) {
				t.Fatalf("%d bits: write %v: %v, %d bits", bits, v, err, w.BitLen())
			}
			r.Reset(w.Bytes())
			var got [3]float64
			var err error
			got[0], got[1], got[2], err = r.ReadUnitVector(bits, "dir")
			if err != nil {
				t.Fatalf("%d bits: %v: %v", bits, v, err)
			}
			a := vecAngle(v, got)
			if !(a <= bound) || (i < 6 && got != v) {
				t.Fatalf("%d bits: %v → %v: angle %g, bound %g", bits, v, got, a, bound)
			}
			worst = math.Max(worst, a)
		}
		t.Logf("%d bits per component: worst %.3g rad, bound %.3g", bits, worst, bound)
	}
}

// Exhaustively at 6 bits per component: every code pair is either rejected
// (the unused top code, or a non-canonical border code) or decodes to a unit
// vector that encodes back to the same code pair; and the accepted codes
// decode to distinct directions.
func TestUnitVectorCodesAreCanonical(t *testing.T) {
	const bits = 6
	const m = 1<<(bits-1) - 1
	seen := map[[3]float64]uint64{}
	rejected := 0
	for c := range uint64(1) << (2 * bits) {
		w := NewWriter(make([]byte, 8))
		_ = w.WriteBits(c, 2*bits)
		x, y, z, err := NewReader(w.Bytes()).ReadUnitVector(bits, "dir")
		if err != nil {
			if !errors.Is(err, ErrOutOfRange) {
				t.Fatalf("code %#x: %v", c, err)
			}
			rejected++
			continue
		}
		v := [3]float64{x, y, z}
		if prev, dup := seen[v]; dup {
			t.Fatalf("codes %#x and %#x both decode to %v", prev, c, v)
		}
		seen[v] = c
		w.Reset(w.buf)
		if err := w.WriteUnitVector(x, y, z, bits); err != nil {
			t.Fatal(err)
		}
		if back, _ := NewReader(w.Bytes()).ReadBits(2*bits, "c"); back != c {
			t.Fatalf("code %#x → %v → code %#x", c, v, back)
		}
	}
	// 2·64−1 codes use the top value of a or b; on the border, (±m, t<0) and
	// (t<0, ±m) for t ≠ 0 are not canonical: 2·(m−1)... counted directly:
	want := 0
	for a := -m; a <= m; a++ {
		for b := -m; b <= m; b++ {
			aa, ab := abs64(int64(a)), abs64(int64(b))
			if aa+ab > m && ((aa == m && b < 0) || (ab == m && a < 0)) {
				want++
			}
		}
	}
	want += 2*(1<<bits) - 1
	if rejected != want {
		t.Fatalf("%d codes rejected, want %d", rejected, want)
	}
}

func TestUnitVectorRefusals(t *testing.T) {
	for _, tc := range []struct {
		name    string
		x, y, z float64
		bits    uint
		want    error
	}{
		{"zero", 0, 0, 0, 16, ErrOutOfRange},
		{"NaN", math.NaN(), 0, 1, 16, ErrOutOfRange},
		{"Inf", 0, math.Inf(1), 1, 16, ErrOutOfRange},
		{"L1 overflows", math.MaxFloat64, math.MaxFloat64, 0, 16, ErrOutOfRange},
		{"1 bit", 0, 0, 1, 1, ErrWidth},
		{"33 bits", 0, 0, 1, 33, ErrWidth},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := NewWriter(make([]byte, 16))
			if err := w.WriteUnitVector(tc.x, tc.y, tc.z, tc.bits); !errors.Is(err, tc.want) || w.BitLen() != 0 {
				t.Fatalf("err %v, BitLen %d; want %v", err, w.BitLen(), tc.want)
			}
		})
	}
	if !math.IsNaN(UnitVectorMaxAngle(1)) {
		t.Fatal("UnitVectorMaxAngle(1) is not NaN")
	}
	// Tiny and huge vectors keep their direction.
	for _, scale := range []float64{1e-300, 1e300} {
		w := NewWriter(make([]byte, 16))
		if err := w.WriteUnitVector(scale, -scale, 0, 16); err != nil {
			t.Fatal(err)
		}
		x, y, z, err := NewReader(w.Bytes()).ReadUnitVector(16, "dir")
		if err != nil || vecAngle([3]float64{math.Sqrt2 / 2, -math.Sqrt2 / 2, 0}, [3]float64{x, y, z}) > UnitVectorMaxAngle(16) {
			t.Fatalf("scale %g: (%v, %v, %v), %v", scale, x, y, z, err)
		}
	}
}

// A refused rotation decodes to the zero quaternion through both readers
// (quatFill writes nothing before its checks pass), and the reader stays
// at the field.
func TestReadQuatRefusalReturnsZero(t *testing.T) {
	const bits = QuatBits
	m := uint64(1)<<(bits-1) - 1
	pack := packQuatCode
	for _, tc := range []struct {
		name string
		c    uint64
	}{
		{"unused top code", pack(3, 1<<bits-1, m, m)},
		{"components beyond the unit sphere", pack(2, 2*m, 2*m, 2*m)},
		{"a sent component larger than the rebuilt one", pack(1, 2*m, m+m/2, m)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			buf := make([]byte, 16)
			w := NewWriter(buf)
			if err := w.WriteBits(tc.c, 2+3*bits); err != nil {
				t.Fatal(err)
			}
			r := NewReader(buf)
			q, err := r.ReadQuat("rot")
			if !errors.Is(err, ErrOutOfRange) || q != [4]float64{} || r.Pos() != 0 {
				t.Fatalf("Reader: %v, %v at bit %d; want the zero rotation, ErrOutOfRange at bit 0", q, err, r.Pos())
			}
			rec := NewReader(buf).Begin("rot")
			q = rec.ReadQuat()
			if err := rec.End(); !errors.Is(err, ErrOutOfRange) || q != [4]float64{} {
				t.Fatalf("RecordReader: %v, %v; want the zero rotation, ErrOutOfRange", q, err)
			}
		})
	}
}

// packQuatCode is a smallest-three rotation's code: the index of the
// dropped component, then the three others' QuatBits-bit codes.
func packQuatCode(i uint64, k0, k1, k2 uint64) uint64 {
	const bits = QuatBits
	return i | k0<<2 | k1<<(2+bits) | k2<<(2+2*bits)
}
