package sim

import (
	"math"
	"testing"

	"github.com/ghostwire/ghostwire/zones/world"
)

// TestInsideIsOwned: every point stepSlots finds inside its zone's rect
// (and so does not call crossing for) is one the zone owns, on and next to
// each edge of every zone of the default world, the world's own max edges
// included; and a point the zone owns away from its max edges is inside.
func TestInsideIsOwned(t *testing.T) {
	w := world.Default()
	for _, zn := range w.Zones() {
		r := zn.Rect
		var xs, zs []float64
		for _, v := range []float64{r.Min[0], r.Max[0], (r.Min[0] + r.Max[0]) / 2} {
			xs = append(xs, v, math.Nextafter(v, math.Inf(-1)), math.Nextafter(v, math.Inf(1)), v-1, v+1)
		}
		for _, v := range []float64{r.Min[1], r.Max[1], (r.Min[1] + r.Max[1]) / 2} {
			zs = append(zs, v, math.Nextafter(v, math.Inf(-1)), math.Nextafter(v, math.Inf(1)), v-1, v+1)
		}
		for _, x := range xs {
			for _, z := range zs {
				x32, z32 := float32(x), float32(z)
				fx, fz := float64(x32), float64(z32)
				in, owns := inside(&r, x32, z32), w.Owns(&zn, fx, fz)
				if in && !owns {
					t.Errorf("zone %s: [%v, %v] inside its rect but not owned", zn.ID, fx, fz)
				}
				if owns && !in && fx != r.Max[0] && fz != r.Max[1] {
					t.Errorf("zone %s: [%v, %v] owned, off its max edges, but not inside", zn.ID, fx, fz)
				}
			}
		}
	}
}
