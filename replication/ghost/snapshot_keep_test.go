package ghost

import (
	"testing"
	"time"
)

// TestSnapshotViewAllKept: a view whose every ghost is the previous view's
// at the same entry, and which holds every ghost in scope, skips the walk
// of the slots that finds leaving and carried ghosts; a ghost removed
// between the views (killing, its kill waiting for its update in flight)
// must still lose its mark of a position written in the previous view
// (checkInvariants: the flags agree with its track), and must not come
// back.
func TestSnapshotViewAllKept(t *testing.T) {
	d := newDuo(t, DefaultConfig())
	w := writerFor(t, d.reg)
	sts := make([]State, 3)
	for i := range sts {
		sts[i].Pos = [3]float64{float64(10 * i), 0, 5}
		sts[i].Health = 100
	}
	refs := []ViewRef{NewViewRef(0, d.nc, 1), NewViewRef(1, d.nc, 1), NewViewRef(2, d.nc, 1)}
	view := func(refs []ViewRef) {
		t.Helper()
		s := w.Next(len(sts))
		for i := range sts {
			sts[i].Pos[0] += 0.25 // all walk
			s.Set(i, uint64(100+i), d.nc, &sts[i])
		}
		w.Seal(s)
		d.now += 50 * time.Millisecond
		if err := d.tab.SetSnapshotView(d.now, s, refs); err != nil {
			t.Fatal(err)
		}
		if err := checkViewRefs(d.tab); err != nil {
			t.Fatal(err)
		}
		if err := checkInvariants(d.tab); err != nil {
			t.Fatal(err)
		}
	}
	view(refs)
	d.settle()
	view(refs)
	seq, _, n := d.send(MaxPacketBytes) // every position of this view in flight
	if n != 3 {
		t.Fatalf("%d records, want 3", n)
	}
	d.tab.Remove(101) // killing; its kill waits for the update in flight
	view([]ViewRef{refs[0], refs[2]})
	if id, ok := d.tab.GhostID(101); !ok || d.tab.slotOf(id).phase != phaseKilling {
		t.Fatalf("entity 101: id %d in scope %v, want killing", id, ok)
	}
	d.fate(seq, true)
	view([]ViewRef{refs[0], refs[2]})
	for range 4 {
		d.trip()
	}
	if _, ok := d.tab.GhostID(101); ok || d.mir.Len() != 2 {
		t.Fatalf("entity 101 still in scope %v; mirror holds %d ghosts, want 2", ok, d.mir.Len())
	}
}

// TestSnapshotViewDuplicateRefs: a view may name an entry twice; the
// ghost counts once towards the ghosts in view, so one that left the view
// still leaves (the count of ghosts kept must not take it for every ghost
// in scope).
func TestSnapshotViewDuplicateRefs(t *testing.T) {
	d := newDuo(t, DefaultConfig())
	w := writerFor(t, d.reg)
	sts := make([]State, 2)
	for i := range sts {
		sts[i].Pos = [3]float64{float64(10 * i), 0, 5}
		sts[i].Health = 100
	}
	view := func(idx ...uint32) {
		t.Helper()
		s := w.Next(len(sts))
		for i := range sts {
			sts[i].Pos[0] += 0.25
			s.Set(i, uint64(100+i), d.nc, &sts[i])
		}
		w.Seal(s)
		refs := make([]ViewRef, len(idx))
		for k, i := range idx {
			refs[k] = NewViewRef(i, d.nc, 1)
		}
		d.now += 50 * time.Millisecond
		if err := d.tab.SetSnapshotView(d.now, s, refs); err != nil {
			t.Fatal(err)
		}
		if err := checkInvariants(d.tab); err != nil {
			t.Fatal(err)
		}
	}
	view(0, 0, 1)
	d.settle()
	view(0, 0, 1)
	view(0, 0) // entity 101 leaves
	if id, ok := d.tab.GhostID(101); ok && d.tab.slotOf(id).phase != phaseKilling {
		t.Fatalf("entity 101 (id %d) still in scope after leaving the view", id)
	}
	d.settle()
	if d.mir.Len() != 1 {
		t.Fatalf("mirror holds %d ghosts, want 1", d.mir.Len())
	}
}
