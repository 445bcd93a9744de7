package bitstream

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

func TestGammaCodes(t *testing.T) {
	// Stream bits, first to last: z zeros, a one, then the low z bits of v.
	tests := []struct {
		v      uint64
		stream string
	}{
		{1, "1"},
		{2, "010"},
		{3, "011"},
		{4, "00100"},
		{5, "00110"},
		{6, "00101"},
		{7, "00111"},
		{8, "0001000"},
	}
	for _, tc := range tests {
		w := NewWriter(make([]byte, 4))
		if err := w.WriteGamma(tc.v); err != nil {
			t.Fatal(err)
		}
		r := NewReader(w.Bytes())
		var got []byte
		for range w.BitLen() {
			b, _ := r.ReadFlag("b")
			got = append(got, map[bool]byte{false: '0', true: '1'}[b])
		}
		if string(got) != tc.stream || GammaBits(tc.v) != len(tc.stream) {
			t.Fatalf("gamma(%d) = %s (GammaBits %d), want %s", tc.v, got, GammaBits(tc.v), tc.stream)
		}
	}
}

func TestGammaRoundTrip(t *testing.T) {
	var values []uint64
	for z := range 64 {
		p := uint64(1) << z
		values = append(values, p, p|(p-1), p|(p>>1))
	}
	values = append(values, math.MaxUint64)
	rng := rand.New(rand.NewPCG(12, 13))
	for range 2000 {
		values = append(values, rng.Uint64()>>rng.IntN(64)|1)
	}
	for _, v := range values {
		size := GammaBits(v)
		for _, lead := range []int{0, 3, 7} {
			// A buffer that ends right after the code (slow path) and a
			// roomy one (fast path).
			for _, bufLen := range []int{(lead + size + 7) / 8, 64} {
				w := NewWriter(make([]byte, bufLen))
				_ = w.WriteBits(0, uint(max(lead, 1)))
				if lead == 0 {
					w.Reset(w.buf)
				}
				if err := w.WriteGamma(v); err != nil || w.BitLen() != lead+size {
					t.Fatalf("gamma(%d) lead %d: %v, %d bits, want %d", v, lead, err, w.BitLen()-lead, size)
				}
				var r Reader
				r.ResetBits(w.Bytes(), w.BitLen())
				if lead > 0 {
					_, _ = r.ReadBits(uint(lead), "lead")
				}
				got, err := r.ReadGamma("n")
				if err != nil || got != v || r.Remaining() != 0 {
					t.Fatalf("gamma(%d) lead %d buf %d: read %d, %v, %d left", v, lead, bufLen, got, err, r.Remaining())
				}
				// Any shorter stream is a truncation.
				r.ResetBits(w.Bytes(), w.BitLen()-1)
				if lead > 0 {
					_, _ = r.ReadBits(uint(lead), "lead")
				}
				if _, err := r.ReadGamma("n"); !errors.Is(err, errEOF) || r.Pos() != lead {
					t.Fatalf("gamma(%d) truncated: %v, pos %d", v, err, r.Pos())
				}
			}
		}
	}
}

func TestGammaRefusals(t *testing.T) {
	w := NewWriter(make([]byte, 32))
	if err := w.WriteGamma(0); !errors.Is(err, ErrOutOfRange) || GammaBits(0) != 0 {
		t.Fatalf("gamma(0): %v", err)
	}
	w.Reset(make([]byte, 32))
	_ = w.WriteBits(0, 64) // 64 zeros announce more than 64 bits
	_ = w.WriteBits(math.MaxUint64, 64)
	r := NewReader(w.Bytes())
	var re *ReadError
	if _, err := r.ReadGamma("n"); !errors.As(err, &re) || !errors.Is(err, ErrOutOfRange) || re.Field != "n" || r.Pos() != 0 {
		t.Fatalf("64 zeros: %v", err)
	}
	r.Reset(make([]byte, 5)) // only zeros, fewer than 64
	if _, err := r.ReadGamma("n"); !errors.Is(err, errEOF) {
		t.Fatalf("40 zeros: %v", err)
	}
	r.Reset(nil)
	if _, err := r.ReadGamma("n"); !errors.Is(err, errEOF) {
		t.Fatalf("empty: %v", err)
	}
	w.Reset(make([]byte, 15))
	if err := w.WriteGamma(math.MaxUint64); !errors.Is(err, ErrOverflow) || w.BitLen() != 0 {
		t.Fatalf("127-bit code in 120 bits: %v, %d bits", err, w.BitLen())
	}
}
