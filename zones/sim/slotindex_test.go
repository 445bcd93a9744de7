package sim

import (
	"math/rand/v2"
	"testing"
)

// at returns id's slot, 0 when id is not held (tests only).
func (x *slotIndex) at(id uint64) int32 {
	s, _ := x.get(id)
	return s
}

// checkIndex compares x with the reference model want, entry by entry and
// for ids it must not hold.
func checkIndex(t *testing.T, x *slotIndex, want map[uint64]int32, absent []uint64) {
	t.Helper()
	if x.n != len(want) {
		t.Fatalf("index holds %d, want %d", x.n, len(want))
	}
	for id, s := range want {
		if got, ok := x.get(id); !ok || got != s {
			t.Fatalf("get(%#x) = %d, %v; want %d, true", id, got, ok, s)
		}
	}
	for _, id := range absent {
		if _, held := want[id]; held {
			continue
		}
		if got, ok := x.get(id); ok {
			t.Fatalf("get(%#x) = %d, true for an id not held", id, got)
		}
	}
	if len(x.ents) > 0 && x.n*4 > len(x.ents)*3 {
		t.Fatalf("index %d of %d full, over three quarters", x.n, len(x.ents))
	}
}

// TestSlotIndexMatchesMap runs random set/del sequences against a
// map[uint64]int32 (the type it replaced): keys drawn from a small range
// (so deletes hit, probe runs collide and wrap), from sequential ids (the
// zone's players) and from the extremes (0 and MaxUint64 are valid ids).
func TestSlotIndexMatchesMap(t *testing.T) {
	for _, tc := range []struct {
		name string
		key  func(r *rand.Rand) uint64
	}{
		{name: "small range", key: func(r *rand.Rand) uint64 { return r.Uint64N(64) }},
		{name: "sequential players", key: func(r *rand.Rand) uint64 { return 1 + r.Uint64N(600) }},
		{name: "extremes", key: func(r *rand.Rand) uint64 {
			switch r.IntN(4) {
			case 0:
				return r.Uint64N(8)
			case 1:
				return ^uint64(0) - r.Uint64N(8)
			default:
				return r.Uint64() << 58 // few high bits: the same homes
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, 2))
			var x slotIndex
			want := map[uint64]int32{}
			var seen []uint64
			for op := range 20000 {
				id := tc.key(r)
				seen = append(seen, id)
				if r.IntN(3) == 0 {
					x.del(id)
					delete(want, id)
				} else {
					s := int32(r.IntN(1 << 20))
					x.set(id, s)
					want[id] = s
				}
				if op%97 == 0 {
					checkIndex(t, &x, want, seen[max(0, len(seen)-200):])
				}
			}
			checkIndex(t, &x, want, seen)
			for id := range want { // empty it
				x.del(id)
				delete(want, id)
			}
			checkIndex(t, &x, want, seen)
		})
	}
}

// FuzzSlotIndex drives a slotIndex with arbitrary operations against a
// map: each 9 bytes are an operation (set or del) and an id.
func FuzzSlotIndex(f *testing.F) {
	f.Add([]byte{0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0})
	f.Add(make([]byte, 9*40))
	f.Fuzz(func(t *testing.T, b []byte) {
		var x slotIndex
		want := map[uint64]int32{}
		var seen []uint64
		for i := 0; i+9 <= len(b); i += 9 {
			id := uint64(b[i+1]) | uint64(b[i+2])<<8 | uint64(b[i+3])<<16 | uint64(b[i+4])<<56 | uint64(b[i+5])<<48
			seen = append(seen, id)
			if b[i]&1 == 1 {
				x.del(id)
				delete(want, id)
			} else {
				s := int32(b[i+6]) | int32(b[i+7])<<8
				x.set(id, s)
				want[id] = s
			}
		}
		checkIndex(t, &x, want, seen)
	})
}
