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

// TestSnapEntLayout pins what a usual update reads of a snapshot entry
// (writeUsual: the quantized position and yaw code, then the group codes)
// at the entry's start, the position and yaw in its first 16 bytes: an
// entry starts 0 or 32 bytes into a line (96 bytes apart), or 8 or 40 in
// a small snapshot whose runtime header comes first, and those 16 bytes
// are in one line at each of those starts.
func TestSnapEntLayout(t *testing.T) {
	var e snapEnt
	if got := unsafe.Sizeof(e); got != 96 {
		t.Fatalf("snapEnt is %d bytes, want 96 (the snapshot's footprint)", got)
	}
	if end := unsafe.Offsetof(e.yawQ) + unsafe.Sizeof(e.yawQ); unsafe.Offsetof(e.qpos) != 0 || end > 16 {
		t.Errorf("qpos and yawQ in bytes %d–%d of the entry, want within 0–15", unsafe.Offsetof(e.qpos), end-1)
	}
	if unsafe.Offsetof(e.gc) != 16 {
		t.Errorf("gc at byte %d of the entry, want 16 (after qpos and yawQ)", unsafe.Offsetof(e.gc))
	}
	// Where the entries of a small snapshot start: after the runtime's
	// 8-byte header, in a size class of whole lines.
	for _, n := range []int{10, 100, 250, 341} {
		ents := make([]snapEnt, n)
		base := uintptr(unsafe.Pointer(unsafe.SliceData(ents)))
		for i := range ents {
			lo := uintptr(unsafe.Pointer(&ents[i].qpos)) - base + base%64
			hi := lo + unsafe.Offsetof(e.yawQ) + 1
			if lo/64 != hi/64 {
				t.Fatalf("%d entries: entry %d's position and yaw straddle two lines (bytes %d–%d from a line's start)", n, i, lo%64, lo%64+hi-lo)
			}
		}
	}
}
