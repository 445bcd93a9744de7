package interest

import (
	"math"

	"github.com/ghostwire/ghostwire/replication/ghost"
)

// AppendView appends s's members to dst as ghost view entries and returns
// dst: the entity id (ids, by slot), the class for its kind (kinds, by
// slot), its priority (AppendPriorities: call it when that may) and its
// state (states, by slot). Members whose kind has no class are skipped. It
// allocates only when dst or the tracker's priority scratch must grow.
func (t *Tracker) AppendView(dst []ghost.ViewEntry, s *Set, ids []uint64, kinds []uint8, states []ghost.State, classes *[MaxKinds]*ghost.Class) []ghost.ViewEntry {
	t.viewP = t.AppendPriorities(t.viewP[:0], s)
	for i, e := range s.Entries() {
		sl := e.Slot()
		k := kinds[sl]
		if int(k) >= MaxKinds || classes[k] == nil {
			continue
		}
		dst = append(dst, ghost.ViewEntry{Entity: ids[sl], Class: classes[k], Priority: t.viewP[i], State: states[sl]})
	}
	return dst
}

// BucketRefs writes a reference for each member of set (the Viewer's set's
// Entries) to out (as long), as a zone's views want them: the member's
// slot, plus off if its squared distance (PriorityDist2's) is beyond far2,
// ORed with buckets[bits(p × w[kinds[slot] % MaxKinds]) >> 21], p the
// member's priority (PriorityDist2's). It returns the offsets it added,
// summed (off × the members beyond far2).
//
// PriorityDist2 and the caller's arithmetic in one loop here, where the
// Viewer's fields are locals the loop keeps in registers: in the zone's
// loop, over a copy of the Viewer, they were loaded from the stack for
// every member (≈ 49 → ≈ 44 instructions a member).
func (v *Viewer) BucketRefs(out []ghost.ViewRef, set []Entry, kinds []uint8, w *[MaxKinds]float32, buckets *[1 << 11]ghost.ViewRef, far2 float32, off uint32) (sum uint64) {
	out = out[:len(set)]
	// One length for both, so a member's slot is checked once.
	k := min(len(v.bySlot), len(kinds))
	bySlot, kinds := v.bySlot[:k], kinds[:k]
	vx, vz, falloff, farb := v.x, v.z, v.falloff, v.farb
	wk := *w
	_ = buckets[0] // nil-checked once, not per member
	for i, e := range set {
		sl := e.key << 1 >> 9
		c := &bySlot[sl] // slotPrio.prio, written out (see there)
		dx, dz := c.x-vx, c.z-vz
		d2 := dx*dx + dz*dz
		fb := int32(math.Float32bits(1 - d2*falloff))
		if fb < farb {
			fb = farb
		}
		p := c.factor * math.Float32frombits(uint32(fb))
		o := off & -uint32(b2u(d2 > far2))
		out[i] = buckets[math.Float32bits(p*wk[kinds[sl]%MaxKinds])>>21] | ghost.ViewRef(sl+o)
		sum += uint64(o)
	}
	return sum
}

func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// BucketRefsFolded is BucketRefs with the weights of the tracker's
// SetViewWeights, while Tracker.Folded: a member's weighted factor read
// from the table (one load beside its position, by the kind its slot was
// filed with) instead of its kind and the weight by it. The same
// references, bit for bit, ≈ 3 instructions a member fewer; without
// Folded, the table's weighted factors are of other weights (or none).
func (v *Viewer) BucketRefsFolded(out []ghost.ViewRef, set []Entry, buckets *[1 << 11]ghost.ViewRef, far2 float32, off uint32) (sum uint64) {
	out = out[:len(set)]
	bySlot := v.bySlot
	vx, vz, falloff, far := v.x, v.z, v.falloff, math.Float32frombits(uint32(v.farb))
	_ = buckets[0] // nil-checked once, not per member
	i := 0
	if haveScan4 && len(set) >= 4 && len(bySlot) > 0 {
		// Four members at a time (refs_amd64.s): ≈ 33 → ≈ 18
		// instructions a member (BenchmarkZoneTickSyncCrowd); the loop
		// below takes the last 0–3 and is the reference
		// (TestBucketRefs4MatchesLoop).
		var nfar int
		i, nfar = bucketRefs4(&out[0], &set[0], len(set)&^3, &bySlot[0], min(len(bySlot), MaxSlots), vx, vz, falloff, far, far2, off, buckets)
		sum = uint64(nfar) * uint64(off)
	}
	for ; i < len(set); i++ {
		sl := set[i].key << 1 >> 9
		c := &bySlot[sl]
		dx, dz := c.x-vx, c.z-vz
		d2 := dx*dx + dz*dz
		// The floor as a float compare, not BucketRefs' compare of the
		// bits (the same for any f but NaN, which positions never give):
		// a branch nearly never taken, as every member lies within the
		// leave radius by this table, where f ≥ FarPriority but for
		// rounding; the bits' compare took two moves between registers
		// and a conditional move.
		f := 1 - d2*falloff
		if !(f >= far) {
			f = far
		}
		p := c.wf * f
		// far2 − d2 is negative iff d2 > far2 (a difference of two
		// floats is 0 only where they are equal; positions are never NaN):
		// its sign bit, spread, is the offset's mask.
		o := off & uint32(int32(math.Float32bits(far2-d2))>>31)
		out[i] = buckets[math.Float32bits(p)>>21] | ghost.ViewRef(sl+o)
		sum += uint64(o)
	}
	return sum
}
