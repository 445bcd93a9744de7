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

// PrefetchWaiting asks, for the taker, for the view waiting in the slot
// (the View itself: Tick, Snap, Refs, what applying it reads first) ahead
// of its apply; PrefetchWaitingRefs, a while later (it reads the View's
// line), for the room of its references, which the apply walks twice
// (bounds, then the ghosts). The zone wrote both at its tick, many
// connections' pumps before this one's, and on a loaded node they have
// left the caches by then: the View's first read and the references'
// were ≈ 3 % of a 2,000-player node's samples. Hints, reading only
// atomic words, as the spares' are: the room through View.room (the room
// of the view's last release: its references' room unless they outgrew
// it), not Refs, since a publisher may supersede the view and reuse it
// meanwhile.
func (s *ViewSlot) PrefetchWaiting() {
	if v := s.v.Load(); v != nil {
		prefetch.Lines(unsafe.Pointer(v), unsafe.Sizeof(*v))
	}
}

// PrefetchWaitingRefs: see PrefetchWaiting.
func (s *ViewSlot) PrefetchWaitingRefs() {
	if v := s.v.Load(); v != nil {
		prefetch.Lines(unsafe.Pointer(v.room.Load()), min(uintptr(v.roomBytes.Load()), maxPrefetchRefs))
	}
}

// maxPrefetchRefs bounds PrefetchWaitingRefs' hint (1 KB: 128 references,
// a crowd's view; the spread world's are ≈ 25).
const maxPrefetchRefs = 1024
