package bitstream

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

func TestQuantizedRoundTrip(t *testing.T) {
	tests := []struct {
		name     string
		min, max float64
		bits     uint
	}{
		{"unit 1 bit", 0, 1, 1},
		{"unit 5 bits", 0, 1, 5},
		{"signed 8 bits", -1, 1, 8},
		{"position 18 bits", -2000, 2000, 18},
		{"velocity 12 bits", -50, 50, 12},
		{"angle 32 bits", 0, 360, 32},
		{"offset range", 1e6, 1e6 + 10, 20},
		{"wide", -1e300, 1e300, 32},
		{"asymmetric", -2000, 10, 16},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bound := QuantizedMaxError(tc.min, tc.max, tc.bits)
			l := uint64(1)<<tc.bits - 1
			if want := (tc.max - tc.min) / float64(l) / 2; !(bound >= want && bound < want*1.001) {
				t.Fatalf("QuantizedMaxError %g, want about half a step %g", bound, want)
			}
			var w Writer
			var r Reader
			buf := make([]byte, 16)
			for i := range 20000 {
				v := tc.min + rng.Float64()*(tc.max-tc.min)
				switch i {
				case 0:
					v = tc.min
				case 1:
					v = tc.max
				}
				v = math.Min(v, tc.max)
				w.Reset(buf)
				if err := w.WriteQuantized(v, tc.min, tc.max, tc.bits); err != nil {
					t.Fatalf("write %v: %v", v, err)
				}
				if w.BitLen() != int(tc.bits) {
					t.Fatalf("%d bits, want %d", w.BitLen(), tc.bits)
				}
				r.Reset(w.Bytes())
				got, err := r.ReadQuantized(tc.min, tc.max, tc.bits, "q")
				if err != nil {
					t.Fatal(err)
				}
				if !(math.Abs(got-v) <= bound) || got < tc.min || got > tc.max {
					t.Fatalf("%v → %v: error %g above %g", v, got, math.Abs(got-v), bound)
				}
				if (i == 0 && got != tc.min) || (i == 1 && got != tc.max) {
					t.Fatalf("endpoint %v decoded as %v", v, got)
				}
			}
		})
	}
}

// Every code decodes to a value that encodes back to that code, and the
// decoded values are strictly increasing (no two codes collide).
func TestQuantizedCodesAreCanonical(t *testing.T) {
	for _, tc := range []struct {
		min, max float64
		bits     uint
	}{{0, 1, 10}, {-2000, 2000, 12}, {-3.3, 7.1, 9}, {1e6, 1e6 + 1, 11}} {
		prev := math.Inf(-1)
		for code := range uint64(1) << tc.bits {
			v := dequantize(code, 1<<tc.bits-1, tc.min, tc.max)
			if !(v > prev) {
				t.Fatalf("[%v,%v] %d bits: code %d → %v not above %v", tc.min, tc.max, tc.bits, code, v, prev)
			}
			prev = v
			w := NewWriter(make([]byte, 8))
			if err := w.WriteQuantized(v, tc.min, tc.max, tc.bits); err != nil {
				t.Fatal(err)
			}
			if back, _ := NewReader(w.Bytes()).ReadBits(tc.bits, "c"); back != code {
				t.Fatalf("[%v,%v] %d bits: code %d → %v → code %d", tc.min, tc.max, tc.bits, code, v, back)
			}
		}
	}
}

func TestQuantizedRefusals(t *testing.T) {
	tests := []struct {
		name          string
		v, min, max   float64
		bits          uint
		want          error
		readRefusesTo bool // the reader refuses the parameters too
	}{
		{"NaN", math.NaN(), 0, 1, 8, ErrOutOfRange, false},
		{"+Inf", math.Inf(1), 0, 1, 8, ErrOutOfRange, false},
		{"-Inf", math.Inf(-1), 0, 1, 8, ErrOutOfRange, false},
		{"below min", -0.001, 0, 1, 8, ErrOutOfRange, false},
		{"above max", 1.001, 0, 1, 8, ErrOutOfRange, false},
		{"empty range", 1, 1, 1, 8, ErrOutOfRange, true},
		{"reversed range", 0.5, 1, 0, 8, ErrOutOfRange, true},
		{"NaN range", 0.5, math.NaN(), 1, 8, ErrOutOfRange, true},
		{"infinite range", 0, math.Inf(-1), math.Inf(1), 8, ErrOutOfRange, true},
		{"range overflows", 0, -math.MaxFloat64, math.MaxFloat64, 8, ErrOutOfRange, true},
		{"zero bits", 0.5, 0, 1, 0, ErrWidth, true},
		{"33 bits", 0.5, 0, 1, 33, ErrWidth, true},
		{"unresolvable steps", 1e15, 1e15, 1e15 + 1, 32, ErrWidth, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := NewWriter(make([]byte, 8))
			if err := w.WriteQuantized(tc.v, tc.min, tc.max, tc.bits); !errors.Is(err, tc.want) || w.BitLen() != 0 {
				t.Fatalf("err %v BitLen %d, want %v and nothing written", err, w.BitLen(), tc.want)
			}
			if tc.readRefusesTo {
				r := NewReader(make([]byte, 8))
				if _, err := r.ReadQuantized(tc.min, tc.max, tc.bits, "q"); !errors.Is(err, tc.want) {
					t.Fatalf("read: %v, want %v", err, tc.want)
				}
				if !math.IsNaN(QuantizedMaxError(tc.min, tc.max, tc.bits)) {
					t.Fatal("QuantizedMaxError of refused parameters is not NaN")
				}
			}
		})
	}
}

