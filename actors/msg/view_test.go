package msg

import (
	"sync"
	"testing"
	"unsafe"

	"github.com/ghostwire/ghostwire/replication/ghost"
)

func view(tick uint64) *View {
	v := NewView()
	v.Tick = tick
	v.Entries = append(v.Entries, ghost.ViewEntry{Entity: tick})
	return v
}

func TestViewSlotNewestSupersedes(t *testing.T) {
	var s ViewSlot
	if !s.Publish(view(1)) {
		t.Fatal("first publish into an empty slot must nudge")
	}
	if s.Publish(view(2)) || s.Publish(view(3)) {
		t.Fatal("publish into a full slot must not nudge again")
	}
	v := s.Take()
	if v == nil || v.Tick != 3 {
		t.Fatalf("Take = %+v, want tick 3", v)
	}
	v.Release()
	if s.Take() != nil {
		t.Fatal("slot must be empty after Take")
	}
	if got := s.Superseded(); got != 2 {
		t.Fatalf("Superseded = %d, want 2", got)
	}
	if !s.Publish(view(4)) {
		t.Fatal("publish after Take must nudge")
	}
	s.Close()
	if s.Take() != nil {
		t.Fatal("Close must drop the held view")
	}
	if s.Publish(view(5)) {
		t.Fatal("publish into a closed slot must not nudge")
	}
	if s.Take() != nil {
		t.Fatal("closed slot must stay empty")
	}
}

// Every nudge finds a view or a view taken by an earlier nudge's Take; the
// taker sees ticks in increasing order and always ends with the last one.
func TestViewSlotConcurrentPublishTake(t *testing.T) {
	var s ViewSlot
	nudges := make(chan struct{}, 1) // ≤ 1 nudge in flight: a full channel is a bug
	const n = 20000
	var wg sync.WaitGroup
	var last uint64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range nudges {
			for v := s.Take(); v != nil; v = s.Take() {
				if v.Tick <= last {
					t.Errorf("tick %d after %d", v.Tick, last)
				}
				last = v.Tick
				v.Release()
			}
		}
	}()
	for i := uint64(1); i <= n; i++ {
		if s.Publish(view(i)) {
			select {
			case nudges <- struct{}{}:
			default:
				// A previous nudge is still queued; it will Take this view.
			}
		}
	}
	nudges <- struct{}{}
	close(nudges)
	wg.Wait()
	if last != n {
		t.Fatalf("last tick seen = %d, want %d", last, n)
	}
}

// A view from an older handoff epoch than one already published (the
// previous owner's last view, late over another path) is dropped; views of
// the same or a newer epoch, and views without one, go through.
func TestViewSlotDropsOlderEpochs(t *testing.T) {
	var s ViewSlot
	pub := func(epoch uint64, tick uint64) bool {
		v := NewView()
		v.Epoch, v.Tick = epoch, tick
		s.Publish(v)
		got := s.Take()
		if got == nil {
			return false
		}
		ok := got.Tick == tick
		got.Release()
		return ok
	}
	if !pub(2, 1) || !pub(2, 2) {
		t.Fatal("views of one epoch refused")
	}
	if !pub(3, 3) {
		t.Fatal("a newer epoch refused")
	}
	if pub(2, 4) {
		t.Fatal("a view of an older epoch went through")
	}
	if s.Stale() != 1 {
		t.Fatalf("Stale = %d", s.Stale())
	}
	if !pub(0, 5) {
		t.Fatal("a view without an epoch refused")
	}
}

// Lower takes the slot back to a lower epoch (the player's record named
// its real owner below a refused restore's): that owner's views go through
// again, a held view from above it goes, and a lower call than the slot's
// epoch is the only one that changes anything.
func TestViewSlotLower(t *testing.T) {
	var s ViewSlot
	pub := func(epoch uint64) bool {
		v := NewView()
		v.Epoch = epoch
		before := s.Stale()
		s.Publish(v)
		return s.Stale() == before
	}
	if !pub(9) {
		t.Fatal("the first view refused")
	}
	if pub(7) {
		t.Fatal("a view below the slot's epoch went through before Lower")
	}
	s.Lower(7) // the view at 9 is still held: it goes
	if v := s.Take(); v != nil {
		t.Fatalf("a view of epoch %d held after Lower(7)", v.Epoch)
	}
	if !pub(7) {
		t.Fatal("the real owner's view at 7 dropped after Lower(7)")
	}
	s.Lower(8) // above the slot's epoch: nothing changes
	if v := s.Take(); v == nil || v.Epoch != 7 {
		t.Fatalf("Lower(8) at epoch 7 took the view at 7: %v", v)
	} else {
		v.Release()
	}
	if pub(6) {
		t.Fatal("a view below 7 went through after Lower(8)")
	}
}

