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
// write of the table walks: the slots and the position tracks of the
// records in use. It reads the Table's header (PrefetchHeader first, a
// while ahead).
func (t *Table) PrefetchRecords() {
	n := uintptr(min(max(int(t.live), 0), len(t.slots), len(t.pos)))
	prefetch.Lines(unsafe.Pointer(unsafe.SliceData(t.slots)), n*unsafe.Sizeof(slot{}))
	prefetch.Lines(unsafe.Pointer(unsafe.SliceData(t.pos)), n*unsafe.Sizeof(posTrack{}))
}