// BS-7, E-1, E-14: positions in [−2000, 2000] at 0.1 take 16 bits; 2000 is
// code 40000; every grid point, computed in float64 or float32, lands on its
// own code (the book's truncation puts 7277 of them one step low in float32);
// the error is at most precision/2.
func TestFixedPositionGrid(t *testing.T) {
	const lo, hi, prec = -2000.0, 2000.0, 0.1
	if n := FixedBits(lo, hi, prec); n != 16 {
		t.Fatalf("FixedBits = %d, want 16", n)
	}
	bound := FixedMaxError(lo, hi, prec)
	if !(bound >= prec/2 && bound < prec/2*1.001) {
		t.Fatalf("FixedMaxError = %g", bound)
	}
	w := NewWriter(make([]byte, 8))
	var r Reader
	for i := range 40001 {
		for _, x := range []float64{lo + float64(i)*prec, float64(float32(lo + float64(i)*prec))} {
			x = math.Max(lo, math.Min(hi, x))
			w.Reset(w.buf)
			if err := w.WriteFixed(x, lo, hi, prec); err != nil {
				t.Fatalf("write %v: %v", x, err)
			}
			if w.BitLen() != 16 {
				t.Fatalf("%v took %d bits", x, w.BitLen())
			}
			r.Reset(w.Bytes())
			if code, _ := r.ReadBits(16, "code"); code != uint64(i) {
				t.Fatalf("grid point %d (%v) encoded as %d", i, x, code)
			}
			r.Reset(w.Bytes())
			got, err := r.ReadFixed(lo, hi, prec, "pos")
			if err != nil || !(math.Abs(got-x) <= bound) {
				t.Fatalf("%v → %v (%v): error above %g", x, got, err, bound)
			}
		}
	}
	// Codes above 40000 are rejected, consuming nothing.
	for code := uint64(40001); code < 1<<16; code += 997 {
		w.Reset(w.buf)
		_ = w.WriteBits(code, 16)
		r.Reset(w.Bytes())
		if _, err := r.ReadFixed(lo, hi, prec, "pos"); !errors.Is(err, ErrOutOfRange) || r.Pos() != 0 {
			t.Fatalf("code %d: %v, pos %d", code, err, r.Pos())
		}
	}
}

func TestFixedParameters(t *testing.T) {
	tests := []struct {
		name           string
		min, max, prec float64
		bits           uint
	}{
		{"health 0..100 by 1", 0, 100, 1, 7},
		{"range not a multiple", 0, 1, 0.3, 2},
		{"steps round to nearest", 0, 1, 0.4, 2},
		{"precision above range", 0, 0.1, 1, 0},
		{"centimetres over a 20 km zone", -10000, 10000, 0.01, 21},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := FixedBits(tc.min, tc.max, tc.prec); got != tc.bits {
				t.Fatalf("FixedBits = %d, want %d", got, tc.bits)
			}
			bound := FixedMaxError(tc.min, tc.max, tc.prec)
			for i := range 1001 {
				v := tc.min + float64(i)/1000*(tc.max-tc.min)
				w := NewWriter(make([]byte, 8))
				if err := w.WriteFixed(v, tc.min, tc.max, tc.prec); err != nil || w.BitLen() != int(tc.bits) {
					t.Fatalf("write %v: %v, %d bits", v, err, w.BitLen())
				}
				got, err := NewReader(w.Bytes()).ReadFixed(tc.min, tc.max, tc.prec, "f")
				if err != nil || !(math.Abs(got-v) <= bound) || got < tc.min || got > tc.max {
					t.Fatalf("%v → %v (%v), bound %g", v, got, err, bound)
				}
			}
		})
	}
	for _, bad := range []struct {
		name           string
		min, max, prec float64
		want           error
	}{
		{"zero precision", 0, 1, 0, ErrOutOfRange},
		{"negative precision", 0, 1, -0.1, ErrOutOfRange},
		{"NaN precision", 0, 1, math.NaN(), ErrOutOfRange},
		{"infinite precision", 0, 1, math.Inf(1), ErrOutOfRange},
		{"2^32 steps", 0, 1 << 32, 1, ErrWidth},
		{"unresolvable", 1e15, 1e15 + 1, 1e-6, ErrWidth},
	} {
		t.Run(bad.name, func(t *testing.T) {
			w := NewWriter(make([]byte, 8))
			if err := w.WriteFixed(bad.min, bad.min, bad.max, bad.prec); !errors.Is(err, bad.want) {
				t.Fatalf("write: %v, want %v", err, bad.want)
			}
			if _, err := NewReader(make([]byte, 8)).ReadFixed(bad.min, bad.max, bad.prec, "f"); !errors.Is(err, bad.want) {
				t.Fatalf("read: %v, want %v", err, bad.want)
			}
			if !math.IsNaN(FixedMaxError(bad.min, bad.max, bad.prec)) || FixedBits(bad.min, bad.max, bad.prec) != 0 {
				t.Fatal("helpers accept refused parameters")
			}
		})
	}
}

