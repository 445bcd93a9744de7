package bitstream

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"testing"
)

// The formats' parameter menus: the op model's, the benchmark packet's, and
// widths on both sides of the one-field limit of the vector methods (3n ≤ 63).
var (
	formatFixed = append([][3]float64{{-10000, 10000, 0.01}, {-2000, 2000, 0.001}, {0, 4e6, 1}, {-1, 1, 1e-9}, {-1, math.Copysign(0, -1), 0.5}}, fixedRanges...)
	formatQuant = [][3]float64{{-50, 50, 12}, {-50, 50, 14}, {0, 1, 7}, {0, 1, 8}, {0, 1, 1}, {-2000, 2000, 21}, {-2000, 2000, 22}, {0, 360, 32}, {-1e300, 1e300, 32}, {1e6, 1e6 + 10, 20}, {3, 7.5, 5}}
)

// formatValues are the values worth checking for a range: its ends, the
// floats beside them, every kind of boundary a rounding could cross (the
// grid points and the midpoints between them, and the floats beside
// those), and random values.
func formatValues(rng *rand.Rand, lo, hi, step float64, random int) []float64 {
	vs := []float64{lo, hi, math.Nextafter(lo, hi), math.Nextafter(hi, lo), (lo + hi) / 2, 0, math.Copysign(0, -1)}
	for range random {
		k := math.Floor(rng.Float64() * (hi - lo) / step)
		for _, g := range []float64{lo + k*step, lo + (k+0.5)*step} {
			vs = append(vs, g, math.Nextafter(g, lo), math.Nextafter(g, hi))
		}
		vs = append(vs, lo+rng.Float64()*(hi-lo))
	}
	out := vs[:0]
	for _, v := range vs {
		if v >= lo && v <= hi {
			out = append(out, v)
		}
	}
	return out
}

// fieldsAndFormat writes vs with the per-field call and with the format's
// Write (and, three at a time, Write3) at bit offset off of a buffer of
// bufLen bytes, and reports where the streams or the errors differ.
func fieldsAndFormat(off, bufLen int, vs []float64, field func(*Writer, float64) error, one func(*Writer, float64) error, three func(*Writer, float64, float64, float64) error) error {
	var a, b, c Writer
	bufs := [3][]byte{make([]byte, bufLen), make([]byte, bufLen), make([]byte, bufLen)}
	for i := range bufs {
		for j := range bufs[i] {
			bufs[i][j] = 0xa5 // garbage the writers must clear
		}
	}
	a.Reset(bufs[0])
	b.Reset(bufs[1])
	c.Reset(bufs[2])
	for _, w := range []*Writer{&a, &b, &c} {
		if off > 0 {
			_ = w.WriteBits(uint64(0x5a5a5a5a)&(1<<off-1), uint(off))
		}
	}
	for i := 0; i+3 <= len(vs); i += 3 {
		var errA error
		at := a.BitLen()
		for _, v := range vs[i : i+3] {
			if err := field(&a, v); err != nil && errA == nil {
				errA = err
			}
		}
		for _, v := range vs[i : i+3] {
			if err := one(&b, v); err != nil {
				break
			}
		}
		errC := three(&c, vs[i], vs[i+1], vs[i+2])
		if errA != nil {
			// Write3 is atomic where three calls are not: it wrote nothing,
			// and it checks the values before the room.
			bad := false
			for _, v := range vs[i : i+3] {
				bad = bad || field(&Writer{}, v) == ErrOutOfRange
			}
			if errC == nil || errors.Is(errC, ErrOutOfRange) != bad || c.BitLen() != at {
				return fmt.Errorf("%v: fields refused with %v, Write3 with %v after %d bits", vs[i:i+3], errA, errC, c.BitLen()-at)
			}
			a.Truncate(at)
			b.Truncate(at)
			continue
		}
		if errC != nil {
			return fmt.Errorf("%v: Write3: %v", vs[i:i+3], errC)
		}
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) || a.BitLen() != b.BitLen() {
		return fmt.Errorf("Write: %d bits, fields %d, first difference at byte %d", b.BitLen(), a.BitLen(), firstByteDiff(a.Bytes(), b.Bytes()))
	}
	if !bytes.Equal(a.Bytes(), c.Bytes()) || a.BitLen() != c.BitLen() {
		return fmt.Errorf("Write3: %d bits, fields %d, first difference at byte %d", c.BitLen(), a.BitLen(), firstByteDiff(a.Bytes(), c.Bytes()))
	}
	if !errors.Is(a.Err(), b.Err()) {
		return fmt.Errorf("Write's first error %v, fields' %v", b.Err(), a.Err())
	}
	return nil
}