// A reference view's Refs take the references it was got for without
// growing and hold at most 4/3 as many, whatever views of other sizes
// went through the pool before it (from one pool every view's room grew
// to the most crowded player's).
func TestViewRefsRoomFollowsTheView(t *testing.T) {
	bound := func(n int) int { return max(8, n+n/3) }
	for round := range 3 {
		var vs []*View
		for _, n := range []int{1000, 700, 300, 120, 40} { // crowded views first
			for range 20 {
				v := NewViewRefs(n)
				v.Refs = append(v.Refs, make([]ghost.ViewRef, n)...)
				vs = append(vs, v)
			}
		}
		for _, v := range vs {
			v.Release()
		}
		for n := 1; n <= 1024; n += 7 {
			v := NewViewRefs(n)
			if c := cap(v.Refs); c < n || c > bound(n) || len(v.Refs) != 0 {
				t.Fatalf("round %d: NewViewRefs(%d): len %d room %d, want 0 and %d…%d", round, n, len(v.Refs), c, n, bound(n))
			}
			defer v.Release()
		}
	}
	if v := NewViewRefs(5000); cap(v.Refs) < 5000 {
		t.Fatalf("NewViewRefs(5000): room %d", cap(v.Refs))
	}
}

// A slot's views come back to it: the view its taker released is the
// slot's next one while its room fits (not above 4/3 of the references
// asked for, as from the pools), a superseded view too, and a closed slot
// keeps none. The round trip allocates nothing.
func TestViewSlotReusesItsView(t *testing.T) {
	var s ViewSlot
	round := func(n int) *View {
		v := s.NewViewRefs(n, 0)
		if cap(v.Refs) < n || len(v.Refs) != 0 || v.Snap != nil || v.Player != 0 || v.Tick != 0 {
			t.Fatalf("NewViewRefs(%d): len %d room %d, snap %v, player %d tick %d", n, len(v.Refs), cap(v.Refs), v.Snap, v.Player, v.Tick)
		}
		v.Player, v.Tick = 7, 9
		for i := range n {
			v.Refs = append(v.Refs, ghost.ViewRef(i))
		}
		s.Publish(v)
		s.Take().Release()
		return v
	}
	first := round(40)
	if s.spare.Load() != first {
		t.Fatal("the released view did not go back to its slot")
	}
	if v := round(40); v != first {
		t.Fatal("the released view did not come back to its slot")
	}
	if v := round(30); v != first {
		t.Fatalf("a view with room %d was not reused for 30 references", cap(v.Refs))
	}
	if v := round(29); v == first {
		t.Fatalf("a view with room %d reused for 29 references", cap(v.Refs))
	}
	if v := round(4); v == first {
		t.Fatalf("a view with room %d reused for 4 references", cap(v.Refs))
	}
	small := round(4)
	if v := round(100); v == small || cap(v.Refs) < 100 {
		t.Fatalf("a view with room %d handed out for 100 references", cap(v.Refs))
	}
	// Superseded: the older view comes back at once.
	a := s.NewViewRefs(10, 0)
	s.Publish(a)
	b := s.NewViewRefs(10, 0)
	s.Publish(b)
	if c := s.NewViewRefs(10, 0); c != a {
		t.Fatal("the superseded view did not come back")
	} else {
		c.Release()
	}
	if n := testing.AllocsPerRun(100, func() { round(40) }); n != 0 {
		t.Fatalf("%v allocations a view's round trip", n)
	}
	s.Close()
	v := s.NewViewRefs(10, 0)
	v.Release()
	if s.spare.Load() != nil {
		t.Fatal("a closed slot kept a view")
	}
}

