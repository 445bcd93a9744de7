package bitstream

import (
	"errors"
	"fmt"
	"math"
	"testing"
)

// FuzzRoundTrip: the fuzzer's bytes choose a buffer size, which writes get a
// scrap field written and truncated away before them, and a sequence of
// typed writes (values, ranges, widths — sometimes invalid). Refused writes
// must leave the stream untouched; everything written must read back as
// written (or within its quantization bound), and re-writing the decoded
// values must give identical bits. See roundTrip.
func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte{200, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte("\x10\xff\x00\x00\x00\x00\x00\x00\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f"))
	f.Add([]byte("\x05\x00\x00\x00\x00\x00\x00\x00\x00\x0a\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"))
	f.Add([]byte("\xff\x55\x55\x55\x55\x55\x55\x55\x55quaternions, vectors and strings at the end of a buffer"))
	f.Fuzz(func(t *testing.T, data []byte) {
		bufLen, undo, ops := fuzzOps(data)
		if err := roundTrip(ops, bufLen, undo); err != nil {
			t.Fatalf("%d-byte buffer, undo %#x: %v", bufLen, undo, err)
		}
	})
}

// fuzzOps decodes fuzzer bytes: byte 0 the buffer size (255 means a full
// 1200-byte packet), bytes 1..8 the undo mask, then per op a control byte
// (low 5 bits zero: generate invalid values) followed by the op's entropy.
func fuzzOps(data []byte) (bufLen int, undo uint64, ops []op) {
	e := &byteEntropy{p: data}
	bufLen = int(e.byte()) + 1
	if bufLen == 256 {
		bufLen = 1200
	}
	undo = e.u64()
	for len(e.p) > 0 && len(ops) < 256 {
		ctl := e.byte()
		ops = append(ops, genOp(e, ctl&0x1f == 0))
	}
	return bufLen, undo, ops
}

// FuzzReaderGarbage: arbitrary bytes read through a sequence of typed reads
// that prog chooses (kinds, widths, ranges, maxLens; prog[0] also trims 0..7
// bits off the end with ResetBits). Nothing may panic. A failed read must
// return a *ReadError naming the field and its start, and consume nothing. A
// successful read must yield a value its encoding can produce (in range,
// finite, unit length, within maxLen), and re-encoding that value must give
// exactly the bits consumed: every accepted encoding is canonical.
func FuzzReaderGarbage(f *testing.F) {
	f.Add([]byte{0}, []byte{})
	f.Add([]byte{3, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}, []byte("\x8d\x06\xff\xff\x00\x00\x80\x7f"))
	f.Add([]byte("\x00quaternion, vector, string and gamma shapes"), []byte("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"))
	f.Add([]byte("\x01\x0a\x0b\x0c\x0d\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19"), []byte("\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01"))
	f.Fuzz(func(t *testing.T, prog, data []byte) {
		if err := readGarbage(prog, data); err != nil {
			t.Fatal(err)
		}
	})
}

func readGarbage(prog, data []byte) error {
	tab := newTestTable()
	e := &byteEntropy{p: prog}
	var r Reader
	r.ResetBits(data, 8*len(data)-int(e.byte()%8))
	scratch := make([]byte, 2048)
	for step := 0; len(e.p) > 0 && step < 256; step++ {
		shape := genOp(e, false)
		at := r.Pos()
		got, err := readOp(&r, tab, shape)
		if err != nil {
			var re *ReadError
			if !errors.As(err, &re) {
				return fmt.Errorf("step %d %v: error %v is not a *ReadError", step, shape.kind, err)
			}
			if re.Field != shape.kind.String() || re.Bit != at || r.Pos() != at {
				return fmt.Errorf("step %d %v: %+v at pos %d, want field %q at bit %d, nothing consumed", step, shape.kind, re, r.Pos(), shape.kind, at)
			}
			continue
		}
		if err := validDecoded(got); err != nil {
			return fmt.Errorf("step %d: %v", step, err)
		}
		w := NewWriter(scratch)
		reenc := got
		if _, inTable := tab.Lookup(got.s); got.kind == opTable && inTable && data[at>>3]>>(at&7)&1 == 0 {
			// A literal of a string the table holds is accepted on purpose
			// (the sender may not know yet that we have it), so only the
			// literal itself must be canonical: flag 0 + WriteString.
			_ = w.WriteFlag(false)
			reenc.kind = opString
		}
		if err := writeOp(w, tab, reenc); err != nil {
			return fmt.Errorf("step %d: re-writing decoded %v: %v", step, got, err)
		}
		if w.BitLen() != r.Pos()-at || !sameBits(data, at, w.Bytes(), w.BitLen()) {
			return fmt.Errorf("step %d: decoded %v from %d bits at %d, re-encodes to %d different bits %x", step, got, r.Pos()-at, at, w.BitLen(), w.Bytes())
		}
	}
	return nil
}

