package bitstream

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// BS-1: the book's figure 4.9, on any host.
func TestBitOrderFigure49(t *testing.T) {
	w := NewWriter(make([]byte, 4))
	if err := w.WriteBits(13, 5); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteBits(52, 6); err != nil {
		t.Fatal(err)
	}
	if w.BitLen() != 11 || w.Len() != 2 {
		t.Fatalf("BitLen %d Len %d, want 11 and 2", w.BitLen(), w.Len())
	}
	if got := w.Bytes(); !bytes.Equal(got, []byte{0x8D, 0x06}) {
		t.Fatalf("bytes %x, want 8d06", got)
	}
	r := NewReader(w.Bytes())
	a, err1 := r.ReadBits(5, "a")
	b, err2 := r.ReadBits(6, "b")
	if a != 13 || b != 52 || err1 != nil || err2 != nil {
		t.Fatalf("read %d, %d (%v, %v), want 13, 52", a, b, err1, err2)
	}
}

// BS-3: a multi-byte value's bytes come out least significant first.
func TestMultiByteOrder(t *testing.T) {
	w := NewWriter(make([]byte, 8))
	if err := w.WriteBits(0x12345678, 32); err != nil {
		t.Fatal(err)
	}
	if got := w.Bytes(); !bytes.Equal(got, []byte{0x78, 0x56, 0x34, 0x12}) {
		t.Fatalf("bytes %x, want 78563412", got)
	}
}

// BS-5.
func TestEightFlagsAreOneByte(t *testing.T) {
	w := NewWriter(bytes.Repeat([]byte{0xFF}, 2))
	pattern := []bool{true, false, true, true, false, false, true, false}
	for _, f := range pattern {
		if err := w.WriteFlag(f); err != nil {
			t.Fatal(err)
		}
	}
	if w.Len() != 1 || w.BitLen() != 8 {
		t.Fatalf("Len %d BitLen %d, want 1 and 8", w.Len(), w.BitLen())
	}
	if got := w.Bytes()[0]; got != 0b01001101 {
		t.Fatalf("byte %08b, want 01001101", got)
	}
	r := NewReader(w.Bytes())
	for i, want := range pattern {
		if got, err := r.ReadFlag("f"); got != want || err != nil {
			t.Fatalf("flag %d: %v, %v", i, got, err)
		}
	}
	if _, err := r.ReadFlag("f9"); !errors.Is(err, errEOF) {
		t.Fatalf("ninth flag: %v, want unexpected EOF", err)
	}
}

func TestWriteBitsRefusesBadWidths(t *testing.T) {
	tests := []struct {
		name string
		v    uint64
		n    uint
	}{
		{"zero width", 0, 0},
		{"65 bits", 0, 65},
		{"huge width", 0, math.MaxUint},
		{"value wider than width", 4, 2},
		{"value wider than 56 bits", 1 << 57, 57},
		{"all ones in 63 bits", math.MaxUint64, 63},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := NewWriter(make([]byte, 32))
			_ = w.WriteBits(1, 3)
			if err := w.WriteBits(tc.v, tc.n); !errors.Is(err, ErrWidth) {
				t.Fatalf("err %v, want ErrWidth", err)
			}
			if w.BitLen() != 3 || !errors.Is(w.Err(), ErrWidth) {
				t.Fatalf("BitLen %d Err %v after refusal", w.BitLen(), w.Err())
			}
		})
	}
	w := NewWriter(make([]byte, 16))
	if err := w.WriteBits(math.MaxUint64, 64); err != nil {
		t.Fatalf("64 bits of ones: %v", err)
	}
}

func TestOverflowIsAtomicAndRecorded(t *testing.T) {
	w := NewWriter(make([]byte, 2))
	if err := w.WriteBits(0x3ff, 10); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteBits(0, 7); !errors.Is(err, ErrOverflow) {
		t.Fatalf("7 bits with 6 left: %v", err)
	}
	if w.BitLen() != 10 {
		t.Fatalf("failed write moved BitLen to %d", w.BitLen())
	}
	// A smaller item may still go in; the first error stays recorded.
	if err := w.WriteBits(5, 3); err != nil {
		t.Fatalf("3 bits with 6 left: %v", err)
	}
	if err := w.WriteRangedInt(99, 0, 10); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("out of range: %v", err)
	}
	if !errors.Is(w.Err(), ErrOverflow) {
		t.Fatalf("Err %v, want the first error ErrOverflow", w.Err())
	}
	var zero Writer
	if err := zero.WriteFlag(true); !errors.Is(err, ErrOverflow) {
		t.Fatalf("zero Writer: %v", err)
	}
	if zero.Bytes() == nil && zero.Len() != 0 {
		t.Fatal("zero Writer has bytes")
	}
}

