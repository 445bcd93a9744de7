package ghost

import (
	"testing"
	"unsafe"
)

// TestPosTrackHotBytes pins the track at 32 bytes, half a line, with
// everything the usual record (writeUsual: meta, the delivered pair and
// dq[1]'s stamp read, fq and ft[0] written) and the usual fate (resolve:
// ft[0], t1, fq read, the pair and meta written) touch: the per-id arrays
// start on a line (TestSlotLayout), so every track lies in one line. The
// second oldest position in flight is the pool's (posPool.fq1): with it in
// the track (40 bytes), three tracks of eight had those fields in two
// lines.
func TestPosTrackHotBytes(t *testing.T) {
	var p posTrack
	if got := unsafe.Sizeof(p); got != 32 {
		t.Fatalf("posTrack is %d bytes, want 32 (half a line)", got)
	}
	hot := []struct {
		name     string
		off, end uintptr
	}{
		{"t1", unsafe.Offsetof(p.t1), unsafe.Offsetof(p.t1) + unsafe.Sizeof(p.t1)},
		{"ft[0]", unsafe.Offsetof(p.ft), unsafe.Offsetof(p.ft) + unsafe.Sizeof(p.ft[0])},
		{"meta", unsafe.Offsetof(p.meta), unsafe.Offsetof(p.meta) + unsafe.Sizeof(p.meta)},
		{"dq", unsafe.Offsetof(p.dq), unsafe.Offsetof(p.dq) + unsafe.Sizeof(p.dq)},
		{"fq", unsafe.Offsetof(p.fq), unsafe.Offsetof(p.fq) + unsafe.Sizeof(p.fq)},
	}
	for _, f := range hot {
		if f.end > 32 {
			t.Errorf("%s in bytes %d–%d of the track, want within its 32", f.name, f.off, f.end-1)
		}
	}
	// The tracks of a table start on a line, as the slots do.
	reg, _, _ := newTestRegistry(t)
	tab, err := NewTable(reg, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	tab.pp.fq1 = make([]uint64, 8) // made, as at a table's first second position in flight
	for n := 16; n <= 1024; n += 8 {
		tab.resizeRecords(n)
		if a := uintptr(unsafe.Pointer(unsafe.SliceData(tab.pos))); a%64 != 0 {
			t.Fatalf("%d tracks start %d bytes into a line: a track would straddle two", n, a%64)
		}
		if tab.pp.fq1 != nil && len(tab.pp.fq1) != len(tab.pos) {
			t.Fatalf("%d tracks, %d second positions in flight: want one each", len(tab.pos), len(tab.pp.fq1))
		}
	}
}
