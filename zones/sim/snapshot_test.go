package sim

import (
	"reflect"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/ghost"
	"github.com/ghostwire/ghostwire/replication/move"
)

// Views as references into the tick's snapshot resolve to exactly the
// entries AppendView copies while nothing is held, and to the same members
// with the near ones' states of the tick and the far ones' held states
// (at most the refresh interval old) once far members are held; the
// snapshot is built once per tick.
func TestViewRefsResolveToViewEntries(t *testing.T) {
	reg, err := ghost.NewRegistry(ghost.DefaultBounds())
	if err != nil {
		t.Fatal(err)
	}
	pc, nc := ghost.PlayerClass(nil), ghost.NPCClass(nil)
	if err := reg.Register(pc, nc); err != nil {
		t.Fatal(err)
	}
	z := oneZone(t, func(c *Config) {
		c.FarEvery = 1 // AppendView holds far members only under overload
		c.NPCs = 30
		c.Classes[KindPlayer], c.Classes[KindNPC] = pc, nc
	})
	for i := range 6 {
		z.Join(0, uint64(i+1), "c", "p", [3]float32{-500 + 15*float32(i), 0, -500}, 0)
	}
	now := time.Duration(0)
	compared, held := 0, 0
	for tick := range 24 {
		if tick == 12 {
			z.SetLevel(2) // far members get held states from here
		}
		now += 50 * time.Millisecond
		for i := range 6 {
			z.Input(now, uint64(i+1), []move.Move{fwd(uint64(tick+1), uint16(i*9000))})
		}
		out := z.Step(now)
		var snap *ghost.Snapshot
		for _, v := range out.Views {
			want := z.AppendView(nil, v)
			before := z.Stats().HeldEntries
			refs := z.AppendViewRefs(nil, v)
			held += int(z.Stats().HeldEntries - before)
			if snap == nil {
				snap = z.Snapshot()
			} else if z.Snapshot() != snap {
				t.Fatal("a second snapshot in one tick")
			}
			got := snap.AppendEntries(nil, refs)
			// A reference keeps the priority's bucket (what a ghost table
			// packs by), which resolves to the bucket's representative.
			// And an entry keeps the state as the tables send it (codes,
			// not floats): what a client decodes.
			for i := range want {
				want[i].Priority = ghost.NewViewRef(0, want[i].Class, want[i].Priority).Priority(want[i].Class)
				want[i].State = reg.WireState(want[i].Class, &want[i].State)
			}
			if tick < 12 {
				if len(got) != len(refs) || !reflect.DeepEqual(got, want) {
					t.Fatalf("tick %d player %d: refs resolve to %d entries, want %d (equal: %v)", tick, v.Entity, len(got), len(want), reflect.DeepEqual(got, want))
				}
			} else {
				if len(got) != len(want) {
					t.Fatalf("tick %d player %d: refs resolve to %d entries, want %d", tick, v.Entity, len(got), len(want))
				}
				for i := range got {
					g, w := got[i], want[i]
					if g.Entity != w.Entity || g.Class != w.Class || g.Priority != w.Priority {
						t.Fatalf("tick %d player %d entry %d: %+v, want entity %d", tick, v.Entity, i, g, w.Entity)
					}
					// A held state is one of the last 4 ticks' (level 2
					// at FarEvery 1): within 3 ticks at MaxSpeed of now.
					dx, dz := g.State.Pos[0]-w.State.Pos[0], g.State.Pos[2]-w.State.Pos[2]
					if r := 3 * float64(z.cfg.MaxSpeed) * 0.05 * 1.01; dx*dx+dz*dz > r*r {
						t.Fatalf("tick %d player %d entity %d: state %v, the tick's %v", tick, v.Entity, g.Entity, g.State.Pos, w.State.Pos)
					}
				}
			}
			compared += len(got)
		}
	}
	if compared < 100 || held == 0 {
		t.Fatalf("compared %d entries, %d held: the test did not exercise the views", compared, held)
	}
}
