package event

import "testing"

// TestRingPoolBounded: the pools keep at most maxPooledRings free rings of
// a kind, take back only rings of their own size, and hand rings out
// cleared (a unit's payload slab does not stay reachable from a free ring).
func TestRingPoolBounded(t *testing.T) {
	var p ringPool[unit]
	for range maxPooledRings + 10 {
		p.put(make([]unit, minUnits), minUnits)
	}
	if len(p.free) != maxPooledRings {
		t.Fatalf("%d free rings, want the bound %d", len(p.free), maxPooledRings)
	}
	p.put(make([]unit, 2*minUnits), minUnits)
	p.put(make([]unit, minUnits, 2*minUnits), minUnits)
	if len(p.free) != maxPooledRings {
		t.Fatalf("a grown ring was pooled: %d free", len(p.free))
	}
	var q ringPool[unit]
	r := q.get(minUnits)
	x := []byte("x")
	r[1] = unit{pay: &x[0], size: 1, refs: 1}
	q.put(r, minUnits)
	if r = q.get(minUnits); len(r) != minUnits || r[1].pay != nil || r[1].refs != 0 {
		t.Fatalf("ring from the pool: %+v", r)
	}
}
