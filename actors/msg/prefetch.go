package msg

import (
	"unsafe"

	"github.com/ghostwire/ghostwire/replication/prefetch"
)

// PrefetchSlot asks the CPU for the slot's line, and PrefetchSpare (a
// while later: it reads that line) for what the publisher's next
// NewViewRefs and NewControl reuse — the spare view with its references'
// room, and the spare Control — ahead of the zone's tick that fills them.
// Hints: neither waits, and both read only atomic words (the references'
// room through View.room, not Refs, which another publisher may be
// filling), so they never race a publisher or a taker. Only the spares:
// a view in the slot, not taken yet, the taker may read at any time.
func (s *ViewSlot) PrefetchSlot() {
	prefetch.Lines(unsafe.Pointer(s), unsafe.Sizeof(*s))
}

// PrefetchSpare: see PrefetchSlot.
func (s *ViewSlot) PrefetchSpare() {
	if v := s.spare.Load(); v != nil {
		prefetch.Lines(unsafe.Pointer(v), unsafe.Sizeof(*v))
		prefetch.Lines(unsafe.Pointer(v.room.Load()), uintptr(v.roomBytes.Load()))
	}
	if c := s.ctl.Load(); c != nil {
		prefetch.Lines(unsafe.Pointer(c), unsafe.Sizeof(*c))
	}
}
