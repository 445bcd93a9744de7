package interest

import "testing"

// Prefetch is a hint: a set never updated has no room, and asking for it
// neither panics nor gives it members.
func TestPrefetchEmptySet(t *testing.T) {
	var s Set
	s.Prefetch()
	if s.Entries() != nil || s.Len() != 0 {
		t.Fatal("an empty set changed")
	}
}
