package handoff

import (
	"unsafe"

	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/replication/prefetch"
)

// PrefetchHead asks the CPU for the queue's first two moves (a tick takes
// one or two at 30 Hz input over 20 Hz ticks), the line a zone's tick
// reads of it first (Head) and, on a loaded node, finds in memory: the
// moves came in the tick's interval, with other connections' work between.
// A hint: it changes nothing.
func (q *MoveQueue) PrefetchHead() {
	if n := min(len(q.q), 2); n > 0 {
		prefetch.Lines(unsafe.Pointer(unsafe.SliceData(q.q)), uintptr(n)*unsafe.Sizeof(move.Move{}))
	}
}