// readsAgree reads data at bit offset off with the per-field call and with
// the format's Read and Read3, three values at a time, until the stream
// ends, and reports any difference in value, position or error.
func readsAgree(data []byte, nbits, off int, field func(*Reader) (float64, error), one func(*Reader) (float64, error), three func(*Reader) (float64, float64, float64, error)) error {
	var a, b, c Reader
	a.ResetBits(data, nbits)
	b.ResetBits(data, nbits)
	c.ResetBits(data, nbits)
	for _, r := range []*Reader{&a, &b, &c} {
		if off > 0 {
			if _, err := r.ReadBits(uint(off), "skip"); err != nil {
				return nil
			}
		}
	}
	for step := 0; step < 1000; step++ {
		at := a.Pos()
		var want [3]float64
		var errA error
		for j := range want {
			if want[j], errA = field(&a); errA != nil {
				break
			}
		}
		var got [3]float64
		var errB error
		for j := range got {
			v, err := one(&b)
			if err != nil {
				errB = err
				break
			}
			if got[j] = v; math.Float64bits(v) != math.Float64bits(want[j]) {
				return fmt.Errorf("bit %d: Read %v, field call %v", b.Pos(), v, want[j])
			}
		}
		if (errA == nil) != (errB == nil) || a.Pos() != b.Pos() {
			return fmt.Errorf("bit %d: Read %v at %d, field calls %v at %d", at, errB, b.Pos(), errA, a.Pos())
		}
		x, y, z, errC := three(&c)
		if errA != nil {
			var re *ReadError
			if errC == nil || !errors.As(errC, &re) || re.Bit != at || re.Field != "v" || c.Pos() != at {
				return fmt.Errorf("bit %d: field calls %v, Read3 %v at %d", at, errA, errC, c.Pos())
			}
			if errors.Is(errA, ErrOutOfRange) != errors.Is(errC, ErrOutOfRange) && !errors.Is(errC, io.ErrUnexpectedEOF) {
				return fmt.Errorf("bit %d: field calls %v, Read3 %v", at, errA, errC)
			}
			return nil
		}
		if errC != nil || c.Pos() != a.Pos() || math.Float64bits(x) != math.Float64bits(want[0]) ||
			math.Float64bits(y) != math.Float64bits(want[1]) || math.Float64bits(z) != math.Float64bits(want[2]) {
			return fmt.Errorf("bit %d: Read3 %v %v %v (%v) at %d, field calls %v at %d", at, x, y, z, errC, c.Pos(), want, a.Pos())
		}
	}
	return nil
}

// TestFormatsMatchFieldCalls: for every menu range, a format writes the bits
// the per-field call writes, at every bit offset and up to the buffer's end
// (the slow paths), and reads the values it reads, from written and from
// random streams.
func TestFormatsMatchFieldCalls(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	garbage := make([]byte, 64)
	for _, p := range formatFixed {
		lo, hi, prec := p[0], p[1], p[2]
		f, err := NewFixedFormat(lo, hi, prec)
		if _, _, want := fixedParams(lo, hi, prec); !errors.Is(err, want) {
			t.Fatalf("NewFixedFormat(%v, %v, %v): %v, want %v", lo, hi, prec, err, want)
		}
		if err != nil {
			continue
		}
		if f.Bits() != FixedBits(lo, hi, prec) || math.Float64bits(f.MaxError()) != math.Float64bits(FixedMaxError(lo, hi, prec)) {
			t.Fatalf("fixed %v: Bits %d, MaxError %v", p, f.Bits(), f.MaxError())
		}
		vs := formatValues(rng, lo, hi, prec, 2000)
		vs = append(vs, math.NaN(), hi*2+1, lo-1, lo, lo) // refusals mid-stream, then valid values
		t.Run(fmt.Sprintf("fixed %v", p), func(t *testing.T) {
			for off := range 8 {
				for _, bufLen := range []int{4096, 9, 17, 64} {
					err := fieldsAndFormat(off, bufLen, vs,
						func(w *Writer, v float64) error { return w.WriteFixed(v, lo, hi, prec) }, f.Write, f.Write3)
					if err != nil {
						t.Fatalf("offset %d, %d-byte buffer: %v", off, bufLen, err)
					}
				}
				var w Writer
				w.Reset(make([]byte, 4096))
				for _, v := range vs[:len(vs)-5] {
					_ = w.WriteFixed(v, lo, hi, prec)
				}
				for _, data := range [][]byte{w.Bytes(), garbage} {
					for _, trim := range []int{0, 1, 13} {
						fill(rng, garbage)
						err := readsAgree(data, 8*len(data)-trim, off,
							func(r *Reader) (float64, error) { return r.ReadFixed(lo, hi, prec, "v") },
							func(r *Reader) (float64, error) { return f.Read(r, "v") }, func(r *Reader) (float64, float64, float64, error) { return f.Read3(r, "v") })
						if err != nil {
							t.Fatalf("offset %d, trim %d: %v", off, trim, err)
						}
					}
				}
			}
		})
	}
	for _, p := range formatQuant {
		lo, hi, bits := p[0], p[1], uint(p[2])
		f, err := NewQuantizedFormat(lo, hi, bits)
		if err != nil {
			t.Fatalf("NewQuantizedFormat(%v, %v, %d): %v", lo, hi, bits, err)
		}
		if f.Bits() != bits || math.Float64bits(f.MaxError()) != math.Float64bits(QuantizedMaxError(lo, hi, bits)) {
			t.Fatalf("quantized %v: Bits %d, MaxError %v", p, f.Bits(), f.MaxError())
		}
		vs := formatValues(rng, lo, hi, (hi-lo)/float64(uint64(1)<<bits-1), 2000)
		vs = append(vs, math.NaN(), math.Inf(1), lo, lo, lo)
		t.Run(fmt.Sprintf("quantized %v", p), func(t *testing.T) {
			for off := range 8 {
				for _, bufLen := range []int{4096, 9, 17, 64} {
					err := fieldsAndFormat(off, bufLen, vs,
						func(w *Writer, v float64) error { return w.WriteQuantized(v, lo, hi, bits) }, f.Write, f.Write3)
					if err != nil {
						t.Fatalf("offset %d, %d-byte buffer: %v", off, bufLen, err)
					}
				}
				fill(rng, garbage)
				for _, trim := range []int{0, 1, 13} {
					err := readsAgree(garbage, 8*len(garbage)-trim, off,
						func(r *Reader) (float64, error) { return r.ReadQuantized(lo, hi, bits, "v") },
						func(r *Reader) (float64, error) { return f.Read(r, "v") }, func(r *Reader) (float64, float64, float64, error) { return f.Read3(r, "v") })
					if err != nil {
						t.Fatalf("offset %d, trim %d: %v", off, trim, err)
					}
				}
			}
		})
	}
}

