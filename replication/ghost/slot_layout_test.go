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
		tab.resizeRecords(n)
		if p := uintptr(unsafe.Pointer(unsafe.SliceData(tab.slots))); p%64 != 0 {
			t.Fatalf("%d slots start %d bytes into a line: a slot would straddle two", n, p%64)
		}
	}
	tab.resizeRecords(0)
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

// TestSnapEntLayout pins where an update's position, yaw code and group
// codes are: in the entry's view (snapView, which the view's walk reads
// right before the packet's), not the entry — with the position in the
// entry, 96 bytes apart, each ghost's position was a line of its own, a
// D1 miss a usual update (BenchmarkTables1000Pump); with the codes there,
// each update of another group (BenchmarkTables1000PumpCrowd) — and that
// a view is a line: 64 bytes, on a line of its own in snapArrays'
// allocation, so the walk's line is the update's. The entry's flags and
// bad fill the view's line, and the entry holds its name by pointer, so
// the entry and its view cost 88 bytes (TestSnapshotEntryFootprint; 112
// with the name in the entry).
func TestSnapEntLayout(t *testing.T) {
	var e snapEnt
	var v snapView
	if got := unsafe.Sizeof(e); got != 24 {
		t.Fatalf("snapEnt is %d bytes, want 24 (the snapshot's footprint: 88 with its view)", got)
	}
	if got := unsafe.Sizeof(v); got != 64 {
		t.Fatalf("snapView is %d bytes, want 64 (a line)", got)
	}
	// fl first: takeKept reads it at the element's address (an
	// instruction a ghost less than at an offset).
	if unsafe.Offsetof(v.fl) != 0 {
		t.Errorf("fl at byte %d of the view, want 0", unsafe.Offsetof(v.fl))
	}
	// Large arrays are page-aligned; from 16 entries (1 KB) on, the
	// allocator's size classes are whole lines, so an array starts on
	// one (fewer entries: a zone that small keeps its views in D1).
	for _, n := range []int{16, 17, 40, 100, 250, 550, 1000, 1100, 2200} {
		for _, stride := range []int{1, 3, 7, 8} {
			vw, _ := snapArrays(n, stride)
			if p := uintptr(unsafe.Pointer(unsafe.SliceData(vw))); p%64 != 0 {
				t.Errorf("%d views (stride %d) start %d bytes into a line: each would straddle two", n, stride, p%64)
			}
		}
	}
}
