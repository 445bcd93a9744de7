package ghost

import (
	"slices"
	"testing"
	"time"
)

// TestSnapshotViewLockstep: SetSnapshotView walks a view in lockstep with
// the previous view's order, so entities that enter or leave shift the
// hints of none after them: every ghost that stays is found by its hint
// alone. The table's entity index is emptied before the view to prove it
// (a ghost the walk asks the index for is not found there and would be
// created again); with hints by position, as before the lockstep walk, the
// ghosts after an insertion are all looked up. The hints a view would
// overwrite go to a borrowed scratch, given back by the view.
func TestSnapshotViewLockstep(t *testing.T) {
	seq := func(a, b int) []int { // a, a+1, …, b−1
		var s []int
		for i := a; i < b; i++ {
			s = append(s, i)
		}
		return s
	}
	cat := func(parts ...[]int) []int { return slices.Concat(parts...) }
	first := seq(0, 20)
	cases := []struct {
		name string
		next []int // the second view's entities, in order
		skip bool  // a snapshot between the two views that the table never takes
	}{
		{name: "same order", next: first},
		{name: "entered at the front", next: cat([]int{20}, first)},
		{name: "entered in the middle and at the end", next: cat(seq(0, 7), []int{20}, seq(7, 20), []int{21})},
		{name: "left one by one", next: cat(seq(0, 3), seq(4, 12), seq(13, 20))},
		{name: "entered and left", next: cat([]int{20}, seq(0, 5), seq(6, 9), []int{21}, seq(9, 19))},
		{name: "many entered at the front: the order outgrows its room", next: cat(seq(20, 40), first)},
		{name: "entered at the front after a skipped snapshot", next: cat([]int{20}, first), skip: true},
		{name: "left after a skipped snapshot", next: cat(seq(0, 3), seq(4, 20)), skip: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reg, _, nc := newTestRegistry(t)
			tab, err := NewTable(reg, DefaultConfig())
			if err != nil {
				t.Fatal(err)
			}
			w := writerFor(t, reg)
			sts := make([]State, 40)
			for i := range sts {
				sts[i].Pos = [3]float64{float64(i), 0, 5}
				sts[i].Health = 100
			}
			now := time.Second
			seal := func() *Snapshot {
				s := w.Next(len(sts))
				for i := range sts {
					sts[i].Pos[0] += 0.25 // all walk
					s.Set(i, uint64(100+i), nc, &sts[i])
				}
				w.Seal(s)
				return s
			}
			view := func(ents []int) {
				t.Helper()
				s := seal()
				refs := make([]ViewRef, len(ents))
				for k, i := range ents {
					refs[k] = NewViewRef(uint32(i), nc, 1)
				}
				now += 50 * time.Millisecond
				if err := tab.SetSnapshotView(now, s, refs); err != nil {
					t.Fatal(err)
				}
			}
			view(first)
			view(first)
			ids := map[int]uint32{}
			for k, i := range first {
				ids[i] = uint32(tab.order[k])
			}
			if tc.skip {
				seal()
			}
			assigned := tab.Stats().GhostsAssigned
			tab.idx = entityIndex{} // the walk must not need it
			view(tc.next)
			if tab.pk.packScratch != nil {
				t.Error("the view kept the scratch its hints spilled to")
			}
			entered := 0
			for k, i := range tc.next {
				id, ok := ids[i]
				if !ok {
					entered++
					continue
				}
				if got := uint32(tab.order[k]); got != id {
					t.Errorf("entity %d (view entry %d): ghost %d, want %d", 100+i, k, got, id)
				}
			}
			if got := tab.Stats().GhostsAssigned - assigned; got != uint64(entered) {
				t.Errorf("%d ghosts made for %d entities that entered: the walk lost its hints", got, entered)
			}
		})
	}
}
