package msg

import (
	"unsafe"

	"github.com/ghostwire/ghostwire/replication/prefetch"
)

// PrefetchSlot asks the CPU for the slot's line, and PrefetchSpare (a
// while later: it reads that line) for what the publisher's next
// NewViewRefs and NewControl reuse — the spare view with its references'
// room, and the spare Control — ahead of the zone's tick that fills them.
// Hints: neither waits. Only the spares: the taker released them and
// leaves them alone until the publisher takes them (a view in the slot,
// not taken yet, the taker may read at any time).
func (s *ViewSlot) PrefetchSlot() {
	prefetch.Lines(unsafe.Pointer(s), unsafe.Sizeof(*s))
}

// PrefetchSpare: see PrefetchSlot.
func (s *ViewSlot) PrefetchSpare() {
	if v := s.spare.Load(); v != nil {
		prefetch.Lines(unsafe.Pointer(v), unsafe.Sizeof(*v))
		prefetch.Lines(unsafe.Pointer(unsafe.SliceData(v.Refs)), uintptr(cap(v.Refs))*unsafe.Sizeof(v.Refs[0]))
	}
	if c := s.ctl.Load(); c != nil {
		prefetch.Lines(unsafe.Pointer(c), unsafe.Sizeof(*c))
	}
}
