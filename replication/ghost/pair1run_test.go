package ghost

import (
	"math/rand/v2"
	"testing"
)

// TestPair1runIsPair1r: writeUsual's pair1run codes the position as
// posForm codes it from pair1r's residuals (window and posWindow), for
// any pair of delivered codes and any current one within the box, both
// time factors (whole and float), ties included, and boxes of every
// shape the narrow packing takes. pair1run skips the clamp on an axis
// the pair did not move on (a delivered code is in the box): this is the
// test that says so.
func TestPair1runIsPair1r(t *testing.T) {
	rng := rand.New(rand.NewPCG(36, 1))
	boxes := []Bounds{
		DefaultBounds(),
		{Min: [3]float64{-100, -100, -100}, Max: [3]float64{100, 100, 100}, Precision: 0.5},
		{Max: [3]float64{5000, 0, 300}, Precision: 0.01},
		{Max: [3]float64{1, 1, 1}, Precision: 1},
		{Max: [3]float64{3e5, 1e4, 3e5}, Precision: 0.1},
	}
	for bi, b := range boxes {
		z := newQuant(b)
		if z.wide() {
			t.Fatalf("box %d is wide: pair1run is narrow only", bi)
		}
		var x posPool
		x.init(&z)
		code := func(a int, near uint32, spread int64) uint32 {
			if rng.IntN(8) == 0 { // anywhere, edges included
				switch rng.IntN(3) {
				case 0:
					return 0
				case 1:
					return z.lim[a]
				}
				return uint32(rng.Int64N(int64(z.lim[a]) + 1))
			}
			v := int64(near) + rng.Int64N(2*spread+1) - spread
			return uint32(max(0, min(v, int64(z.lim[a]))))
		}
		for range 20000 {
			var c0, c1, c [3]uint32
			for a := range 3 {
				c0[a] = code(a, uint32(rng.Int64N(int64(z.lim[a])+1)), 0)
				spread := int64(1) << rng.IntN(12)
				c1[a] = code(a, c0[a], spread)
				if rng.IntN(3) == 0 {
					c1[a] = c0[a] // an axis the pair did not move on
				}
				c[a] = code(a, c1[a], spread*2)
			}
			span0 := 1 + rng.Int64N(predictMaxMS)
			dt1 := 1 + rng.Int64N(predictMaxMS)
			switch rng.IntN(4) {
			case 0:
				dt1 = span0
			case 1:
				dt1 = min(2*span0, predictMaxMS)
			}
			d0, d1 := x.packLo(&c0), x.packLo(&c1)
			run, n := pair1run(&z, d0, d1, span0, dt1, &c)
			var pf posForm
			pf.d[0], pf.d[1], pf.d[2] = pair1r(&x, d0, d1, span0, dt1, &c, &z.lim)
			pf.window()
			if pf.k == 0 {
				if n != 0 {
					t.Fatalf("box %d, %v → %v, now %v (span %d, dt %d): pair1run %d bits, pair1r's residuals %v go absolute", bi, c0, c1, c, span0, dt1, n, pf.d)
				}
				continue
			}
			wv, wn := posWindow(&c, &pf)
			if run != wv || n != wn {
				t.Fatalf("box %d, %v → %v, now %v (span %d, dt %d): pair1run %#x in %d bits, posWindow of pair1r's %v %#x in %d", bi, c0, c1, c, span0, dt1, run, n, pf.d, wv, wn)
			}
		}
	}
}
