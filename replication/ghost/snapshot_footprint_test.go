package ghost

import (
	"runtime"
	"testing"
	"unsafe"
)

// TestSnapshotEntryFootprint bounds what a zone's snapshot costs an
// entry beyond the first of its series: tables pin the snapshots of their
// latest views, so several of a zone's are alive at once (more when shards
// fall behind), and each costs its entries, their views and stamps.
func TestSnapshotEntryFootprint(t *testing.T) {
	reg, pc, _ := newTestRegistry(t)
	const n = 2000
	w, err := NewSnapshotWriter(reg)
	if err != nil {
		t.Fatal(err)
	}
	states := make([]State, n)
	for i := range states {
		states[i].Pos = [3]float64{float64(i%200) - 100, 1, float64(i/200) - 5}
		states[i].Vel[0] = 2
		states[i].Health = 900
		states[i].Name = MustName("player-with-a-name")
	}
	seal := func() *Snapshot {
		s := w.Next(n)
		for i := range states {
			states[i].Pos[0] += 0.125
			s.Set(i, uint64(i+1), pc, &states[i])
		}
		w.Seal(s)
		s.Retain() // a table's
		return s
	}
	first := seal()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	second := seal()
	runtime.GC()
	runtime.ReadMemStats(&after)
	// What the second snapshot allocated (all of it alive: retained).
	per := float64(after.TotalAlloc-before.TotalAlloc) / n
	t.Logf("a snapshot: %.1f B an entry (entry %d B, stride %d)", per, unsafe.Sizeof(snapEnt{}), second.stride)
	// Measured 143.6 B (2026-11-29; 2026-12-01 with the quantized
	// position and yaw code moved from the entry to its view; 2026-12-02
	// with the group codes, flags and bad moved there too): the entry 48
	// (the entity, class and name; the float State stays with the writer,
	// which Set compares the next snapshot's with), its view 64 (the
	// position, yaw and group codes, the changes and flags: a line), its
	// stamps 28, the allocations rounded up. Was 221–224 B with the
	// entry's State (176 B an entry). 119.0 B (2026-12-02) with the name
	// shared by pointer (24-byte entries): the second snapshot's names
	// are the first's, unchanged, so it allocates none.
	if per > 126 {
		t.Errorf("a snapshot costs %.1f B an entry, want ≤ 126", per)
	}
	runtime.KeepAlive(first)
	runtime.KeepAlive(second)
}
