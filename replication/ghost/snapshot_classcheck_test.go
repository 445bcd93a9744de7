package ghost

import "testing"

// Seal accepts an entry's class by Registry.has: a class first registered
// in the writer's registry by its own word (Class.reg), one registered
// there after another registry by the registry's map, and refuses a class
// of another registry only, whatever the entries around it.
func TestSealChecksTheClassRegistry(t *testing.T) {
	reg, pc, nc := newTestRegistry(t)
	other, err := NewRegistry(DefaultBounds())
	if err != nil {
		t.Fatal(err)
	}
	foreign := &Class{ID: 9, Name: "foreign", Groups: []Group{PositionGroup(), HealthGroup(0, 1000)}}
	shared := &Class{ID: 7, Name: "shared", Groups: []Group{PositionGroup(), HealthGroup(0, 1000)}}
	if err := other.Register(foreign, shared); err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(shared); err != nil {
		t.Fatal(err)
	}
	if shared.reg != other || foreign.reg != other || pc.reg != reg {
		t.Fatal("the classes' first registries are not as the test needs")
	}
	sw := writerFor(t, reg)
	classes := []*Class{pc, foreign, nc, shared, shared, foreign, foreign, pc}
	st := State{Pos: [3]float64{1, 0, 2}, Health: 10, Name: MustName("wolf")}
	for tick := range 3 { // a new snapshot, then the previous entries' paths
		s := sw.Next(len(classes))
		for i, c := range classes {
			s.Set(i, uint64(i+1), c, &st)
		}
		sw.Seal(s)
		if s.valid {
			t.Fatalf("tick %d: a snapshot with classes of another registry is valid", tick)
		}
		for i, c := range classes {
			refused := s.vw[i].bad == snapBadClass
			if want := c == foreign; refused != want {
				t.Errorf("tick %d: entry %d (%s) refused %v, want %v", tick, i, c.Name, refused, want)
			}
		}
	}
}