// A view published and not taken (the taker lags) is taken back for the
// next one: a slot whose taker lags holds one view, not two, and the
// round trip allocates nothing; the taker finds the newest view.
func TestViewSlotTakesBackAnUntakenView(t *testing.T) {
	var s ViewSlot
	a := s.NewViewRefs(10, 0)
	a.Refs, a.Tick = append(a.Refs, ghost.ViewRef(1)), 1
	if !s.Publish(a) {
		t.Fatal("no nudge for the first view")
	}
	b := s.NewViewRefs(10, 0)
	if b != a || len(b.Refs) != 0 || b.Tick != 0 || s.Superseded() != 1 {
		t.Fatalf("the untaken view not taken back: same %v, %d refs, tick %d, superseded %d", b == a, len(b.Refs), b.Tick, s.Superseded())
	}
	b.Refs, b.Tick = append(b.Refs, ghost.ViewRef(2)), 2
	s.Publish(b)
	if n := testing.AllocsPerRun(100, func() { s.Publish(s.NewViewRefs(10, 0)) }); n != 0 {
		t.Fatalf("%v allocations a tick while the taker lags", n)
	}
	v := s.Take()
	if v != a || s.Take() != nil {
		t.Fatal("the slot held more than its one view")
	}
	v.Release()
	// A stale publisher (the previous owner, epoch 4, after the new
	// owner's epoch 5) does not take the newer view back.
	c := s.NewViewRefs(10, 5)
	c.Epoch, c.Tick = 5, 10
	s.Publish(c)
	d := s.NewViewRefs(10, 4)
	d.Epoch = 4
	if d == c {
		t.Fatal("a stale publisher took the newer view back")
	}
	s.Publish(d) // dropped: stale
	if v := s.Take(); v != c || v.Tick != 10 {
		t.Fatalf("the taker found %v, want the newer view", v)
	}
}

// The slot's view goes back and forth between a publisher and a taker on
// two goroutines (run with -race): every view the taker sees is whole.
func TestViewSlotReuseConcurrent(t *testing.T) {
	var s ViewSlot
	nudges := make(chan struct{}, 1)
	const n = 20000
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range nudges {
			for v := s.Take(); v != nil; v = s.Take() {
				if len(v.Refs) != int(v.Tick%50) || v.Player != v.Tick {
					t.Errorf("tick %d: player %d, %d refs", v.Tick, v.Player, len(v.Refs))
				}
				for _, r := range v.Refs {
					if r != ghost.ViewRef(uint32(v.Tick)) {
						t.Errorf("tick %d: a reference %#x", v.Tick, uint32(r))
						break
					}
				}
				v.Release()
			}
		}
	}()
	for i := uint64(1); i <= n; i++ {
		v := s.NewViewRefs(int(i%50), 0)
		v.Player, v.Tick = i, i
		for range i % 50 {
			v.Refs = append(v.Refs, ghost.ViewRef(uint32(i)))
		}
		if s.Publish(v) {
			select {
			case nudges <- struct{}{}:
			default:
			}
		}
	}
	nudges <- struct{}{}
	close(nudges)
	<-done
}

// A player's Control comes back to its slot: the one the connection
// released is the zone's next, zeroed; a closed slot keeps none.
func TestViewSlotReusesItsControl(t *testing.T) {
	var s ViewSlot
	c := s.NewControl()
	c.Player, c.Tick, c.View, c.Events.Gen = 5, 9, true, 3
	c.Release()
	if s.ctl.Load() != c {
		t.Fatal("the released Control did not go back to its slot")
	}
	d := s.NewControl()
	if d != c {
		t.Fatal("the released Control did not come back to its slot")
	}
	if d.Player != 0 || d.Tick != 0 || d.View || d.Events.Gen != 0 {
		t.Fatalf("a reused Control not zeroed: %+v", d)
	}
	if n := testing.AllocsPerRun(100, func() { s.NewControl().Release() }); n != 0 {
		t.Fatalf("%v allocations a Control's round trip", n)
	}
	e := s.NewControl() // a second one in flight: released to the pool
	d.Release()
	e.Release()
	if s.NewControl() != d {
		t.Fatal("the slot did not keep the first Control released")
	}
	s.Close()
	d.Release()
	if s.ctl.Load() != nil {
		t.Fatal("a closed slot kept a Control")
	}
}

// A connection embeds its ViewSlot (actors/conn TestConnLayout keeps the
// Conn in the 448-byte size class): the slot stays at 56 bytes.
func TestViewSlotSize(t *testing.T) {
	if n := unsafe.Sizeof(ViewSlot{}); n > 56 {
		t.Fatalf("ViewSlot is %d bytes, want ≤ 56", n)
	}
}
