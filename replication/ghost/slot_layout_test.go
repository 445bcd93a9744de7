package ghost

import (
	"testing"
	"unsafe"
)

// TestSlotLayout pins the slot at 32 bytes (type slot's comment): the
// per-id arrays start on a cache line and their sizes are whole lines for
// every id count trim and grow give (multiples of 8), so a slot lies in
// one 64-byte line and every walk of a ghost — its view (takeKept,
// markSlot), its record, its fate (usualRun) — touches one line, whatever
// fields it reads (a 48-byte slot took 1.25 lines a walk at best, 1.5 for
// a walk that read it all). No field may straddle the slot's halves
// either: the slot is all a walk reads of the id's line.
func TestSlotLayout(t *testing.T) {
	if got := unsafe.Sizeof(slot{}); got != 32 {
		t.Fatalf("slot is %d bytes, want 32 (the per-id footprint, half a line)", got)
	}
	reg, _, _ := newTestRegistry(t)
	tab, err := NewTable(reg, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	// Every length the per-id arrays take: grow's (an eighth more, whole
	// 8s) and trim's (whole 8s).
	for n := 8; n <= 1024; n += 8 {
		tab.resizeIDs(n)
		if p := uintptr(unsafe.Pointer(unsafe.SliceData(tab.slots))); p%64 != 0 {
			t.Fatalf("%d slots start %d bytes into a line: a slot would straddle two", n, p%64)
		}
	}
	tab.resizeIDs(0)
	// A table in use: its slots as grow leaves them.
	d := newDuo(t, DefaultConfig())
	var view []ViewEntry
	for i := range 100 {
		view = append(view, d.npc(uint64(i+1), float64(i)))
	}
	d.view(view...)
	if p := uintptr(unsafe.Pointer(unsafe.SliceData(d.tab.slots))); p%64 != 0 {
		t.Fatalf("%d slots start %d bytes into a line", len(d.tab.slots), p%64)
	}
}

// TestSnapEntLayout pins where a usual update's position and yaw code
// are: in the entry's view (snapView, which the view's walk reads right
// before the packet's), not the entry — 96 bytes apart, the entries put
// each ghost's position on a line of its own, a D1 miss a usual update
// (BenchmarkTables1000Pump) — and the two arrays' sizes: an entry's 88
// bytes and its view's 24 are the 96 and 16 they were, so a snapshot costs
// an entry no more (TestSnapshotEntryFootprint).
func TestSnapEntLayout(t *testing.T) {
	var e snapEnt
	var v snapView
	if got := unsafe.Sizeof(e); got != 88 {
		t.Fatalf("snapEnt is %d bytes, want 88 (the snapshot's footprint)", got)
	}
	if got := unsafe.Sizeof(v); got != 24 {
		t.Fatalf("snapView is %d bytes, want 24 (the snapshot's footprint; 2.7 a line)", got)
	}
	// fl first: takeKept reads it at the element's address (an
	// instruction a ghost less than at an offset).
	if end := unsafe.Offsetof(v.qpos) + unsafe.Sizeof(v.qpos); unsafe.Offsetof(v.fl) != 0 || unsafe.Offsetof(v.yawQ) != 2 || end > 16 {
		t.Errorf("fl, yawQ and qpos in bytes %d–%d of the view, want fl at 0, all within 0–15", unsafe.Offsetof(v.fl), end-1)
	}
	// A table's usual ghosts are a run of entries (its view's): the
	// positions of 48 of them in at most 19 lines, the entries' 48.
	vw := make([]snapView, 1000)
	for _, first := range []int{0, 1, 2, 7, 500, 952} {
		lines := map[uintptr]bool{}
		for i := first; i < first+48; i++ {
			p := uintptr(unsafe.Pointer(&vw[i]))
			lines[p/64], lines[(p+15)/64] = true, true
		}
		if len(lines) > 19 {
			t.Errorf("48 views from %d: their positions and yaw codes on %d lines, want ≤ 19", first, len(lines))
		}
	}
}
