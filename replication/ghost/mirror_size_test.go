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
