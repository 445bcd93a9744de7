package msg

import (
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/ghostwire/ghostwire/replication/ghost"
)

// View is one player's interest set for one zone tick (zone → ghost
// manager): every entity the player should see, with its priority and state.
// Pooled: get one with NewView, fill Entries (append to Entries[:0] — the
// pooled capacity is reused), Publish it; whoever ends up holding it calls
// Release.
type View struct {
	Player uint64
	Tick   uint64
	// ServerTime is the zone's clock at the tick (node monotonic time); the
	// ghost manager stamps states with its own clock, so this is informative.
	ServerTime time.Duration
	// Epoch is the player's handoff epoch at the zone that built the view
	// (0: unknown). The slot drops a view from an older epoch than one it
	// already had: the previous owner's last view, arriving late over
	// another path, would otherwise undo the new owner's and make ghosts
	// leave and come back.
	Epoch   uint64
	Entries []ghost.ViewEntry
	// Snap and Refs carry the view instead of Entries when the taker asked
	// for references (ViewSlot.AcceptRefs) and the zone has snapshots: the
	// entities as indices into the zone's snapshot of the tick, which every
	// view of the tick shares. A taker handles both forms. Set Snap with
	// SetSnap: the view holds a reference to it (the zone reuses a
	// snapshot nobody holds), which Release drops.
	Snap *ghost.Snapshot
	Refs []ghost.ViewRef

	// home is the slot that made it (ViewSlot.NewViewRefs): Release gives
	// it back there for the slot's next view.
	home *ViewSlot
	// room and roomBytes are where Refs' room starts and how long it is,
	// stored by Release as the view goes to its slot's spare. The
	// publisher's prefetch (ViewSlot.PrefetchSpare) reads these, never
	// Refs: a second publisher (the other owner, during a handoff) may
	// take the spare and fill Refs meanwhile. A stale hint, or the two
	// words from different releases, costs only a wasted fetch: a
	// prefetch never faults.
	room      atomic.Pointer[ghost.ViewRef]
	roomBytes atomic.Uint32
}

var viewPool = sync.Pool{New: func() any { return new(View) }}

// refsRoom are the rooms of the Refs of pooled reference views
// (NewViewRefs): each at most 4/3 of the one before from 12 on (and each
// a size class of the allocator's, so the room is the bytes held), so a
// view's Refs hold at most 4/3 of the references it was got for. Steps of
// 1.5× held 1.5× at most and the views between ticks 513 B a player at
// 2,000 (TestViewRefsFootprint), 177 B of it the View and room above the
// references; 4/3 holds 482 B (498 B with the View's room hint).
var refsRoom = [...]int{8, 12, 16, 20, 24, 28, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384, 448, 512, 640, 768, 896, 1024}

// refsPools pools reference views by the room of their Refs (refsRoom).
var refsPools [len(refsRoom)]sync.Pool

// NewView returns an empty View from the pool.
func NewView() *View { return viewPool.Get().(*View) }

// NewViewRefs returns an empty View whose Refs take n references without
// growing. Reference views are pooled by the room of their Refs: from one
// pool, every view's Refs grew to the most any player had in view (a
// crowd's), and the views in flight and in the pool held ≈ 2.5× the
// references they carried (1 KB per player at 1,000 players).
func NewViewRefs(n int) *View {
	k := 0
	for k < len(refsRoom)-1 && refsRoom[k] < n {
		k++
	}
	v, _ := refsPools[k].Get().(*View)
	if v == nil {
		v = new(View)
	}
	if cap(v.Refs) < n {
		v.Refs = make([]ghost.ViewRef, 0, max(n, refsRoom[k]))
	}
	return v
}

// SetSnap makes v a view by references into snap (fill Refs after): v
// holds a reference to snap (Snapshot.Retain; the caller holds one
// already, as the zone does this tick's) until Release, or until its
// taker moves it on.
func (v *View) SetSnap(snap *ghost.Snapshot) {
	if snap != nil {
		snap.Retain()
	}
	v.Snap = snap
}