func TestTruncate(t *testing.T) {
	t.Run("restores zero padding", func(t *testing.T) {
		for mark := range 64 {
			w := NewWriter(make([]byte, 16))
			_ = w.WriteBits(math.MaxUint64, 64)
			_ = w.WriteBits(math.MaxUint64>>1, 63)
			w.Truncate(mark)
			if w.BitLen() != mark || !paddingZero(w) {
				t.Fatalf("Truncate(%d): BitLen %d bytes %x", mark, w.BitLen(), w.Bytes())
			}
			// and the stream continues correctly from there
			_ = w.WriteBits(0b101, 3)
			r := NewReader(w.Bytes())
			_, _ = r.ReadBits(uint(max(mark, 1)), "skip")
			if mark == 0 {
				r.Reset(w.Bytes())
			}
			if v, err := r.ReadBits(3, "v"); v != 0b101 || err != nil {
				t.Fatalf("after Truncate(%d): read %b, %v", mark, v, err)
			}
		}
	})
	t.Run("clears overflow when rewinding to it", func(t *testing.T) {
		w := NewWriter(make([]byte, 2))
		_ = w.WriteBits(1, 4)
		mark := w.BitLen()
		_ = w.WriteBits(1, 8)
		_ = w.WriteBits(1, 8) // overflows at bit 12
		w.Truncate(mark)
		if w.Err() != nil || w.BitLen() != 4 {
			t.Fatalf("Err %v BitLen %d", w.Err(), w.BitLen())
		}
	})
	t.Run("keeps overflow when rewinding past it", func(t *testing.T) {
		w := NewWriter(make([]byte, 2))
		_ = w.WriteBits(1, 8)
		_ = w.WriteBits(1, 9) // overflows at bit 8: missing field
		_ = w.WriteBits(1, 4) // lands after the missing field
		w.Truncate(10)
		if !errors.Is(w.Err(), ErrOverflow) {
			t.Fatalf("Err %v: a stream with a hole must keep its error", w.Err())
		}
	})
	t.Run("keeps caller bugs", func(t *testing.T) {
		w := NewWriter(make([]byte, 4))
		_ = w.WriteRangedInt(5, 0, 3)
		w.Truncate(0)
		if !errors.Is(w.Err(), ErrOutOfRange) {
			t.Fatalf("Err %v", w.Err())
		}
	})
	t.Run("ignores bad lengths", func(t *testing.T) {
		w := NewWriter(make([]byte, 4))
		_ = w.WriteBits(7, 5)
		w.Truncate(6)
		w.Truncate(-1)
		if w.BitLen() != 5 {
			t.Fatalf("BitLen %d", w.BitLen())
		}
	})
}

func TestResetOverJunkBuffer(t *testing.T) {
	buf := bytes.Repeat([]byte{0xFF}, 12)
	w := NewWriter(buf)
	_ = w.WriteBits(0, 3)
	_ = w.WriteFlag(false)
	_ = w.WriteBits(1, 9)
	if got := w.Bytes(); !bytes.Equal(got, []byte{0x10, 0x00}) {
		t.Fatalf("bytes %x, want 1000", got)
	}
	w.Reset(buf)
	if w.BitLen() != 0 || w.Err() != nil || w.Cap() != 96 || w.Remaining() != 96 {
		t.Fatalf("after Reset: BitLen %d Err %v Cap %d Remaining %d", w.BitLen(), w.Err(), w.Cap(), w.Remaining())
	}
}

func TestRangeBits(t *testing.T) {
	tests := []struct {
		name     string
		min, max int64
		want     uint
	}{
		{"single value", 5, 5, 0},
		{"two values", 0, 1, 1},
		{"torque 0..32 is 33 values", 0, 32, 6},
		{"0..31", 0, 31, 5},
		{"torque 0..64", 0, 64, 7},
		{"enum with 1024 slots", 0, 1023, 10},
		{"signed nibble", -8, 7, 4},
		{"shifted", 1000, 1003, 2},
		{"int32", math.MinInt32, math.MaxInt32, 32},
		{"all int64", math.MinInt64, math.MaxInt64, 64},
		{"upper half", 0, math.MaxInt64, 63},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := RangeBits(tc.min, tc.max); got != tc.want {
				t.Fatalf("RangeBits(%d, %d) = %d, want %d", tc.min, tc.max, got, tc.want)
			}
		})
	}
}

