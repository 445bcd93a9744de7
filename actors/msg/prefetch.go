package msg

import (
	"unsafe"

	"github.com/ghostwire/ghostwire/replication/prefetch"
)

// PrefetchSlot asks the CPU for the slot's line; PrefetchSpare, a while
// later (it reads that line), for the spare view and the spare Control
// the publisher's next NewViewRefs and NewControl reuse; PrefetchRoom, a
// while after that (it reads the view's line), for the spare view's
// references' room — ahead of the zone's tick that fills them. Hints:
// none waits but for the lines the stage before asked for, and each
// reads only atomic words (the room through View.room, not Refs, which
// another publisher may be filling), so they never race a publisher or a
// taker. Only the spares: a view in the slot, not taken yet, the taker
// may read at any time.
func (s *ViewSlot) PrefetchSlot() {
	prefetch.Lines(unsafe.Pointer(s), unsafe.Sizeof(*s))
}

// PrefetchSpare: see PrefetchSlot.
func (s *ViewSlot) PrefetchSpare() {
	if v := s.spare.Load(); v != nil {
		prefetch.Lines(unsafe.Pointer(v), unsafe.Sizeof(*v))
	}
	if c := s.ctl.Load(); c != nil {
		prefetch.Lines(unsafe.Pointer(c), unsafe.Sizeof(*c))
	}
}

// PrefetchRoom: see PrefetchSlot.
func (s *ViewSlot) PrefetchRoom() {
	if v := s.spare.Load(); v != nil {
		prefetch.Lines(unsafe.Pointer(v.room.Load()), uintptr(v.roomBytes.Load()))
	}
}
