package ghost

import (
	"testing"
	"unsafe"
)

// slotField is one slot field's place: its offset and size.
type slotField struct {
	name      string
	off, size uintptr
}

// slotLines is the cache lines a ghost costs on average when the fields
// are all that is touched of its slot, over the four places a 48-byte slot
// starts in a 64-byte line (0, 16, 32, 48: one id in four each, whatever
// 16-byte-aligned address the array starts at).
func slotLines(fields []slotField) float64 {
	const line = 64
	total := 0
	for start := uintptr(0); start < line; start += 16 {
		touched := map[uintptr]bool{}
		for _, f := range fields {
			for b := f.off; b < f.off+f.size; b++ {
				touched[(start+b)/line] = true
			}
		}
		total += len(touched)
	}
	return float64(total) / 4
}

// TestSlotLayout pins the slot's field order for the cache (type slot's
// comment): the fields a view's usual ghost touches (takeKept, markSlot)
// and those a delivered fate's usual record touches (usualRun) each lie in
// two neighbouring 16-byte quarters of the slot, 1.25 lines a ghost, not
// the 1.5 of a slot touched all over; the slot stays 48 bytes. A field
// those paths start to touch belongs in its list here.
func TestSlotLayout(t *testing.T) {
	var s slot
	f := func(name string, off, size uintptr) slotField { return slotField{name, off, size} }
	view := []slotField{
		f("si", unsafe.Offsetof(s.si), unsafe.Sizeof(s.si)),
		f("viewGen", unsafe.Offsetof(s.viewGen), unsafe.Sizeof(s.viewGen)),
		f("phase", unsafe.Offsetof(s.phase), unsafe.Sizeof(s.phase)),
		f("fl", unsafe.Offsetof(s.fl), unsafe.Sizeof(s.fl)),
		f("prioB", unsafe.Offsetof(s.prioB), unsafe.Sizeof(s.prioB)),
		f("dirty", unsafe.Offsetof(s.dirty), unsafe.Sizeof(s.dirty)),
		f("since", unsafe.Offsetof(s.since), unsafe.Sizeof(s.since)),
		f("pendChg", unsafe.Offsetof(s.pendChg), unsafe.Sizeof(s.pendChg)),
		f("lastChg", unsafe.Offsetof(s.lastChg), unsafe.Sizeof(s.lastChg)),
	}
	fate := []slotField{
		f("phase", unsafe.Offsetof(s.phase), unsafe.Sizeof(s.phase)),
		f("ci", unsafe.Offsetof(s.ci), unsafe.Sizeof(s.ci)),
		f("inflight", unsafe.Offsetof(s.inflight), unsafe.Sizeof(s.inflight)),
		f("ackAt", unsafe.Offsetof(s.ackAt), unsafe.Sizeof(s.ackAt)),
		f("lastSeq", unsafe.Offsetof(s.lastSeq), unsafe.Sizeof(s.lastSeq)),
		f("ackBack", unsafe.Offsetof(s.ackBack), unsafe.Sizeof(s.ackBack)),
		f("lastChg", unsafe.Offsetof(s.lastChg), unsafe.Sizeof(s.lastChg)),
		f("pendChg", unsafe.Offsetof(s.pendChg), unsafe.Sizeof(s.pendChg)),
	}
	if got := unsafe.Sizeof(s); got != 48 {
		t.Fatalf("slot is %d bytes, want 48 (the per-id footprint)", got)
	}
	for _, tc := range []struct {
		name   string
		fields []slotField
	}{
		{"a view's usual ghost (takeKept)", view},
		{"a delivered fate's usual record (usualRun)", fate},
	} {
		if got := slotLines(tc.fields); got > 1.25 {
			t.Errorf("%s: %.2f lines a ghost, want ≤ 1.25 (fields at %v)", tc.name, got, tc.fields)
		}
	}
	// The model itself: the whole slot is 1.5 lines, a quarter 1, two
	// neighbouring quarters 1.25, the first and last 1.5.
	for _, tc := range []struct {
		fields []slotField
		want   float64
	}{
		{[]slotField{{"all", 0, 48}}, 1.5},
		{[]slotField{{"q0", 0, 16}}, 1},
		{[]slotField{{"q1", 16, 16}}, 1},
		{[]slotField{{"q2", 32, 16}}, 1},
		{[]slotField{{"q01", 0, 32}}, 1.25},
		{[]slotField{{"q12", 16, 32}}, 1.25},
		{[]slotField{{"q0", 0, 16}, {"q2", 32, 16}}, 1.5},
	} {
		if got := slotLines(tc.fields); got != tc.want {
			t.Errorf("slotLines(%v) = %v, want %v", tc.fields, got, tc.want)
		}
	}
}
