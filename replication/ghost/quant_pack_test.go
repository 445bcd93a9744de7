package ghost

import "testing"

// TestQuantPackingIsThePool: pair1run reads each axis's shift and the
// masks of axes 0 and 1 from the registry's quant, worked out once, where
// the pool packs positions by its own shifts (posPool.init): the two must
// agree for every box, or the residuals come from the wrong bits.
func TestQuantPackingIsThePool(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    Bounds
	}{
		{"default", DefaultBounds()},
		{"small cube", Bounds{Min: [3]float64{-100, -100, -100}, Max: [3]float64{100, 100, 100}, Precision: 0.5}},
		{"flat", Bounds{Min: [3]float64{0, 0, 0}, Max: [3]float64{5000, 0, 300}, Precision: 0.01}},
		{"one-bit axes", Bounds{Max: [3]float64{1, 1, 1}, Precision: 1}},
		{"31-bit x", Bounds{Max: [3]float64{2e9, 10, 10}, Precision: 1}},
		{"wide", Bounds{Max: [3]float64{2e9, 2e9, 2e9}, Precision: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := newQuant(tc.b)
			var x posPool
			x.init(&q)
			for a := range 3 {
				if q.sh[a] != x.sh[a] {
					t.Errorf("axis %d: quant's shift %d, the pool's %d", a, q.sh[a], x.sh[a])
				}
			}
			for a := range 2 {
				if want := uint32(1)<<q.bits[a] - 1; q.mask[a] != want {
					t.Errorf("axis %d: mask %#x, want %#x (%d bits)", a, q.mask[a], want, q.bits[a])
				}
				// Every code of the axis (at most lim) is within its mask.
				if q.lim[a]&^q.mask[a] != 0 {
					t.Errorf("axis %d: lim %#x outside mask %#x", a, q.lim[a], q.mask[a])
				}
			}
		})
	}
}
