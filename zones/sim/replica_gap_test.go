package sim

import (
	"math"
	"testing"

	"github.com/ghostwire/ghostwire/zones/world"
)

// TestGapMatchesDist2 holds sendReplicas' distance to a neighbour's
// rectangle (gap, by compares) to world.Rect.Dist2's (by max) bit for bit
// over points on, inside and past every edge, NaN and the infinities, and
// gap to max(lo−v, 0, v−hi) itself, signed zeros included: which
// candidates a neighbour's batch lists must not change.
func TestGapMatchesDist2(t *testing.T) {
	neg0 := math.Copysign(0, -1)
	rects := []world.Rect{
		{Min: [2]float64{0, 0}, Max: [2]float64{1000, 1000}},
		{Min: [2]float64{neg0, -1000}, Max: [2]float64{1000, neg0}},
		{Min: [2]float64{-1000, -1000}, Max: [2]float64{0, 0}},
	}
	vals := []float64{0, neg0, 1000, -1000, 999.5, 1000.5, -1000.5, 500, -500, 1e-310, -1e-310,
		math.Nextafter(1000, 2000), math.Nextafter(0, -1), 3e5, -3e5, math.NaN(), math.Inf(1), math.Inf(-1)}
	for _, r := range rects {
		for _, x := range vals {
			for _, z := range vals {
				dx, dz := gap(x, r.Min[0], r.Max[0]), gap(z, r.Min[1], r.Max[1])
				got, want := dx*dx+dz*dz, r.Dist2(x, z)
				if math.Float64bits(got) != math.Float64bits(want) && !(math.IsNaN(got) && math.IsNaN(want)) {
					t.Errorf("%v: distance² of (%g, %g) by gap %g, Dist2 %g", r, x, z, got, want)
				}
			}
			for _, lohi := range [][2]float64{{r.Min[0], r.Max[0]}, {r.Min[1], r.Max[1]}} {
				lo, hi := lohi[0], lohi[1]
				g, m := gap(x, lo, hi), max(lo-x, 0, x-hi)
				if math.Float64bits(g) != math.Float64bits(m) && !(math.IsNaN(g) && math.IsNaN(m)) {
					t.Errorf("gap(%g, %g, %g) = %g (%x), max gives %g (%x)", x, lo, hi, g, math.Float64bits(g), m, math.Float64bits(m))
				}
			}
		}
	}
}
