package move

import (
	"math"
	"testing"
)

// TestSincosPolynomialsRoundEveryOperation pins the float64 values inside
// sincos to docs/protocol.md § 5.8, where every operation rounds: Go may
// fuse a product into the sum that uses it (an FMA on arm64, ppc64, s390x
// and amd64 with GOAMD64=v3) unless an explicit conversion rounds it. The
// reference below writes every step as its own rounded operation. Run it
// with GOAMD64=v3 on an FMA-capable machine (or on arm64) to see it catch a
// missing conversion: sincos's reduced angle used to be fused into
// sinPoly's last sum, which changed float64 sines in the last bit; the
// float32 results of all 65536 headings happened to survive it, so no
// CRC ever differed, but that was luck, not design.
func TestSincosPolynomialsRoundEveryOperation(t *testing.T) {
	const unit = 0x1.921fb54442d18p-14
	rsin := func(x float64) float64 {
		z := float64(x * x)
		p := 0x1.6124613a86d09p-33
		for _, c := range []float64{-0x1.ae64567f544e4p-26, 0x1.71de3a556c734p-19, -0x1.a01a01a01a01ap-13, 0x1.1111111111111p-07, -0x1.5555555555555p-03} {
			p = float64(p*z) + c
		}
		p = float64(p * z)
		return x + float64(x*p)
	}
	rcos := func(x float64) float64 {
		z := float64(x * x)
		p := -0x1.93974a8c07c9dp-37
		for _, c := range []float64{0x1.1eed8eff8d898p-29, -0x1.27e4fb7789f5cp-22, 0x1.a01a01a01a01ap-16, -0x1.6c16c16c16c17p-10, 0x1.5555555555555p-05, -0.5} {
			p = float64(p*z) + c
		}
		return 1 + float64(z*p)
	}
	for i := range 0x2001 {
		x := float64(float64(i) * unit)
		if s, c := sinPoly(x), cosPoly(x); s != rsin(x) || c != rcos(x) {
			t.Fatalf("i=%d: sinPoly, cosPoly = %x, %x; each operation rounded gives %x, %x", i, s, c, rsin(x), rcos(x))
		}
	}
	// sincos64 itself, through the reduced angle it computes.
	for y := range 1 << 16 {
		q, i := y>>14, y&0x3FFF
		var s, c float64
		if i <= 0x2000 {
			x := float64(float64(i) * unit)
			s, c = rsin(x), rcos(x)
		} else {
			x := float64(float64(0x4000-i) * unit)
			s, c = rcos(x), rsin(x)
		}
		for range q {
			s, c = c, -s
		}
		if gs, gc := sincos64(uint16(y)); math.Float64bits(gs) != math.Float64bits(s) || math.Float64bits(gc) != math.Float64bits(c) {
			t.Fatalf("sincos64(%d) = %x, %x; each operation rounded gives %x, %x", y, gs, gc, s, c)
		}
	}
}
