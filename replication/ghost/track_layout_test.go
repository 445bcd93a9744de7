package ghost

import (
	"testing"
	"unsafe"
)

// TestPosTrackHotBytes pins what the usual record (writeUsual: meta, the
// delivered pair and dq[1]'s stamp read, fq[0] and ft[0] written) and the
// usual fate (resolve: ft[0], t1, fq[0] read, the pair and meta written)
// touch of a 40-byte track to its first 32 bytes, fq[1] after them: the
// per-id arrays start on a line (TestSlotLayout), so of eight tracks, five
// lines, three have those bytes in two lines, where four did with fq[1]
// between them and the stamps and meta after.
func TestPosTrackHotBytes(t *testing.T) {
	var p posTrack
	if got := unsafe.Sizeof(p); got != 40 {
		t.Fatalf("posTrack is %d bytes, want 40", got)
	}
	hot := []struct {
		name     string
		off, end uintptr
	}{
		{"t1", unsafe.Offsetof(p.t1), unsafe.Offsetof(p.t1) + unsafe.Sizeof(p.t1)},
		{"ft[0]", unsafe.Offsetof(p.ft), unsafe.Offsetof(p.ft) + unsafe.Sizeof(p.ft[0])},
		{"meta", unsafe.Offsetof(p.meta), unsafe.Offsetof(p.meta) + unsafe.Sizeof(p.meta)},
		{"dq", unsafe.Offsetof(p.dq), unsafe.Offsetof(p.dq) + unsafe.Sizeof(p.dq)},
		{"fq[0]", unsafe.Offsetof(p.fq), unsafe.Offsetof(p.fq) + unsafe.Sizeof(p.fq[0])},
	}
	lo, hi := uintptr(40), uintptr(0)
	for _, f := range hot {
		lo, hi = min(lo, f.off), max(hi, f.end)
	}
	if hi-lo > 32 {
		t.Errorf("the usual record's and fate's fields span bytes %d–%d of the track, want 32 bytes at most", lo, hi-1)
	}
	split := 0
	for i := range uintptr(8) {
		a, b := i*40+lo, i*40+hi-1
		if a/64 != b/64 {
			split++
		}
	}
	if split > 3 {
		t.Errorf("%d of eight tracks have the usual fields in two lines, want 3", split)
	}
}
