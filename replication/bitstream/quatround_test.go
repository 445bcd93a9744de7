package bitstream

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

// quatCodesClamped is quatCodes as it was before its codes lost the clamp
// to [−m, m]: roundSym on each scaled component. The reference for
// TestQuatCodesUnclampedMatchClamped.
func quatCodesClamped(q *[4]float64, m int64) (i int, k0, k1, k2 int64, ok bool) {
	ss := float64(q[0]*q[0]) + float64(q[1]*q[1]) + float64(q[2]*q[2]) + float64(q[3]*q[3])
	if !(ss > 0 && ss <= math.MaxFloat64) {
		return 0, 0, 0, 0, false
	}
	for j := 1; j < 4; j++ {
		if math.Abs(q[j]) > math.Abs(q[i]) {
			i = j
		}
	}
	t := math.Sqrt2 * float64(m)
	if math.Abs(ss-1) > 0x1p-40 {
		t /= math.Sqrt(ss)
	}
	t = math.Copysign(t, q[i])
	o := &quatOthers[i]
	x0, x1, x2 := q[o[0]]*t, q[o[1]]*t, q[o[2]]*t
	k0, k1, k2 = roundSym(x0, m), roundSym(x1, m), roundSym(x2, m)
	if !quatCanonical([3]int64{k0, k1, k2}, m) {
		k0, k1, k2 = quatTowardZero(x0, x1, x2, m)
	}
	return i, k0, k1, k2, true
}

// quatCodes rounds without clamping its codes to [−m, m]: the same codes
// as the clamped rounding for every quaternion, those whose components are
// subnormal (where Σq² is rounded far from |q|² and a scaled component
// passes m) and those with near ties among them.
func TestQuatCodesUnclampedMatchClamped(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var past int // quaternions where a rounded code passed m: the clamp's case
	for n := range 200000 {
		q := randomQuat(rng)
		switch n % 4 {
		case 1: // subnormal components: Σq² far from |q|²
			s := math.Ldexp(1, -1070+rng.IntN(60))
			for j := range q {
				q[j] *= s
			}
		case 2: // two equal largest components, subnormal or not
			a := math.Ldexp(1+rng.Float64(), -540+rng.IntN(20))
			if rng.IntN(2) == 0 {
				a = 0.5 + rng.Float64()*0.2
			}
			q = [4]float64{a, -a, rng.Float64() * a, 0}
			q[rng.IntN(4)], q[3] = q[3], q[rng.IntN(4)]
		case 3: // unnormalized
			for j := range q {
				q[j] *= math.Ldexp(1, rng.IntN(200)-100)
			}
		}
		bits := uint(minQuatBits + rng.IntN(MaxQuatBits-minQuatBits+1))
		m := int64(1)<<(bits-1) - 1
		gi, g0, g1, g2, gok := quatCodes(&q, m)
		wi, w0, w1, w2, wok := quatCodesClamped(&q, m)
		if gi != wi || g0 != w0 || g1 != w1 || g2 != w2 || gok != wok {
			t.Fatalf("q %v, %d bits: codes %d %d %d %d %v, clamped rounding %d %d %d %d %v", q, bits, gi, g0, g1, g2, gok, wi, w0, w1, w2, wok)
		}
		if wok {
			ss := float64(q[0]*q[0]) + float64(q[1]*q[1]) + float64(q[2]*q[2]) + float64(q[3]*q[3])
			tt := math.Copysign(math.Sqrt2*float64(m)/math.Sqrt(ss), q[wi])
			for _, j := range quatOthers[wi] {
				if k := roundAway(q[j] * tt); k > m || k < -m {
					past++
					break
				}
			}
		}
	}
	if past == 0 {
		t.Fatal("no quaternion had a code past m: the clamp's case is untested")
	}
	t.Logf("%d quaternions with a code past m", past)
}

// quatField is quatCodes and quatPack at QuatBits, bit for bit: on random
// rotations, subnormal and unnormalized ones, near ties (two equal largest
// components, the toward-zero path), exact grid points, and refusals.
func TestQuatFieldMatchesCodes(t *testing.T) {
	if s, m := float64(math.Sqrt2), float64(quatM); quatScale != s*m {
		t.Fatalf("quatScale %v, want %v", quatScale, s*m)
	}
	rng := rand.New(rand.NewPCG(7, 8))
	check := func(q [4]float64) {
		t.Helper()
		i, k0, k1, k2, wok := quatCodes(&q, quatM)
		want := quatPack(i, k0, k1, k2, quatM, QuatBits)
		got, ok := quatField(&q)
		if ok != wok || ok && got != want {
			t.Fatalf("q %v: quatField %#x %v, quatCodes packed %#x %v", q, got, ok, want, wok)
		}
	}
	for _, q := range [][4]float64{{}, {math.NaN(), 0, 0, 1}, {math.Inf(1), 0, 0, 0}, {1, 0, 0, 0}, {0, 0, 0, -1},
		{0.5, 0.5, 0.5, 0.5}, {-0.5, 0.5, -0.5, 0.5}, {math.MaxFloat64, 1, 0, 0}, {5e-324, 0, 0, 0}} {
		check(q)
	}
	for n := range 200000 {
		check(hardQuat(rng, n))
	}
}

