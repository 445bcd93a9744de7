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
			tab := &Table{ev: new(entryViews)}
			const ids = 512
			tab.slots = make([]slot, int(tc.base)+ids)
			tab.ev.qs = make([]viewQ, int(tc.base)+ids) // the entities (entityOf)
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
					tab.ev.qs[id].entity = e
					held[id] = true
					tab.idxSet(e, id)
					model[e] = id
				case op < 9: // free some held id: remove it if mapped
					for id := range held {
						ent := tab.ev.qs[id].entity
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

// The entity index gives back the buckets of a peak: 200 ghosts in scope
// (512 buckets), then 30 for a few seconds: 64 buckets, what growing anew
// would give 30 ids; lookups still find every ghost (the mirror matches,
// the invariants hold), and the index grows again with the scope.
func TestEntityIndexShrinksAfterPeak(t *testing.T) {
	d := newDuo(t, DefaultConfig())
	crowd := d.npcs(200)
	d.view(crowd...)
	d.settle(crowd...)
	if b := d.tab.idx.buckets(); b != 512 {
		t.Fatalf("200 ghosts in %d buckets, want 512", b)
	}
	few := crowd[:30]
	for range 60 { // 3 s: the kills go out and are delivered, trims run
		for i := range few {
			few[i].State.Pos[2] += 0.5
		}
		d.view(few...)
		d.trip()
	}
	d.settle(few...)
	if b := d.tab.idx.buckets(); b != idxBucketsFor(30) || b != 64 {
		t.Fatalf("30 ghosts after the peak in %d buckets, want 64", b)
	}
	if err := checkInvariants(d.tab); err != nil {
		t.Fatal(err)
	}
	if diff := mismatch(d.reg, d.mir, few); diff != "" {
		t.Fatal(diff)
	}
	d.view(crowd[:100]...) // grows again
	d.settle(crowd[:100]...)
	if b := d.tab.idx.buckets(); b != 256 {
		t.Fatalf("100 ghosts in %d buckets, want 256", b)
	}
	d.exact(crowd[:100])
}
