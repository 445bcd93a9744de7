package ghost

import (
	"unsafe"

	"github.com/ghostwire/ghostwire/replication/prefetch"
)

// PrefetchHeader asks the CPU for the Table's own lines, ahead of a use a
// while later (PrefetchRecords after it, then the table's fates, view and
// write): a hint, it waits for nothing.
func (t *Table) PrefetchHeader() {
	prefetch.Lines(unsafe.Pointer(t), unsafe.Sizeof(*t))
}

// PrefetchRecords asks for the per-record arrays every fate, view and
// write of the table walks: the slots, the position tracks and the
// records in flight. It reads the Table's first lines (PrefetchHeader
// first, a while ahead).
func (t *Table) PrefetchRecords() {
	// The arrays' lengths, on the Table's line 0 with their pointers
	// (live, the records in use, is on another line).
	prefetch.Lines(unsafe.Pointer(unsafe.SliceData(t.slots)), uintptr(len(t.slots))*unsafe.Sizeof(slot{}))
	prefetch.Lines(unsafe.Pointer(unsafe.SliceData(t.pos)), uintptr(len(t.pos))*unsafe.Sizeof(posTrack{}))
}
