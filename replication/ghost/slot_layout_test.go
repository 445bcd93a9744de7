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
