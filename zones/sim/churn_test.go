package sim

import (
	"testing"
	"time"
)

// churn moves a crowdZoneWith(…, 380, …) zone's players about for
// TestViewsDigest: each tick twelve players teleport within the crowd, and
// one leaves and comes back (its slot reused, a new generation).
func churn(t *testing.T, z *Zone, now time.Duration, tick int) {
	t.Helper()
	r := z.Rect()
	for k := range 12 {
		h := uint64(tick*12+k+1) * 0x9E3779B97F4A7C15
		id := h%250 + 1
		x := float32(r.Min[0] + 50 + float64(h>>8&0xFFFF)/0xFFFF*380)
		zz := float32(r.Min[1] + 50 + float64(h>>24&0xFFFF)/0xFFFF*380)
		if err := z.Teleport(now, id, [3]float32{x, 0, zz}); err != nil {
			t.Fatal(err)
		}
	}
	id := uint64(tick*7%250) + 1
	e, ok := z.Entity(id)
	if !ok {
		t.Fatalf("player %d gone", id)
	}
	if err := z.Leave(id); err != nil {
		t.Fatal(err)
	}
	if err := z.Join(now, id, "c", "p", e.State.Pos, 0); err != nil {
		t.Fatal(err)
	}
}