// Every code of a small fixed format: Read of each is ReadFixed's value, and
// writing that value back gives the code (the format is canonical as the
// field call is); codes above S are refused.
func TestFixedFormatEveryCode(t *testing.T) {
	for _, p := range [][3]float64{{-3, 7, 0.3}, {0, 1, 0.7}, {-2000, 2000, 0.1}, {0, 0.1, 1}} {
		f, err := NewFixedFormat(p[0], p[1], p[2])
		if err != nil {
			t.Fatal(err)
		}
		n := f.Bits()
		for q := range uint64(1) << n {
			var w Writer
			w.Reset(make([]byte, 16))
			_ = w.WriteBits(q, n)
			var r, rf Reader
			r.Reset(w.Bytes())
			rf.Reset(w.Bytes())
			v, err := f.Read(&r, "v")
			want, wantErr := rf.ReadFixed(p[0], p[1], p[2], "v")
			if math.Float64bits(v) != math.Float64bits(want) || (err == nil) != (wantErr == nil) || r.Pos() != rf.Pos() {
				t.Fatalf("%v code %d: Read %v (%v), ReadFixed %v (%v)", p, q, v, err, want, wantErr)
			}
			if (q > f.steps) != errors.Is(err, ErrOutOfRange) {
				t.Fatalf("%v code %d (S %d): %v", p, q, f.steps, err)
			}
			if err != nil {
				continue
			}
			w.Reset(make([]byte, 16))
			if err := f.Write(&w, v); err != nil || w.BitLen() != int(n) || (n > 0 && w.Bytes()[0] != byte(q)) && q < 256 {
				t.Fatalf("%v code %d: %v rewrites as %x (%v)", p, q, v, w.Bytes(), err)
			}
		}
	}
}