// hardQuat is the n-th of a mix of rotations: random, subnormal,
// unnormalized, near ties (two equal largest components: the toward-zero
// path) and exact grid points (ties at .5 once scaled).
func hardQuat(rng *rand.Rand, n int) [4]float64 {
	d := quatStep[QuatBits]
	q := randomQuat(rng)
	switch n % 5 {
	case 1:
		s := math.Ldexp(1, -1070+rng.IntN(60))
		for j := range q {
			q[j] *= s
		}
	case 2:
		a := 0.5 + rng.Float64()*0.2
		q = [4]float64{a, -a, rng.Float64() * a, 0}
		q[rng.IntN(4)], q[3] = q[3], q[rng.IntN(4)]
	case 3:
		for j := range q {
			q[j] *= math.Ldexp(1, rng.IntN(200)-100)
		}
	case 4:
		for j := range q {
			q[j] = float64(rng.IntN(2*quatM+1)-quatM) * d / 2
		}
	}
	return q
}

// FuzzQuatField: quatField is quatCodes and quatPack at QuatBits for any
// four floats.
func FuzzQuatField(f *testing.F) {
	f.Add(0.5, 0.5, 0.5, 0.5)
	f.Add(0.0, 0.0, 0.0, 0.0)
	f.Add(0.6, -0.6, 0.1, 0.0)
	f.Add(1e-320, 0.0, 3e-321, 0.0)
	f.Fuzz(func(t *testing.T, a, b, c, d float64) {
		q := [4]float64{a, b, c, d}
		i, k0, k1, k2, wok := quatCodes(&q, quatM)
		want := quatPack(i, k0, k1, k2, quatM, QuatBits)
		got, ok := quatField(&q)
		if ok != wok || ok && got != want {
			t.Fatalf("q %v: quatField %#x %v, quatCodes packed %#x %v", q, got, ok, want, wok)
		}
	})
}

// The unused top code 2^bits − 1 in any sent position, beside any other
// codes, is refused at every width: quatFill and the update readers have
// no test of their own for it (a code of m+1 fails the canonical test).
func TestQuatTopCodeRefusedAtEveryWidth(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for bits := uint(minQuatBits); bits <= MaxQuatBits; bits++ {
		top := uint64(1)<<bits - 1
		for n := range 2000 {
			k := [3]uint64{rng.Uint64N(top + 1), rng.Uint64N(top + 1), rng.Uint64N(top + 1)}
			k[n%3] = top
			c := uint64(n/3%4) | k[0]<<2 | k[1]<<(2+bits) | k[2]<<(2+2*bits)
			if q, err := decodeQuat(c, bits); !errors.Is(err, ErrOutOfRange) {
				t.Fatalf("%d bits, codes %v: %v, %v; want ErrOutOfRange", bits, k, q, err)
			}
			if bits != QuatBits {
				continue
			}
			// ReadUpdate's own copies, in the window and near the end.
			for _, size := range []int{64, 16} {
				w := NewWriter(make([]byte, size))
				_ = w.WriteBits(0, 1)
				_ = w.WriteBits(uint64(UpdateRot)<<10, 14)
				_ = w.WriteBits(c, 2+3*bits)
				r := NewReader(w.buf)
				_, _ = r.ReadBits(1, "pre")
				rec := r.Begin("u")
				var p Pose
				rec.ReadUpdate(&quatOnlyFormat, &p)
				if err := rec.End(); !errors.Is(err, ErrOutOfRange) {
					t.Fatalf("ReadUpdate in %d bytes, codes %v: %v, %v; want ErrOutOfRange", size, k, p.Rot, err)
				}
			}
		}
	}
}

// quatOnlyFormat: an id of 10 bits and a mask of 4, small triples; its
// largest update fits a 16-byte buffer after one bit, so both ReadUpdate
// fast paths read it.
var quatOnlyFormat = mustUpdate(NewUpdateFormat(0, 1023, 4, mustFixed(0, 1, 0.5), mustQuantized(0, 1, 2)))

// WriteUpdate's rotation (quatField's body, inline) writes WriteQuat's
// bits for the rotations of TestQuatFieldMatchesCodes, and refuses what
// it refuses.
func TestWriteUpdateRotationMatchesWriteQuat(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	extra := [][4]float64{{}, {math.NaN(), 0, 0, 1}, {math.Inf(1), 0, 0, 0}, {math.MaxFloat64, 1, 0, 0}, {5e-324, 0, 0, 0}}
	for n := range 100000 + len(extra) {
		var p Pose
		if n < len(extra) {
			p.Rot = extra[n]
		} else {
			p.Rot = hardQuat(rng, n)
		}
		wf, wr := NewWriter(make([]byte, 64)), NewWriter(make([]byte, 64))
		_ = wf.WriteRangedInt(77, 0, 1023)
		_ = wf.WriteBits(uint64(UpdateRot), 4)
		errF := wf.WriteQuat(p.Rot)
		rw := wr.Begin()
		rw.WriteUpdate(&ghostFormat, 77, UpdateRot, &p)
		errR := rw.End()
		if errR != errF || !bytes.Equal(wr.Bytes(), wf.Bytes()) {
			t.Fatalf("q %v: WriteUpdate %v %x, WriteQuat %v %x", p.Rot, errR, wr.Bytes(), errF, wf.Bytes())
		}
	}
}