// Torque: writeFloat(0.45, 5) "rounds to the nearest 1/32nd"; here the 32
// levels span [0, 1] inclusive, so the nearest is 14/31.
func TestUnitFloatTorqueExample(t *testing.T) {
	w := NewWriter(make([]byte, 4))
	if err := w.WriteUnitFloat(0.45, 5); err != nil {
		t.Fatal(err)
	}
	if code, _ := NewReader(w.Bytes()).ReadBits(5, "c"); code != 14 {
		t.Fatalf("code %d, want 14", code)
	}
	got, err := NewReader(w.Bytes()).ReadUnitFloat(5, "health")
	if err != nil || got != 14.0/31 {
		t.Fatalf("decoded %v (%v), want 14/31", got, err)
	}
	if math.Abs(got-0.45) > UnitFloatMaxError(5) || UnitFloatMaxError(5) > 1.0/62*1.001 {
		t.Fatalf("error %g, bound %g", math.Abs(got-0.45), UnitFloatMaxError(5))
	}
}

func TestSignedFloat(t *testing.T) {
	for _, bits := range []uint{2, 3, 8, 16, 24, 32} {
		m := int64(1)<<(bits-1) - 1
		bound := SignedFloatMaxError(bits)
		enc := func(v float64) uint64 {
			w := NewWriter(make([]byte, 8))
			if err := w.WriteSignedFloat(v, bits); err != nil || w.BitLen() != int(bits) {
				t.Fatalf("%d bits: write %v: %v, %d bits", bits, v, err, w.BitLen())
			}
			c, _ := NewReader(w.Bytes()).ReadBits(bits, "c")
			return c
		}
		dec := func(c uint64) (float64, error) {
			w := NewWriter(make([]byte, 8))
			_ = w.WriteBits(c, bits)
			return NewReader(w.Bytes()).ReadSignedFloat(bits, "s")
		}
		for _, exact := range []float64{-1, 0, 1} {
			if got, err := dec(enc(exact)); got != exact || err != nil {
				t.Fatalf("%d bits: %v decoded as %v (%v)", bits, exact, got, err)
			}
		}
		for i := range 4001 {
			v := float64(i)/2000 - 1
			cp, cn := enc(v), enc(-v)
			if int64(cp)-m != -(int64(cn) - m) {
				t.Fatalf("%d bits: codes of ±%v not mirrored: %d, %d", bits, v, cp, cn)
			}
			if got, err := dec(cp); err != nil || !(math.Abs(got-v) <= bound) {
				t.Fatalf("%d bits: %v → %v (%v), bound %g", bits, v, got, err, bound)
			}
		}
		if _, err := dec(1<<bits - 1); !errors.Is(err, ErrOutOfRange) {
			t.Fatalf("%d bits: top code: %v", bits, err)
		}
	}
	w := NewWriter(make([]byte, 8))
	for _, bad := range []struct {
		v    float64
		bits uint
		want error
	}{{1.5, 8, ErrOutOfRange}, {math.NaN(), 8, ErrOutOfRange}, {0, 1, ErrWidth}, {0, 33, ErrWidth}} {
		if err := w.WriteSignedFloat(bad.v, bad.bits); !errors.Is(err, bad.want) {
			t.Fatalf("WriteSignedFloat(%v, %d): %v, want %v", bad.v, bad.bits, err, bad.want)
		}
	}
	if !math.IsNaN(SignedFloatMaxError(1)) {
		t.Fatal("SignedFloatMaxError(1) is not NaN")
	}
}

