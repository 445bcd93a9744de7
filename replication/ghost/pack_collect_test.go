package ghost

import (
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestCollectSkipsOnlyFreeIDs: a table whose ghosts hold ids spread over
// more than it has in scope (half of 150 left, their ids freed) buckets
// every ghost of its view that changed, each bucket in id order, as a
// walk of every slot does — whichever ids are free between them.
func TestCollectSkipsOnlyFreeIDs(t *testing.T) {
	d := newDuo(t, DefaultConfig())
	sw, err := NewSnapshotWriter(d.reg)
	if err != nil {
		t.Fatal(err)
	}
	ents := make([]ViewEntry, 150)
	all := make([]int, len(ents))
	for i := range ents {
		ents[i] = d.npc(uint64(i+1), float64(i%50)*2)
		ents[i].Priority = float32(1 + i%7)
		all[i] = i
	}
	d.snapView(sw, ents, all...)
	d.settleSnap(sw, ents, all...)
	// Half leave, at random: ids 0, 63–64 and 127–128 among them, so runs
	// end at word edges.
	rng := rand.New(rand.NewPCG(9, 9))
	var in []int
	for i := range ents {
		if id, _ := d.tab.GhostID(uint64(i + 1)); id != 0 && id != 63 && id != 127 && (id == 64 || id == 128 || rng.IntN(2) == 0) {
			in = append(in, i)
		}
	}
	d.snapView(sw, ents, in...)
	d.settleSnap(sw, ents, in...)
	tab := d.tab
	if tab.live >= tab.top || tab.live != len(in) {
		t.Fatalf("%d ghosts in use of ids below %d, %d in view: want free ids between them", tab.live, tab.top, len(in))
	}
	// Everyone moves: every ghost in view is a candidate.
	for _, i := range in {
		ents[i].State.Pos[0] += 1
	}
	d.snapView(sw, ents, in...)
	tab.pk.borrow()
	defer tab.pk.release()
	n := tab.pk.collect(tab, tab.clock(d.now))
	var got []uint32
	p := &tab.pk
	for w := range p.nonEmpty {
		for m := p.nonEmpty[w]; m != 0; m &= m - 1 {
			b := w*64 + bits.TrailingZeros64(m)
			prev := int32(-1)
			for i := p.head[b]; i >= 0; i = p.next[i] {
				if i <= prev {
					t.Errorf("bucket %d: id %d after %d, want increasing ids", b, i, prev)
				}
				got, prev = append(got, uint32(i)), i
			}
		}
	}
	p.clear()
	var want []uint32
	for _, i := range in {
		id, ok := tab.GhostID(uint64(i + 1))
		if !ok {
			t.Fatalf("entity %d in view has no ghost", i+1)
		}
		want = append(want, id)
	}
	slices.Sort(got)
	slices.Sort(want)
	if n != len(want) || !slices.Equal(got, want) {
		t.Fatalf("collect bucketed %d ghosts %v, want the %d in view %v", n, got, len(want), want)
	}
}