// The refusals: parameters as the field calls refuse them, values outside
// the range or NaN written as nothing, a stream too short or a code above S
// read as nothing, and the zero formats encode only 0 in no bits.
func TestFormatRefusals(t *testing.T) {
	for _, tc := range []struct {
		name                string
		min, max, precision float64
		want                error
	}{
		{"empty range", 1, 1, 0.1, ErrOutOfRange},
		{"reversed", 2, 1, 0.1, ErrOutOfRange},
		{"NaN min", math.NaN(), 1, 0.1, ErrOutOfRange},
		{"zero precision", 0, 1, 0, ErrOutOfRange},
		{"infinite precision", 0, 1, math.Inf(1), ErrOutOfRange},
		{"too many steps", 0, 1e10, 0.1, ErrWidth},
		{"unresolvable", 1e15, 1e15 + 1, 1e-4, ErrWidth},
	} {
		if _, err := NewFixedFormat(tc.min, tc.max, tc.precision); !errors.Is(err, tc.want) {
			t.Errorf("NewFixedFormat %s: %v, want %v", tc.name, err, tc.want)
		}
	}
	for _, tc := range []struct {
		name     string
		min, max float64
		bits     uint
		want     error
	}{
		{"0 bits", 0, 1, 0, ErrWidth},
		{"33 bits", 0, 1, 33, ErrWidth},
		{"empty range", 1, 1, 8, ErrOutOfRange},
		{"infinite range", math.Inf(-1), 1, 8, ErrOutOfRange},
		{"unresolvable", 1e15, 1e15 + 1, 32, ErrWidth},
	} {
		if _, err := NewQuantizedFormat(tc.min, tc.max, tc.bits); !errors.Is(err, tc.want) {
			t.Errorf("NewQuantizedFormat %s: %v, want %v", tc.name, err, tc.want)
		}
	}

	fx, _ := NewFixedFormat(-2000, 2000, 0.01)
	qz, _ := NewQuantizedFormat(-50, 50, 12)
	var w Writer
	w.Reset(make([]byte, 64))
	_ = w.WriteFlag(true)
	for _, err := range []error{
		fx.Write(&w, math.NaN()), fx.Write(&w, 2001), fx.Write3(&w, 0, math.NaN(), 0), fx.Write3(&w, 0, 0, -2001),
		qz.Write(&w, math.Inf(-1)), qz.Write3(&w, 0, 0, 51), qz.Write3(&w, math.NaN(), 0, 0),
	} {
		if !errors.Is(err, ErrOutOfRange) || w.BitLen() != 1 || !errors.Is(w.Err(), ErrOutOfRange) {
			t.Fatalf("refused write: %v, %d bits written", err, w.BitLen())
		}
	}
	// Overflow: three that do not fit are none written, at the buffer's
	// end and in the middle of its last word.
	for _, room := range []int{0, 1, 56, 3*19 - 1, 3*12 - 1} {
		w.Reset(make([]byte, 16))
		for fill := 128 - room; fill > 0; fill -= 64 {
			_ = w.WriteBits(0, uint(min(fill, 64)))
		}
		if err := fx.Write3(&w, 1, 2, 3); (room < 57) != errors.Is(err, ErrOverflow) || (err != nil && w.BitLen() != 128-room) {
			t.Fatalf("fixed Write3 with %d bits left: %v, %d bits", room, err, w.BitLen())
		}
		w.Truncate(128 - room)
		if err := qz.Write3(&w, 1, 2, 3); (room < 36) != errors.Is(err, ErrOverflow) || (err != nil && w.BitLen() != 128-room) {
			t.Fatalf("quantized Write3 with %d bits left: %v, %d bits", room, err, w.BitLen())
		}
	}
	// Read3 of a code above S in the third component consumes nothing.
	w.Reset(make([]byte, 16))
	_ = w.WriteBits(3, 2)
	_ = w.WriteBits(0, 19)
	_ = w.WriteBits(5, 19)
	_ = w.WriteBits(1<<19-1, 19)
	var r Reader
	r.Reset(w.Bytes())
	_, _ = r.ReadBits(2, "pad")
	var re *ReadError
	if _, _, _, err := fx.Read3(&r, "pos"); !errors.As(err, &re) || !errors.Is(err, ErrOutOfRange) || re.Bit != 2 || re.Field != "pos" || r.Pos() != 2 {
		t.Fatalf("Read3 of code 2^19−1: %v, at %d", err, r.Pos())
	}
	r.ResetBits(w.Bytes(), 2+3*12-1)
	_, _ = r.ReadBits(2, "pad")
	if _, _, _, err := qz.Read3(&r, "vel"); !errors.As(err, &re) || !errors.Is(err, io.ErrUnexpectedEOF) || re.Bit != 2 || r.Pos() != 2 {
		t.Fatalf("Read3 past the limit: %v, at %d", err, r.Pos())
	}

	var zf FixedFormat
	var zq QuantizedFormat
	w.Reset(make([]byte, 16))
	if zf.Write(&w, 0) != nil || zf.Write3(&w, 0, 0, 0) != nil || zq.Write(&w, 0) != nil || zq.Write3(&w, 0, 0, 0) != nil || w.BitLen() != 0 {
		t.Fatalf("zero formats wrote %d bits (%v)", w.BitLen(), w.Err())
	}
	if zf.Write(&w, 1) == nil || zq.Write3(&w, 0, 1, 0) == nil {
		t.Fatal("zero formats took a value other than 0")
	}
	r.Reset(nil)
	if v, err := zf.Read(&r, "z"); v != 0 || err != nil {
		t.Fatalf("zero FixedFormat read %v, %v", v, err)
	}
	if x, y, z, err := zq.Read3(&r, "z"); x != 0 || y != 0 || z != 0 || err != nil {
		t.Fatalf("zero QuantizedFormat read %v %v %v, %v", x, y, z, err)
	}
}

func fill(rng *rand.Rand, p []byte) {
	for i := range p {
		p[i] = byte(rng.Uint64())
	}
}