// validDecoded checks what any decoder promises about its result.
func validDecoded(o op) error {
	finite := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	switch o.kind {
	case opRanged:
		if o.i < o.lo || o.i > o.hi {
			return fmt.Errorf("%v outside its range", o)
		}
	case opQuant, opFixed:
		if !(o.f >= o.fmin && o.f <= o.fmax) {
			return fmt.Errorf("%v outside its range", o)
		}
	case opSigned:
		if !(o.f >= -1 && o.f <= 1) {
			return fmt.Errorf("%v outside [-1, 1]", o)
		}
	case opUnit:
		if !(o.f >= 0 && o.f <= 1) {
			return fmt.Errorf("%v outside [0, 1]", o)
		}
	case opFloat32:
		if !finite(float64(o.f32)) {
			return fmt.Errorf("%v not finite", o)
		}
	case opVec:
		if l := math.Sqrt(o.v[0]*o.v[0] + o.v[1]*o.v[1] + o.v[2]*o.v[2]); !(math.Abs(l-1) < 1e-12) {
			return fmt.Errorf("%v has length %v", o, l)
		}
	case opQuat:
		if l := math.Sqrt(o.q[0]*o.q[0] + o.q[1]*o.q[1] + o.q[2]*o.q[2] + o.q[3]*o.q[3]); !(math.Abs(l-1) < 1e-12) {
			return fmt.Errorf("%v has length %v", o, l)
		}
	case opString, opTable:
		if len(o.s) > o.maxLen {
			return fmt.Errorf("%v longer than its maximum", o)
		}
	case opGamma:
		if o.u == 0 {
			return fmt.Errorf("gamma decoded 0")
		}
	}
	return nil
}

// sameBits reports whether the n bits of a from bit offset at equal the
// first n bits of b.
func sameBits(a []byte, at int, b []byte, n int) bool {
	ra, rb := NewReader(a), NewReader(b)
	ra.bit = at
	for n > 0 {
		k := uint(min(n, 64))
		x, err1 := ra.ReadBits(k, "a")
		y, err2 := rb.ReadBits(k, "b")
		if err1 != nil || err2 != nil || x != y {
			return false
		}
		n -= int(k)
	}
	return true
}

// FuzzFormats: the fuzzer's bytes choose a fixed-point or quantized format
// from the menus, a bit offset, a buffer size and values (in range, or raw
// float bits). Written through the format's Write and Write3, the stream
// must be the per-field calls' stream bit for bit, with the same refusals
// (Write3 all or nothing); read back — and read from the fuzzer's own
// bytes as garbage — Read and Read3 must return the field calls' values,
// positions and errors (Read3 all or nothing).
func FuzzFormats(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte("\x01\x03\x07\x11\x22\x33\x44\x55\x66\x77\x88\x99\xaa\xbb\xcc\xdd\xee\xff\x00\x10\x20\x30\x40"))
	f.Add([]byte("\x80\x05\x02\xff\xff\xff\xff\xff\xff\xff\xff\x7f\xf8\x00\x00\x00\x00\x00\x00positions near the ends"))
	f.Add([]byte("\x81\x06\x09\x00\x00\x00\x00\x00\x00\xf0\x7f\x00\x00\x00\x00\x00\x00\xf0\xffvelocity, health, angles"))
	f.Fuzz(func(t *testing.T, data []byte) {
		e := &byteEntropy{p: data}
		ctl, off, size := e.byte(), int(e.byte()%8), int(e.byte())+1
		var vals []float64
		pick := func(lo, hi float64) {
			for len(e.p) > 0 && len(vals) < 96 {
				x := e.u64()
				if x&7 == 0 {
					vals = append(vals, math.Float64frombits(e.u64())) // raw: NaN, ±Inf, out of range
				} else {
					vals = append(vals, math.Min(math.Max(lo+frac(x)*(hi-lo), lo), hi))
				}
			}
		}
		var err error
		if ctl&0x80 == 0 {
			p := formatFixed[int(ctl)%len(formatFixed)]
			lo, hi, prec := p[0], p[1], p[2]
			fm, ferr := NewFixedFormat(lo, hi, prec)
			if ferr != nil {
				return
			}
			pick(lo, hi)
			if err = fieldsAndFormat(off, size, vals, func(w *Writer, v float64) error { return w.WriteFixed(v, lo, hi, prec) }, fm.Write, fm.Write3); err != nil {
				t.Fatalf("fixed %v: %v", p, err)
			}
			var w Writer
			w.Reset(make([]byte, 1024))
			for _, v := range vals {
				_ = w.WriteFixed(v, lo, hi, prec)
			}
			for _, in := range [][]byte{w.Bytes(), data} {
				err = readsAgree(in, 8*len(in)-int(ctl>>4&7), off,
					func(r *Reader) (float64, error) { return r.ReadFixed(lo, hi, prec, "v") },
					func(r *Reader) (float64, error) { return fm.Read(r, "v") }, func(r *Reader) (float64, float64, float64, error) { return fm.Read3(r, "v") })
				if err != nil {
					t.Fatalf("fixed %v: %v", p, err)
				}
			}
			return
		}
		p := formatQuant[int(ctl&0x7f)%len(formatQuant)]
		lo, hi, bits := p[0], p[1], uint(p[2])
		fm, ferr := NewQuantizedFormat(lo, hi, bits)
		if ferr != nil {
			t.Fatalf("quantized %v: %v", p, ferr)
		}
		pick(lo, hi)
		if err = fieldsAndFormat(off, size, vals, func(w *Writer, v float64) error { return w.WriteQuantized(v, lo, hi, bits) }, fm.Write, fm.Write3); err != nil {
			t.Fatalf("quantized %v: %v", p, err)
		}
		err = readsAgree(data, 8*len(data)-int(ctl>>4&7), off,
			func(r *Reader) (float64, error) { return r.ReadQuantized(lo, hi, bits, "v") },
			func(r *Reader) (float64, error) { return fm.Read(r, "v") }, func(r *Reader) (float64, float64, float64, error) { return fm.Read3(r, "v") })
		if err != nil {
			t.Fatalf("quantized %v: %v", p, err)
		}
	})
}
