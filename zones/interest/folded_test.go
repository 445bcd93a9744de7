package interest

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ghostwire/ghostwire/replication/ghost"
)

// TestBucketRefsFolded holds Viewer.BucketRefsFolded to BucketRefs with
// the weights of Tracker.SetViewWeights, reference for reference: kinds
// below and beyond MaxKinds, of weights 2, 1, ½, 4 and 0 (never
// referenced), fresh and stale states, near and far members. Folded says
// so only from the first Build after the weights were set, and never for
// weights that scaling cannot fold exactly (3).
func TestBucketRefsFolded(t *testing.T) {
	const n = 400
	sc := newScene(t, n, 300)
	tr := mustTracker(t, Config{EnterRadius: 100, LeaveRadius: 110, KindWeight: [MaxKinds]float32{1, 1.5, 0.7, 3}})
	tr.Resize(n)
	rng := rand.New(rand.NewPCG(3, 4))
	kinds := []uint8{0, 1, 2, 3, 9, 200}
	var buckets [1 << 11]ghost.ViewRef
	for i := range buckets {
		buckets[i] = ghost.ViewRef(i) << 21
	}
	place := func() {
		for s := range n {
			sc.kind[s] = kinds[rng.IntN(len(kinds))]
			x, z := float32(rng.Float64()*500-250), float32(rng.Float64()*500-250)
			sc.x[s], sc.z[s], sc.id[s] = x, z, uint64(s+1)
			sc.g.Set(int32(s), x, z, Aux(sc.kind[s], 1, uint16(rng.IntN(3)*rng.IntN(40))))
		}
		sc.g.Build()
	}
	var sets [20]Set
	check := func(w *[MaxKinds]float32) {
		t.Helper()
		const far2, off = 60 * 60, 1 << 20
		for p := range sets {
			es := sets[p].Entries()
			v, ok := tr.Viewer(&sets[p])
			if !ok || len(es) == 0 {
				t.Fatalf("viewer %d: no Viewer (%v) or an empty set", p, ok)
			}
			got, want := make([]ghost.ViewRef, len(es)), make([]ghost.ViewRef, len(es))
			gs := v.BucketRefsFolded(got, es, &buckets, far2, off)
			ws := v.BucketRefs(want, es, sc.kind, w, &buckets, far2, off)
			if !slices.Equal(got, want) || gs != ws {
				for i := range got {
					if got[i] != want[i] {
						e := es[i]
						t.Fatalf("viewer %d, member slot %d (kind %d): folded %#x, BucketRefs %#x (sums %d, %d)", p, e.Slot(), sc.kind[e.Slot()], got[i], want[i], gs, ws)
					}
				}
				t.Fatalf("viewer %d: sums %d folded, %d BucketRefs", p, gs, ws)
			}
		}
	}
	update := func() {
		for p := range sets {
			tr.Update(&sets[p], int32(p), sc.x[p], sc.z[p], sc.g, nil)
		}
	}
	place()
	w := [MaxKinds]float32{1: 2, 2: 1, 3: 0.5, 0: 4, 4: 0, 5: 1, 6: 1, 7: 1}
	if !tr.SetViewWeights(&w) {
		t.Fatal("powers of two not folded")
	}
	update() // the table of a Build before the weights: rebuilt now
	if !tr.Folded() {
		t.Fatal("not Folded after the first Update with the weights set")
	}
	check(&w)
	for range 3 {
		place()
		update()
		if !tr.Folded() {
			t.Fatal("not Folded after a Build")
		}
		check(&w)
	}
	// New weights: the table's folded ones are the old until its next Build.
	w2 := w
	w2[1], w2[2] = 0.25, 8
	if !tr.SetViewWeights(&w2) {
		t.Fatal("powers of two not folded")
	}
	if tr.Folded() {
		t.Fatal("Folded with the table's weights of before SetViewWeights")
	}
	place()
	update()
	if !tr.Folded() {
		t.Fatal("not Folded after a Build with the new weights")
	}
	check(&w2)
	w3 := w
	w3[1] = 3
	if tr.SetViewWeights(&w3) {
		t.Fatal("a weight of 3 folded (not exact)")
	}
	place()
	update()
	if tr.Folded() {
		t.Fatal("Folded with a weight of 3")
	}
}
