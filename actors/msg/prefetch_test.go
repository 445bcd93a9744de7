package msg

import (
	"testing"
)

// TestPrefetchLeavesTheSlotAlone: the hints change nothing a publisher or
// a taker sees — the spare view and Control stay where they are, with
// their contents, and an empty or closed slot is no fault.
func TestPrefetchLeavesTheSlotAlone(t *testing.T) {
	var s ViewSlot
	s.PrefetchSlot()
	s.PrefetchSpare() // no spares yet
	v := s.NewViewRefs(8, 0)
	v.Refs = v.Refs[:3]
	v.Release() // to the spare
	c := s.NewControl()
	c.Release()
	s.PrefetchSlot()
	s.PrefetchSpare()
	if got := s.NewViewRefs(8, 0); got != v {
		t.Fatal("the spare view moved")
	} else if len(got.Refs) != 0 || cap(got.Refs) < 8 {
		t.Fatalf("the spare view's references changed: len %d cap %d", len(got.Refs), cap(got.Refs))
	}
	if got := s.NewControl(); got != c {
		t.Fatal("the spare Control moved")
	}
	s.Close()
	s.PrefetchSpare()
}