// Release returns v to the pool; v may not be used afterwards.
func (v *View) Release() {
	clear(v.Entries) // drop *Class references
	v.Entries = v.Entries[:0]
	if v.Snap != nil {
		v.Snap.Release() // SetSnap's reference
	}
	v.Snap, v.Refs = nil, v.Refs[:0]
	v.Player, v.Tick, v.ServerTime, v.Epoch = 0, 0, 0, 0
	if h := v.home; h != nil {
		if !h.closed.Load() {
			v.room.Store(unsafe.SliceData(v.Refs))
			v.roomBytes.Store(uint32(cap(v.Refs)) * uint32(unsafe.Sizeof(ghost.ViewRef(0))))
			if h.spare.CompareAndSwap(nil, v) {
				return
			}
			v.room.Store(nil) // not to hold a room the view may drop
		}
		v.home = nil
	}
	if c := cap(v.Refs); c >= refsRoom[0] {
		// The pool of the largest room it holds: a view got from pool k
		// always has at least refsRoom[k].
		k := len(refsRoom) - 1
		for refsRoom[k] > c {
			k--
		}
		refsPools[k].Put(v)
		return
	}
	viewPool.Put(v)
}

// ViewReady nudges a ghost manager: its ViewSlot holds a view. It carries
// nothing, so one shared value serves every send (no allocation).
type ViewReady struct{}

// ViewReadyMsg is the message to send; a pointer to a zero-size value.
var ViewReadyMsg = &ViewReady{}

// ViewSlot is the one-deep mailbox between a zone and a ghost manager, with
// the policy "newest view supersedes": a view published before the previous
// one was taken replaces it (the older one is released and counted). Views
// are absolute — the ghost table diffs each against what it already holds —
// so skipping one loses nothing but an intermediate state, and a slow ghost
// manager never makes the zone queue views.
//
//	if slot.Publish(v) { ctx.Send(ghosts, msg.ViewReadyMsg) } // zone
//	if v := slot.Take(); v != nil { use(v); v.Release() }      // ghost manager, on ViewReady
//
// Publish returns true exactly when the slot was empty, so at most one
// ViewReady is in flight per slot and every view published is either taken
// after a nudge or superseded. Safe for one publisher and one taker running
// concurrently (a handoff changes the publisher; the two zones must not
// publish at the same time, which the handoff protocol guarantees). The zero
// ViewSlot is empty and ready to use.
type ViewSlot struct {
	v atomic.Pointer[View]
	// Counts in 32 bits (6.8 years of a view a tick at 20 Hz, superseded
	// every one), so that tick fits the slot's 56 bytes (a Conn embeds
	// it: TestViewSlotSize). Superseded and Stale widen them.
	superseded atomic.Uint32
	stale      atomic.Uint32
	epoch      atomic.Uint64 // the newest epoch published
	// spare is the view the taker released last (View.Release), for the
	// publisher's next one (NewViewRefs).
	spare atomic.Pointer[View]
	// ctl is the player's Control the connection released last
	// (Control.Release), for the zone's next one (NewControl): the
	// slot is the one object a zone and a connection share per player.
	ctl    atomic.Pointer[Control]
	closed atomic.Bool
	refs   atomic.Bool // the taker reads View.Snap and View.Refs
	// tick is the Tick of the view published last (Tick): a taker that
	// leaves the view in the slot until it applies it reads its tick here,
	// not in the view, which the publisher may take back meanwhile.
	tick atomic.Uint64
}

// NewControl returns a zeroed Control, as msg.NewControl: the one the
// connection released last, which comes back to the slot when released
// again (one a player a tick; two atomic swaps instead of a pool's Get
// and Put across processors).
func (s *ViewSlot) NewControl() *Control {
	if c := s.ctl.Swap(nil); c != nil {
		return c
	}
	c := NewControl()
	c.home = s
	return c
}