// BS-6: every v in range round-trips in the documented width; outside is
// refused on write, and wire values above max are refused on read.
func TestRangedInt(t *testing.T) {
	tests := []struct {
		name     string
		min, max int64
	}{
		{"0..32", 0, 32},
		{"single value", 7, 7},
		{"-8..7", -8, 7},
		{"-100..100", -100, 100},
		{"1..1000", 1, 1000},
		{"0..64", 0, 64},
		{"around zero wide", -70000, 70000},
		{"near max", math.MaxInt64 - 40, math.MaxInt64},
		{"near min", math.MinInt64, math.MinInt64 + 40},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := RangeBits(tc.min, tc.max)
			span := uint64(tc.max) - uint64(tc.min)
			step := max(span/5000, 1)
			for u := uint64(0); ; u += step {
				if u > span {
					u = span
				}
				v := int64(uint64(tc.min) + u)
				w := NewWriter(make([]byte, 16))
				_ = w.WriteBits(1, 3) // misalign
				if err := w.WriteRangedInt(v, tc.min, tc.max); err != nil {
					t.Fatalf("write %d: %v", v, err)
				}
				if w.BitLen() != 3+int(n) {
					t.Fatalf("write %d: %d bits, want %d", v, w.BitLen()-3, n)
				}
				r := NewReader(w.Bytes())
				_, _ = r.ReadBits(3, "pad")
				got, err := r.ReadRangedInt(tc.min, tc.max, "v")
				if err != nil || got != v {
					t.Fatalf("read %d, %v; want %d", got, err, v)
				}
				if u == span {
					break
				}
			}
			w := NewWriter(make([]byte, 16))
			if tc.min > math.MinInt64 {
				if err := w.WriteRangedInt(tc.min-1, tc.min, tc.max); !errors.Is(err, ErrOutOfRange) {
					t.Fatalf("min-1: %v", err)
				}
			}
			if tc.max < math.MaxInt64 {
				if err := w.WriteRangedInt(tc.max+1, tc.min, tc.max); !errors.Is(err, ErrOutOfRange) {
					t.Fatalf("max+1: %v", err)
				}
			}
			if w.BitLen() != 0 {
				t.Fatalf("refused writes left %d bits", w.BitLen())
			}
			// Every wire value above max is rejected on read, consuming nothing.
			if n > 0 && n < 64 {
				for u := span + 1; u < 1<<n && u < span+200; u++ {
					w.Reset(make([]byte, 16))
					_ = w.WriteBits(u, n)
					r := NewReader(w.Bytes())
					_, err := r.ReadRangedInt(tc.min, tc.max, "hostile")
					var re *ReadError
					if !errors.As(err, &re) || !errors.Is(err, ErrOutOfRange) || re.Field != "hostile" || r.Pos() != 0 {
						t.Fatalf("wire %d: %v (pos %d)", u, err, r.Pos())
					}
				}
			}
		})
	}
	var w Writer
	if err := w.WriteRangedInt(0, 1, 0); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("min > max: %v", err)
	}
	var r Reader
	if _, err := r.ReadRangedInt(1, 0, "bad"); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("read min > max: %v", err)
	}
}

func TestBytesRoundTrip(t *testing.T) {
	payload := []byte("the quick brown fox jumps over the lazy dog")
	for lead := range 9 {
		w := NewWriter(make([]byte, 64))
		_ = w.WriteBits(0, uint(max(lead, 1)))
		if lead == 0 {
			w.Reset(make([]byte, 64))
		}
		if err := w.WriteBytes(payload); err != nil {
			t.Fatal(err)
		}
		r := NewReader(w.Bytes())
		if lead > 0 {
			_, _ = r.ReadBits(uint(lead), "lead")
		}
		got := make([]byte, len(payload))
		if err := r.ReadBytes(got, "payload"); err != nil || !bytes.Equal(got, payload) {
			t.Fatalf("lead %d: %q, %v", lead, got, err)
		}
		if err := r.ReadBytes(make([]byte, 2), "more"); !errors.Is(err, errEOF) {
			t.Fatalf("lead %d: reading past the end: %v", lead, err)
		}
	}
	w := NewWriter(make([]byte, 4))
	_ = w.WriteFlag(true)
	if err := w.WriteBytes([]byte{1, 2, 3, 4}); !errors.Is(err, ErrOverflow) || w.BitLen() != 1 {
		t.Fatalf("overfull WriteBytes: %v, BitLen %d", err, w.BitLen())
	}
}

