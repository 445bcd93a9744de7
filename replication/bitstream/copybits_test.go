package bitstream

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
)

// TestWriteBitsFromMatchesFieldByField splices random bit strings at every
// offset and checks the result equals writing the same fields directly.
func TestWriteBitsFromMatchesFieldByField(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := 0; iter < 2000; iter++ {
		prefix := rng.IntN(70)
		// The section: random fields packed in their own buffer.
		var sec [64]byte
		var sw Writer
		sw.Reset(sec[:])
		type field struct {
			v uint64
			n uint
		}
		var fields []field
		for sw.BitLen() < rng.IntN(400) {
			n := uint(1 + rng.IntN(64))
			v := rng.Uint64() >> (64 - n)
			if sw.WriteBits(v, n) != nil {
				break
			}
			fields = append(fields, field{v, n})
		}
		// Dirty the unused tail of the section buffer: it must be ignored.
		if l := sw.Len(); l < len(sec) {
			sec[l] = 0xFF
		}
		if off := sw.BitLen() & 7; off != 0 {
			sec[sw.BitLen()>>3] |= 0xFF << off
		}

		var got, want [128]byte
		var gw, ww Writer
		// Exactly as long as needed: the splice's word loop must stop short of
		// the end and finish byte by byte.
		gw.Reset(got[:(prefix+sw.BitLen()+3+7)/8])
		ww.Reset(want[:])
		for i := 0; i < prefix; i++ {
			b := rng.IntN(2) == 1
			gw.WriteFlag(b)
			ww.WriteFlag(b)
		}
		if err := gw.WriteBitsFrom(sec[:], sw.BitLen()); err != nil {
			t.Fatalf("iter %d: %v", iter, err)
		}
		for _, f := range fields {
			ww.WriteBits(f.v, f.n)
		}
		gw.WriteBits(5, 3) // a field after the splice lands right behind it
		ww.WriteBits(5, 3)
		if gw.BitLen() != ww.BitLen() || !bytes.Equal(gw.Bytes(), ww.Bytes()) {
			t.Fatalf("iter %d (prefix %d, %d bits): got %x want %x", iter, prefix, sw.BitLen(), gw.Bytes(), ww.Bytes())
		}
	}
}

func TestWriteBitsFromErrorsAreAtomic(t *testing.T) {
	src := []byte{0xAB, 0xCD}
	var buf [2]byte
	var w Writer
	w.Reset(buf[:])
	w.WriteBits(1, 3)
	if err := w.WriteBitsFrom(src, 17); !errors.Is(err, ErrWidth) {
		t.Fatalf("nbits beyond src: %v, want ErrWidth", err)
	}
	if err := w.WriteBitsFrom(src, -1); !errors.Is(err, ErrWidth) {
		t.Fatalf("negative nbits: %v, want ErrWidth", err)
	}
	w.Truncate(3)
	w.Reset(buf[:])
	w.WriteBits(1, 3)
	if err := w.WriteBitsFrom(src, 14); !errors.Is(err, ErrOverflow) {
		t.Fatalf("too long: %v, want ErrOverflow", err)
	}
	if w.BitLen() != 3 || buf[0] != 1 {
		t.Fatalf("failed write changed the stream: %d bits, %x", w.BitLen(), buf)
	}
	w.Truncate(3)
	if err := w.WriteBitsFrom(src, 13); err != nil {
		t.Fatalf("exact fit: %v", err)
	}
	if err := w.WriteBitsFrom(src, 0); err != nil || w.BitLen() != 16 {
		t.Fatalf("zero bits: %v, %d", err, w.BitLen())
	}
}

func TestWriteBitsFromAllocs(t *testing.T) {
	src := make([]byte, 900)
	dst := make([]byte, 1200)
	var w Writer
	if n := testing.AllocsPerRun(100, func() {
		w.Reset(dst)
		w.WriteBits(3, 5)
		w.WriteBitsFrom(src, 7000)
	}); n != 0 {
		t.Fatalf("%v allocs", n)
	}
}

// BenchmarkWriteBitsFrom splices a 900-byte section at an unaligned offset
// (the ghost section after a 17-bit control section).
func BenchmarkWriteBitsFrom(b *testing.B) {
	src := make([]byte, 900)
	for i := range src {
		src[i] = byte(i * 7)
	}
	dst := make([]byte, 1200)
	var w Writer
	b.ReportAllocs()
	b.SetBytes(900)
	for b.Loop() {
		w.Reset(dst)
		w.WriteBits(3, 17)
		w.WriteBitsFrom(src, 900*8-3)
	}
}

func TestResizeKeepsBitsAndLimits(t *testing.T) {
	buf := make([]byte, 8)
	var w Writer
	w.Reset(buf[:2])
	w.WriteBits(0x1FF, 9)
	if err := w.WriteBits(0xFF, 8); !errors.Is(err, ErrOverflow) {
		t.Fatalf("write past the cap: %v, want ErrOverflow", err)
	}
	w.Truncate(9)
	if err := w.Resize(1); !errors.Is(err, ErrWidth) {
		t.Fatalf("resize below Len: %v, want ErrWidth", err)
	}
	if err := w.Resize(9); !errors.Is(err, ErrWidth) {
		t.Fatalf("resize beyond cap: %v, want ErrWidth", err)
	}
	if err := w.Resize(8); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteBits(0xAB, 8); err != nil {
		t.Fatalf("write after growing: %v", err)
	}
	var r Reader
	r.Reset(w.Bytes())
	if v, _ := r.ReadBits(9, "a"); v != 0x1FF {
		t.Fatalf("first field %x", v)
	}
	if v, _ := r.ReadBits(8, "b"); v != 0xAB {
		t.Fatalf("second field %x", v)
	}
	if w.Remaining() != 64-17 {
		t.Fatalf("remaining %d", w.Remaining())
	}
}
