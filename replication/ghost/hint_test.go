package ghost

import (
	"errors"
	"slices"
	"testing"
	"time"
)

// A Table maps ids and records in 16 bits: it takes MaxGhosts up to 2^16
// (DefaultMaxGhosts) and refuses more. At 2^16 every id is in use at
// once: the ids run to 2^16 − 1, the view order's hints (records) name
// every ghost, in the same order and in another, and the entity past the
// last id finds none.
func TestViewOrderHintsAtMaxGhosts(t *testing.T) {
	reg, _, nc := newTestRegistry(t)
	cfg := DefaultConfig()
	cfg.MaxGhosts = maxTableGhosts + 1
	if _, err := NewTable(reg, cfg); !errors.Is(err, ErrConfig) {
		t.Fatalf("MaxGhosts %d: %v, want ErrConfig", cfg.MaxGhosts, err)
	}
	cfg.MaxGhosts = maxTableGhosts
	tab, err := NewTable(reg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	const n = maxTableGhosts
	view := make([]ViewEntry, n+1)
	for i := range view {
		view[i] = ViewEntry{Entity: uint64(i + 1), Class: nc, Priority: 1}
		view[i].State.Health = 100
		view[i].State.Name = MustName("wolf")
	}
	now := time.Second
	if err := tab.SetView(now, view); !errors.Is(err, ErrTooManyGhosts) {
		t.Fatalf("a view of %d entities: %v, want ErrTooManyGhosts", len(view), err)
	}
	view = view[:n]
	ids := make(map[uint64]uint32, n)
	for _, e := range view {
		id, ok := tab.GhostID(e.Entity)
		if !ok {
			t.Fatalf("entity %d has no ghost", e.Entity)
		}
		ids[e.Entity] = id
	}
	if id := ids[n]; id != n-1 || tab.IDWidth() != 16 {
		t.Fatalf("the last entity has id %d, width %d: the test lost its point", id, tab.IDWidth())
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
		for i, rc := range tab.order {
			if want := ids[view[i].Entity]; tab.idOf(uint32(rc)) != want || tab.entityOf(uint32(rc)) != view[i].Entity {
				t.Fatalf("%s: view entry %d (entity %d) hints record %d, its ghost is %d", order, i, view[i].Entity, rc, want)
			}
		}
		if err := checkInvariants(tab); err != nil {
			t.Fatalf("%s: %v", order, err)
		}
	}
}
