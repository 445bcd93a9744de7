package msg

import (
	"testing"

	"github.com/ghostwire/ghostwire/replication/ghost"
)

// TestPrefetchLeavesTheSlotAlone: the hints change nothing a publisher or
// a taker sees — the spare view and Control stay where they are, with
// their contents, and an empty or closed slot is no fault.
func TestPrefetchLeavesTheSlotAlone(t *testing.T) {
	var s ViewSlot
	s.PrefetchSlot()
	s.PrefetchSpare() // no spares yet
	s.PrefetchRoom()
	v := s.NewViewRefs(8, 0)
	v.Refs = v.Refs[:3]
	v.Release() // to the spare
	c := s.NewControl()
	c.Release()
	s.PrefetchSlot()
	s.PrefetchSpare()
	s.PrefetchRoom()
	if got := s.NewViewRefs(8, 0); got != v {
		t.Fatal("the spare view moved")
	} else if len(got.Refs) != 0 || cap(got.Refs) < 8 {
		t.Fatalf("the spare view's references changed: len %d cap %d", len(got.Refs), cap(got.Refs))
	}
	if got := s.NewControl(); got != c {
		t.Fatal("the spare Control moved")
	}
	// A view waiting for the taker: the taker's hints leave it in the
	// slot, with its references.
	s.AcceptRefs()
	s.PrefetchWaiting() // nothing waiting
	s.PrefetchWaitingRefs()
	w := s.NewViewRefs(8, 0)
	w.Refs = append(w.Refs, 1, 2, 3)
	w.Tick = 7
	s.Publish(w)
	s.PrefetchWaiting()
	s.PrefetchWaitingRefs()
	if got := s.Take(); got != w || got.Tick != 7 || len(got.Refs) != 3 || got.Refs[2] != 3 {
		t.Fatal("the waiting view moved or changed")
	}
	w.Release()
	s.Close()
	s.PrefetchSpare()
	s.PrefetchRoom()
	s.PrefetchWaiting()
	s.PrefetchWaitingRefs()
}

// TestPrefetchSpareRacesNoPublisher: one zone prefetches a slot's spare
// while another publishes into the slot (a handoff's two owners) and the
// connection takes and releases, asking for the waiting view first. Run
// with -race: reading a view's Refs for its room's address raced the
// other publisher, which takes the spare (or a superseded view) and fills
// Refs meanwhile; the room's hint in atomic words does not.
func TestPrefetchSpareRacesNoPublisher(t *testing.T) {
	var s ViewSlot
	s.AcceptRefs()
	const rounds = 20000
	done := make(chan struct{})
	go func() { // the other owner: publishes views of growing and shrinking size
		defer close(done)
		for i := range rounds {
			n := 8 + i%200
			v := s.NewViewRefs(n, 0)
			for j := range n {
				v.Refs = append(v.Refs, ghost.ViewRef(j))
			}
			v.Tick = uint64(i + 1)
			s.Publish(v)
			if c := s.NewControl(); c != nil {
				c.Release()
			}
		}
	}()
	taken := 0
	for finished := false; !finished; {
		select {
		case <-done:
			finished = true
		default:
		}
		s.PrefetchSlot()
		s.PrefetchSpare() // this zone, not publishing
		s.PrefetchRoom()
		// The taker's hints for the waiting view, which the publisher
		// may supersede and reuse meanwhile: reading its Refs would race.
		s.PrefetchWaiting()
		s.PrefetchWaitingRefs()
		if v := s.Take(); v != nil {
			if len(v.Refs) < 8 {
				t.Fatalf("view of tick %d holds %d references, want ≥ 8", v.Tick, len(v.Refs))
			}
			taken++
			v.Release()
		}
	}
	if taken == 0 {
		t.Fatal("no view was taken")
	}
}
