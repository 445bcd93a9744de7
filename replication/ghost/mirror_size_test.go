package ghost

import (
	"testing"
	"unsafe"
)

// A history snapshot is 32 bytes, two to a cache line: the position is
// recomputed from its codes when a pose needs it, not stored (an observing
// bot's decode touches the two newest of every ghost in every section).
func TestSnapshotSize(t *testing.T) {
	if s := unsafe.Sizeof(snapshot{}); s != 32 {
		t.Fatalf("snapshot is %d bytes, want 32 (a Ghost is %d)", s, unsafe.Sizeof(Ghost{}))
	}
	t.Logf("Ghost %d bytes, history %d", unsafe.Sizeof(Ghost{}), unsafe.Sizeof(history{}))
}

// A Ghost is a whole number of cache lines, and so is the part before its
// snapshots: in a page every ghost starts a line and a snapshot pair shares
// one (cold decode: D1 misses 435 → 387 a section at 704 bytes against 712).
func TestGhostLineAligned(t *testing.T) {
	var g Ghost
	size, snaps := unsafe.Sizeof(g), unsafe.Offsetof(g.hist)+unsafe.Offsetof(g.hist.s)
	if size%64 != 0 || snaps%64 != 0 {
		t.Fatalf("Ghost is %d bytes, its snapshots at %d: want multiples of 64", size, snaps)
	}
}
