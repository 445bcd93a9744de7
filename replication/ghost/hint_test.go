package ghost

import (
	"slices"
	"testing"
	"time"
)

// The previous view's order keeps 16 bits of each id: a hint, which
// viewGhost checks against the slot it names. With more than 2^16 ghosts in
// scope the hints of the ids past it name other ghosts' slots (id mod 2^16),
// and those entities must still find their own ghosts — in the same order,
// and in another — never a neighbour's or a new one.
func TestViewOrderHintsPast16Bits(t *testing.T) {
	reg, _, nc := newTestRegistry(t)
	cfg := DefaultConfig()
	cfg.MaxGhosts = 1 << 17
	tab, err := NewTable(reg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	const n = 1<<16 + 100
	view := make([]ViewEntry, n)
	for i := range view {
		view[i] = ViewEntry{Entity: uint64(i + 1), Class: nc, Priority: 1}
		view[i].State.Health = 100
		view[i].State.Name = MustName("wolf")
	}
	now := time.Second
	if err := tab.SetView(now, view); err != nil {
		t.Fatal(err)
	}
	ids := make(map[uint64]uint32, n)
	for _, e := range view {
		id, ok := tab.GhostID(e.Entity)
		if !ok {
			t.Fatalf("entity %d has no ghost", e.Entity)
		}
		ids[e.Entity] = id
	}
	if id := ids[n]; id < 1<<16 {
		t.Fatalf("the last entity has id %d: the test lost its point", id)
	}
	for k, order := range []string{"same order", "reversed"} {
		if k == 1 {
			slices.Reverse(view)
		}
		now += 50 * time.Millisecond
		if err := tab.SetView(now, view); err != nil {
			t.Fatal(err)
		}
		if got := tab.Stats().GhostsAssigned; got != n {
			t.Fatalf("%s: %d ghosts assigned, want %d (no new ones)", order, got, n)
		}
		for i, id := range tab.order {
			if want := ids[view[i].Entity]; uint32(id) != want&(1<<16-1) || tab.entityOf(want) != view[i].Entity {
				t.Fatalf("%s: view entry %d (entity %d) hints %d, its ghost is %d", order, i, view[i].Entity, id, want)
			}
		}
		if err := checkInvariants(tab); err != nil {
			t.Fatalf("%s: %v", order, err)
		}
	}
}