// TestTryWriteBitsIsWriteBits: TryWriteBits either writes exactly what
// WriteBits writes (the same bytes, the same length) or reports false and
// leaves the writer as it was — at every bit offset, near the buffer's end
// (where the 8-byte store does not fit), for fields too wide for the fast
// path and for values wider than their field.
func TestTryWriteBitsIsWriteBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	var took, fell int
	for i := 0; i < 20000; i++ {
		size := 1 + rng.IntN(16)
		pre := uint(rng.IntN(8 * size))
		n := uint(1 + rng.IntN(64))
		v := rng.Uint64()
		if rng.IntN(8) != 0 && n < 64 {
			v &= 1<<n - 1 // mostly values that fit
		}
		junk := rng.Uint64()
		a, b := make([]byte, size), make([]byte, size)
		wa, wb := NewWriter(a), NewWriter(b)
		for _, w := range []*Writer{wa, wb} { // the same prefix in both
			for k := pre; k > 0; {
				m := min(k, 56)
				w.WriteBits(junk&(1<<m-1), m)
				k -= m
			}
		}
		before := append([]byte(nil), a...)
		if wa.TryWriteBits(v, n) {
			took++
			if err := wb.WriteBits(v, n); err != nil {
				t.Fatalf("TryWriteBits(%#x, %d) at bit %d of %d bytes wrote what WriteBits refuses: %v", v, n, pre, size, err)
			}
			if !bytes.Equal(a, b) || wa.BitLen() != wb.BitLen() {
				t.Fatalf("TryWriteBits(%#x, %d) at bit %d: %x (%d bits), WriteBits %x (%d bits)", v, n, pre, a, wa.BitLen(), b, wb.BitLen())
			}
			continue
		}
		fell++
		if !bytes.Equal(a, before) || wa.BitLen() != int(pre) || wa.Err() != nil {
			t.Fatalf("TryWriteBits(%#x, %d) at bit %d reported false but changed the writer", v, n, pre)
		}
	}
	if took == 0 || fell == 0 {
		t.Fatalf("took the fast path %d times, fell back %d: the cases do not cover both", took, fell)
	}
}

// The caller's buffer holds every bit written so far whenever BitLen or Len
// returns, mid-write: the ghost table splices its scratch buffer after
// reading only the scratch writer's BitLen, and the session seals the bytes
// of its buffer after reading only Len. A writer that keeps bits back (an
// accumulator storing a word at a time) must store them there; so must it
// after a Truncate to an earlier word and across a Resize. Read straight from
// the buffer, never through Bytes.
func TestCallersBufferHoldsEveryBitMidWrite(t *testing.T) {
	for seed := range uint64(400) {
		rng := rand.New(rand.NewPCG(seed, 7))
		capLen := 1 + rng.IntN(40)
		if seed%8 == 0 {
			capLen = 1200
		}
		backing := bytes.Repeat([]byte{0xA5}, capLen) // junk: the writer may not rely on zeros
		buf := backing[:capLen-rng.IntN(min(capLen, 4))]
		var w Writer
		w.Reset(buf)
		var ref refBits
		for k := range 200 {
			var desc string
			switch op := rng.IntN(8); op {
			case 0, 1:
				n := uint(1 + rng.IntN(64))
				v := rng.Uint64() >> (64 - n)
				desc = fmt.Sprintf("WriteBits(%#x, %d)", v, n)
				if w.WriteBits(v, n) == nil {
					ref.put(v, n)
				}
			case 2, 3:
				b := rng.IntN(2) == 1
				desc = fmt.Sprintf("WriteFlag(%v)", b)
				if w.WriteFlag(b) == nil {
					var v uint64
					if b {
						v = 1
					}
					ref.put(v, 1)
				}
			case 4:
				p := make([]byte, rng.IntN(12))
				for i := range p {
					p[i] = byte(rng.Uint32())
				}
				desc = fmt.Sprintf("WriteBytes(%x)", p)
				if w.WriteBytes(p) == nil {
					for _, c := range p {
						ref.put(uint64(c), 8)
					}
				}
			case 5:
				src := make([]byte, 1+rng.IntN(12))
				for i := range src {
					src[i] = byte(rng.Uint32())
				}
				nbits := rng.IntN(8*len(src) + 1)
				desc = fmt.Sprintf("WriteBitsFrom(%x, %d)", src, nbits)
				if w.WriteBitsFrom(src, nbits) == nil {
					for i := range nbits {
						ref.put(uint64(src[i>>3]>>(i&7)&1), 1)
					}
				}
			case 6:
				mark := rng.IntN(len(ref.b) + 1)
				desc = fmt.Sprintf("Truncate(%d)", mark)
				w.Truncate(mark)
				ref.b = ref.b[:mark]
			case 7:
				n := (len(ref.b)+7)/8 + rng.IntN(capLen-(len(ref.b)+7)/8+1)
				desc = fmt.Sprintf("Resize(%d)", n)
				if err := w.Resize(n); err != nil {
					t.Fatalf("seed %d op %d: %s: %v", seed, k, desc, err)
				}
				buf = buf[:n]
			}
			var nbytes int
			if k%2 == 0 {
				nbytes = (w.BitLen() + 7) / 8
			} else {
				nbytes = w.Len()
			}
			if want := ref.bytes(); nbytes != len(want) || !bytes.Equal(backing[:nbytes], want) {
				t.Fatalf("seed %d op %d, after %s: the buffer holds %x (%d bits), written %x (%d bits)",
					seed, k, desc, backing[:nbytes], w.BitLen(), want, len(ref.b))
			}
		}
	}
}
