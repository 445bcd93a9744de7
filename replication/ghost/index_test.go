package ghost

import (
	"math/rand/v2"
	"testing"
)

// TestEntityIndexAgainstMap drives the entity index with random inserts,
// replacements and deletions against a map, over clustered entity ids
// (long probe runs, wrap-around at the end of the buckets) and spread ones.
// Every lookup must agree with the map after every step, also when the ids
// reach past 2^16−2 and the buckets widen to 32 bits on the way.
func TestEntityIndexAgainstMap(t *testing.T) {
	for _, tc := range []struct {
		name   string
		entity func(r *rand.Rand) uint64
		base   uint32 // lowest ghost id
		wide   bool   // the buckets end 32 bits wide
	}{
		{"consecutive ids", func(r *rand.Rand) uint64 { return uint64(r.IntN(300)) }, 0, false},
		{"spread ids", func(r *rand.Rand) uint64 { return r.Uint64() % 5000 * 0x10001 }, 0, false},
		{"ghost ids across 2^16", func(r *rand.Rand) uint64 { return r.Uint64() % 5000 * 0x10001 }, 1<<16 - 300, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(7, 1))
			tab := &Table{}
			const ids = 512
			tab.slots = make([]slot, int(tc.base)+ids)
			model := map[uint64]uint32{}
			var free []uint32
			for i := ids - 1; i >= 0; i-- {
				free = append(free, tc.base+uint32(i))
			}
			held := map[uint32]bool{} // ids whose info names an entity
			for step := range 20000 {
				e := tc.entity(r)
				switch op := r.IntN(10); {
				case op < 5 && len(free) > 0: // alloc a fresh id for e (may replace)
					id := free[len(free)-1]
					free = free[:len(free)-1]
					tab.slots[id].entity = e
					held[id] = true
					tab.idxSet(e, id)
					model[e] = id
				case op < 9: // free some held id: remove it if mapped
					for id := range held {
						ent := tab.slots[id].entity
						tab.idxDel(ent, id)
						if model[ent] == id {
							delete(model, ent)
						}
						delete(held, id)
						free = append(free, id)
						break
					}
				default: // delete e if it maps to a wrong id: must be a no-op
					if id, ok := model[e]; ok {
						tab.idxDel(e, id+1)
					}
				}
				if int(tab.idx.n) != len(model) {
					t.Fatalf("step %d: index holds %d, model %d", step, tab.idx.n, len(model))
				}
				for ent, id := range model {
					if got, ok := tab.idxGet(ent); !ok || got != id {
						t.Fatalf("step %d: entity %d → %d, %v; want %d", step, ent, got, ok, id)
					}
				}
				if _, ok := model[e]; !ok {
					if got, ok := tab.idxGet(e); ok {
						t.Fatalf("step %d: entity %d found at %d, not mapped", step, e, got)
					}
				}
			}
			if tab.idx.wide != tc.wide {
				t.Fatalf("buckets wide %v, want %v", tab.idx.wide, tc.wide)
			}
		})
	}
}
