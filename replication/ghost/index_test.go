package ghost

import (
	"math/rand/v2"
	"testing"
	"time"
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
			tab := new(Table)
			const ids = 512
			tab.slots = make([]slot, int(tc.base)+ids)
			tab.viewsOf().qs = make([]viewQ, int(tc.base)+ids) // the entities (entityOf)
			model := map[uint64]uint32{}
			var free []uint32
			for i := ids - 1; i >= 0; i-- {
				free = append(free, tc.base+uint32(i))
			}
			held := map[uint32]bool{} // ids whose info names an entity
			for step := range 20000 {
				if step%500 == 499 { // bucket counts of every size class, shrunk and grown
					tab.idxTrim()
				}
				e := tc.entity(r)
				switch op := r.IntN(10); {
				case op < 5 && len(free) > 0: // alloc a fresh id for e (may replace)
					id := free[len(free)-1]
					free = free[:len(free)-1]
					tab.rare.views.qs[id].entity = e
					held[id] = true
					tab.idxSet(e, id)
					model[e] = id
				case op < 9: // free some held id: remove it if mapped
					for id := range held {
						ent := tab.rare.views.qs[id].entity
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
// (320 buckets once trimmed: 3/4 full with an eighth of room, 640 bytes;
// 512 buckets as a power of two), then 30 for a few seconds: 48 buckets,
// what the trim gives 30 ids; lookups still find every ghost (the mirror
// matches, the invariants hold), and the index grows again with the scope.
func TestEntityIndexShrinksAfterPeak(t *testing.T) {
	d := newDuo(t, DefaultConfig())
	crowd := d.npcs(200)
	d.view(crowd...)
	d.settle(crowd...)
	if b := d.tab.idx.buckets(); b != idxBucketsFor(200+200/8, false) || b != 320 {
		t.Fatalf("200 ghosts in %d buckets, want 320", b)
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
	if b := d.tab.idx.buckets(); b != idxBucketsFor(30+30/8, false) || b != 48 {
		t.Fatalf("30 ghosts after the peak in %d buckets, want 48", b)
	}
	if err := checkInvariants(d.tab); err != nil {
		t.Fatal(err)
	}
	if diff := mismatch(d.reg, d.mir, few); diff != "" {
		t.Fatal(diff)
	}
	d.view(crowd[:100]...) // grows again
	d.settle(crowd[:100]...)
	if b := d.tab.idx.buckets(); b != 192 { // doubled twice from 48 (36 ids, 72, 144), not yet trimmed
		t.Fatalf("100 ghosts in %d buckets, want 192", b)
	}
	d.exact(crowd[:100])
}

// TestEntityIndexFootprint bounds the entity index's bytes and rebuilds
// over the spread of scopes a node at 2,000 players gives its players
// (56 to 164 ghosts: the heap profile's per-id arrays span 24 to 152 ids,
// most of them past 96), each churning as at the server's shape. As a
// power of two 3/4 full, every scope of 97 to 192 ghosts took 256 buckets
// (512 bytes).
func TestEntityIndexFootprint(t *testing.T) {
	reg, pc, nc := newTestRegistry(t)
	const (
		maxBytes    = 340   // measured 330.9 B a table (415.3 with power-of-two buckets)
		maxRebuilds = 0.007 // a second a table once warm: measured 0.0035 (0.0215 with power-of-two buckets)
	)
	var bytes, rebuilds float64
	runs := 0
	for lo := 56; lo <= 148; lo += 8 {
		for _, w := range []int{8, 16} {
			const warm, secs = 21 * 10, 40
			var sum float64
			samples, moved := 0, 0
			for seed := range uint64(2) {
				pkt := 0
				var last *uint16
				serverRun(t, reg, pc, nc, serverShape{lo: lo, hi: lo + w, swaps: 3, back: 3, rtt: 60 * time.Millisecond, secs: secs}, seed, func(tab *Table) {
					pkt++
					b := &tab.idx.b[0]
					if pkt > warm {
						sum += float64(allocSize(2 * cap(tab.idx.b)))
						samples++
						if b != last {
							moved++
						}
					}
					last = b
				})
			}
			bytes += sum / float64(samples)
			rebuilds += float64(moved) / 2 / (secs - 10)
			runs++
		}
	}
	bytes /= float64(runs)
	rebuilds /= float64(runs)
	t.Logf("entity index: %.1f B a table, %.4f rebuilds a second once warm", bytes, rebuilds)
	if bytes > maxBytes {
		t.Errorf("entity index keeps %.1f B a table, want ≤ %d", bytes, maxBytes)
	}
	if rebuilds > maxRebuilds {
		t.Errorf("entity index rebuilt %.4f times a second a table, want ≤ %v", rebuilds, maxRebuilds)
	}
}
