package bitstream

import (
	"math"
	"math/rand/v2"
	"testing"
)

// A value's code from the writers' fast paths never passes the top code:
// FixedFormat.code and QuantizedFormat.code have no cap, on the grounds
// that the top is the same expression at max and the expression grows
// with v. Checked at max, just below it and at random values in range,
// over many formats, against the per-field writer's code (which caps).
func TestCodesWithinTop(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	fixed, quant := 0, 0
	for range 20000 {
		lo := math.Ldexp(rng.Float64()*2-1, rng.IntN(20)-6)
		hi := lo + math.Ldexp(rng.Float64()+0.01, rng.IntN(20)-6)
		prec := (hi - lo) / math.Ldexp(rng.Float64()+0.5, rng.IntN(24))
		bits := uint(1 + rng.IntN(24))
		values := []float64{hi, math.Nextafter(hi, lo), lo, lo + (hi-lo)*rng.Float64()}
		if f, err := NewFixedFormat(lo, hi, prec); err == nil {
			fixed++
			for _, v := range values {
				if q := f.code(v); q > f.steps {
					t.Fatalf("FixedFormat(%v, %v, %v).code(%v) = %d, top %d", lo, hi, prec, v, q, f.steps)
				}
				if q, want := f.code(v), fieldCode(t, func(w *Writer) error { return w.WriteFixed(v, lo, hi, prec) }, f.bits); q != want {
					t.Fatalf("FixedFormat(%v, %v, %v).code(%v) = %d, WriteFixed wrote %d", lo, hi, prec, v, q, want)
				}
			}
		}
		if f, err := NewQuantizedFormat(lo, hi, bits); err == nil {
			quant++
			for _, v := range values {
				if q := f.code(v); q > f.top {
					t.Fatalf("QuantizedFormat(%v, %v, %d).code(%v) = %d, top %d", lo, hi, bits, v, q, f.top)
				}
				if q, want := f.code(v), fieldCode(t, func(w *Writer) error { return w.WriteQuantized(v, lo, hi, bits) }, bits); q != want {
					t.Fatalf("QuantizedFormat(%v, %v, %d).code(%v) = %d, WriteQuantized wrote %d", lo, hi, bits, v, q, want)
				}
			}
		}
	}
	if fixed < 5000 || quant < 5000 {
		t.Fatalf("only %d fixed and %d quantized formats of 20000 valid", fixed, quant)
	}
}

// fieldCode is the n-bit code a per-field write puts first.
func fieldCode(t *testing.T, write func(*Writer) error, n uint) uint64 {
	t.Helper()
	w := NewWriter(make([]byte, 16))
	if err := write(w); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		return 0
	}
	q, err := NewReader(w.Bytes()).ReadBits(n, "q")
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// ReadUpdate's values without the cap (UpdateFormat.posBare, velBare) are
// ReadFixed's and ReadQuantized's, bit for bit, at the codes where the cap
// could act (the top ones) and at others; and formats where the cap does
// act take it. Each kind of format must be among the cases.
func TestReadUpdateBareValuesMatchFieldReads(t *testing.T) {
	type posCase struct{ lo, hi, prec float64 }
	type velCase struct {
		lo, hi float64
		bits   uint
	}
	poss := []posCase{{-2000, 2000, 0.01}, {0, 1, 0.4}, {0, 1, 0.3}, {-1, 1, 0.7}, {-5, 7, 0.11}, {0.1, 0.7, 0.1}}
	vels := []velCase{{-50, 50, 12}, {0, 0.3, 3}, {-0.7, 0.1, 5}, {0.1, 0.7, 9}, {-3, 1e-3, 11}, {1, 2, 2}}
	seen := map[[2]bool]bool{}
	rng := rand.New(rand.NewPCG(5, 6))
	quat := randomQuat(rng)
	for _, pc := range poss {
		for _, vc := range vels {
			pos, vel := mustFixed(pc.lo, pc.hi, pc.prec), mustQuantized(vc.lo, vc.hi, vc.bits)
			f := mustUpdate(NewUpdateFormat(0, 1023, 4, pos, vel))
			seen[[2]bool{f.posBare, f.velBare}] = true
			pcodes := []uint64{0, 1, pos.steps - 1, pos.steps, uint64(rng.Int64N(int64(pos.steps) + 1))}
			vcodes := []uint64{0, 1, vel.top - 1, vel.top, uint64(rng.Int64N(int64(vel.top) + 1))}
			for k := range 64 {
				x, y, z := pcodes[k%5], pcodes[k/5%5], pcodes[(k+3)%5]
				a, b, c := vcodes[(k+1)%5], vcodes[k/3%5], vcodes[k%5]
				w := NewWriter(make([]byte, 64))
				_ = w.WriteBits(uint64(k), 10)
				mask := uint(UpdatePos | UpdateRot | UpdateVel)
				_ = w.WriteBits(uint64(mask), 4)
				for _, q := range [...]uint64{x, y, z} {
					_ = w.WriteBits(q, pos.bits)
				}
				_ = w.WriteQuat(quat)
				for _, q := range [...]uint64{a, b, c} {
					_ = w.WriteBits(q, vel.bits)
				}
				if w.Err() != nil {
					t.Fatal(w.Err())
				}
				var want, got Pose
				r := NewReader(w.Bytes())
				_, _ = r.ReadBits(14, "head")
				var e1, e2, e3 error
				want.Pos[0], want.Pos[1], want.Pos[2], e1 = pos.Read3(r, "pos")
				want.Rot, e2 = r.ReadQuat("rot")
				want.Vel[0], want.Vel[1], want.Vel[2], e3 = vel.Read3(r, "vel")
				if e1 != nil || e2 != nil || e3 != nil {
					t.Fatal(e1, e2, e3)
				}
				var rr Reader
				rr.Reset(w.Bytes())
				rec := rr.Begin("u")
				id, m := rec.ReadUpdate(&f, &got)
				if err := rec.End(); err != nil || id != int64(k) || m != mask {
					t.Fatalf("ReadUpdate: id %d mask %b, %v", id, m, err)
				}
				for i := range 3 {
					if math.Float64bits(got.Pos[i]) != math.Float64bits(want.Pos[i]) || math.Float64bits(got.Vel[i]) != math.Float64bits(want.Vel[i]) {
						t.Fatalf("pos %v (bare %v), vel %v (bare %v), codes %d %d %d / %d %d %d: ReadUpdate %v %v, the fields %v %v",
							pc, f.posBare, vc, f.velBare, x, y, z, a, b, c, got.Pos, got.Vel, want.Pos, want.Vel)
					}
				}
				if got.Rot != want.Rot {
					t.Fatalf("rotation %v, the fields %v", got.Rot, want.Rot)
				}
			}
		}
	}
	for _, k := range [][2]bool{{true, true}, {true, false}, {false, true}, {false, false}} {
		if !seen[k] {
			t.Errorf("no case with posBare %v, velBare %v", k[0], k[1])
		}
	}
}