// NewViewRefs returns an empty View whose Refs take n references without
// growing, as msg.NewViewRefs: the slot's own view, released by the taker,
// when its room fits n and holds at most 4/3 of n (as a view from the pools
// does), else one from the pools. Released, the view comes back to the
// slot. A view per player kept this way is two atomic swaps a tick, where
// the pools cost a Get and a Put across the publisher's and the taker's
// processors; and the pools, emptied by every second collection, made the
// views again.
//
// A view published and not taken yet (the taker lags) is taken back first
// and counted superseded: the view about to be published, of epoch (the
// View.Epoch it will carry), supersedes it anyway, and it serves as that
// view instead of a second one. A lagging taker kept two views a player
// (the untaken one, and the next, made because the first was not back) and
// more in the pools: 1.7–2.0 views a player at 1,000 and 2,000 players on
// a loaded host. The taker, nudged for the view taken back, finds the new
// one or nothing (Take). A taker that leaves the view it was nudged for in
// the slot until it uses it (ghostmgr.Manager: until its pump) lets a tick
// that comes first take that one back too, where holding it made the tick
// take a second view from the pools. A publisher whose view Publish would
// drop as stale (an epoch below the slot's) takes nothing back.
func (s *ViewSlot) NewViewRefs(n int, epoch uint64) *View {
	if s.v.Load() != nil && (epoch == 0 || epoch >= s.epoch.Load()) { // usually not: a load, not a swap, a tick
		if old := s.v.Swap(nil); old != nil {
			s.superseded.Add(1)
			old.Release() // to s.spare, if free
		}
	}
	if v := s.spare.Swap(nil); v != nil {
		if c := cap(v.Refs); c >= n && c <= max(refsRoom[0], n+n/3) {
			return v
		}
		v.home = nil
		v.Release()
	}
	v := NewViewRefs(n)
	v.home = s
	return v
}

// AcceptRefs tells publishers the taker reads views given as references
// into a snapshot (View.Snap, View.Refs). Takers that pass views on (to
// another process) do not call it and get Entries.
func (s *ViewSlot) AcceptRefs() { s.refs.Store(true) }

// AcceptsRefs reports whether AcceptRefs was called.
func (s *ViewSlot) AcceptsRefs() bool { return s.refs.Load() }

// Closed reports whether the taker closed the slot (its connection ended).
func (s *ViewSlot) Closed() bool { return s.closed.Load() }

// Stale counts views dropped for an older epoch than one already published.
func (s *ViewSlot) Stale() uint64 { return uint64(s.stale.Load()) }

// Publish hands v to the slot and reports whether the taker must be nudged.
// The caller gives up v. On a closed slot v is released and false returned.
func (s *ViewSlot) Publish(v *View) (nudge bool) {
	if s.closed.Load() {
		v.Release()
		return false
	}
	if v.Epoch != 0 {
		for {
			cur := s.epoch.Load()
			if v.Epoch < cur {
				s.stale.Add(1)
				v.Release()
				return false
			}
			if v.Epoch == cur || s.epoch.CompareAndSwap(cur, v.Epoch) {
				break
			}
		}
	}
	s.tick.Store(v.Tick)
	old := s.v.Swap(v)
	if old != nil {
		s.superseded.Add(1)
		old.Release()
		return false
	}
	if s.closed.Load() { // closed while we swapped: do not leave v behind
		if v := s.v.Swap(nil); v != nil {
			v.Release()
		}
		return false
	}
	return true
}

// Lower makes epoch the newest the slot has seen if it was above it: the
// taker learned that the player's real owner is at epoch (its record), and
// a higher one came from a restore the record refused. Without it the real
// owner's views would be dropped as stale until the player's epoch passed
// the refused one's (its next handoff): the player moves, its ghosts do not.
// A view the slot holds from above epoch goes with it.
func (s *ViewSlot) Lower(epoch uint64) {
	for {
		cur := s.epoch.Load()
		if cur <= epoch || s.epoch.CompareAndSwap(cur, epoch) {
			break
		}
	}
	if v := s.v.Load(); v != nil && v.Epoch > epoch && s.v.CompareAndSwap(v, nil) {
		s.superseded.Add(1)
		v.Release()
	}
}

// Take removes and returns the newest view, or nil if there is none. The
// caller owns the view and releases it.
func (s *ViewSlot) Take() *View { return s.v.Swap(nil) }

// Waiting reports whether the slot holds a view not taken yet.
func (s *ViewSlot) Waiting() bool { return s.v.Load() != nil }

// Tick is the Tick of the view published last (0: none yet): a taker
// nudged for a view it leaves in the slot until it applies it learns its
// tick here (a newer view may have superseded it since: its tick).
func (s *ViewSlot) Tick() uint64 { return s.tick.Load() }

// Close makes the slot refuse further views and releases the one it holds.
// The ghost manager closes it when it stops.
func (s *ViewSlot) Close() {
	s.closed.Store(true)
	if v := s.v.Swap(nil); v != nil {
		v.Release()
	}
	s.spare.Store(nil)
	s.ctl.Store(nil)
}

// Superseded is how many views were replaced before being taken.
func (s *ViewSlot) Superseded() uint64 { return uint64(s.superseded.Load()) }