func TestFloat32(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	w := NewWriter(make([]byte, 8))
	var r Reader
	special := []float32{0, float32(math.Copysign(0, -1)), 1, -1, math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32, 1e-40}
	for i := range 20000 {
		var v float32
		if i < len(special) {
			v = special[i]
		} else if v = math.Float32frombits(rng.Uint32()); math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			continue
		}
		w.Reset(w.buf)
		_ = w.WriteFlag(true) // misalign
		if err := w.WriteFloat32(v); err != nil || w.BitLen() != 33 {
			t.Fatalf("write %v: %v", v, err)
		}
		r.Reset(w.Bytes())
		_, _ = r.ReadFlag("f")
		got, err := r.ReadFloat32("v")
		if err != nil || math.Float32bits(got) != math.Float32bits(v) {
			t.Fatalf("%v (%#x) → %v (%#x), %v", v, math.Float32bits(v), got, math.Float32bits(got), err)
		}
	}
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
		w.Reset(w.buf)
		if err := w.WriteFloat32(bad); !errors.Is(err, ErrOutOfRange) || w.BitLen() != 0 {
			t.Fatalf("write %v: %v", bad, err)
		}
		_ = w.WriteBits(uint64(math.Float32bits(bad)), 32)
		r.Reset(w.Bytes())
		if _, err := r.ReadFloat32("v"); !errors.Is(err, ErrOutOfRange) || r.Pos() != 0 {
			t.Fatalf("read %v: %v", bad, err)
		}
	}
}

// The inlined fast checks (fixedSteps, quantOK) must agree with the full
// validators over every combination of awkward parameters.
func TestFastParameterChecksAgree(t *testing.T) {
	vals := []float64{math.Inf(-1), -math.MaxFloat64, -1e300, -2000, -1, -1e-300, math.Copysign(0, -1), 0,
		1e-300, 0.01, 0.1, 0.3, 1, 2000, 1e6, 1e15, 1e300, math.MaxFloat64, math.Inf(1), math.NaN()}
	for _, lo := range vals {
		for _, hi := range vals {
			for _, p := range vals {
				steps, ok := fixedSteps(lo, hi, p)
				wantSteps, _, err := fixedParams(lo, hi, p)
				if ok != (err == nil) || (ok && steps != wantSteps) {
					t.Fatalf("fixed [%v, %v] @%v: fast %d, %v; full %d, %v", lo, hi, p, steps, ok, wantSteps, err)
				}
			}
			for bits := range uint(40) {
				_, err := quantParams(lo, hi, bits)
				if ok := quantOK(lo, hi, bits); ok != (err == nil) {
					t.Fatalf("quantized [%v, %v] %d bits: fast %v, full %v", lo, hi, bits, ok, err)
				}
			}
		}
	}
}

// Readers refuse parameters their writers refuse, before consuming anything.
func TestReadRefusesBadParameters(t *testing.T) {
	tab := newTestTable()
	tests := []struct {
		name string
		read func(r *Reader) error
		want error
	}{
		{"signed float 1 bit", func(r *Reader) error { _, err := r.ReadSignedFloat(1, "f"); return err }, ErrWidth},
		{"unit float 33 bits", func(r *Reader) error { _, err := r.ReadUnitFloat(33, "f"); return err }, ErrWidth},
		{"unit vector 1 bit", func(r *Reader) error { _, _, _, err := r.ReadUnitVector(1, "f"); return err }, ErrWidth},
		{"unit vector 33 bits", func(r *Reader) error { _, _, _, err := r.ReadUnitVector(33, "f"); return err }, ErrWidth},
		{"quat 5 bits", func(r *Reader) error { _, err := r.ReadQuatBits(5, "f"); return err }, ErrWidth},
		{"quat 21 bits", func(r *Reader) error { _, err := r.ReadQuatBits(21, "f"); return err }, ErrWidth},
		{"string negative maxLen", func(r *Reader) error { _, err := r.ReadStringBytes(nil, -1, "f"); return err }, ErrOutOfRange},
		{"table string negative maxLen", func(r *Reader) error { _, err := r.ReadTableString(tab, -1, "f"); return err }, ErrOutOfRange},
		{"table string bytes negative maxLen", func(r *Reader) error { _, err := r.ReadTableStringBytes(tab, nil, -1, "f"); return err }, ErrOutOfRange},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := NewReader(make([]byte, 16))
			err := tc.read(r)
			var re *ReadError
			if !errors.As(err, &re) || !errors.Is(err, tc.want) || re.Field != "f" || r.Pos() != 0 {
				t.Fatalf("%v (pos %d), want %v", err, r.Pos(), tc.want)
			}
		})
	}
	w := NewWriter(make([]byte, 16))
	if err := w.WriteTableString(tab, "x", -1); !errors.Is(err, ErrOutOfRange) || w.BitLen() != 0 {
		t.Fatalf("WriteTableString(maxLen -1): %v", err)
	}
}
