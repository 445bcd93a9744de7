package ghost

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ghostwire/ghostwire/replication/bitstream"
)

// checkChanged is check for a state whose changed fields (fieldDiff) are
// given, after a state check accepted: the same verdict and, when it
// accepts, the same position codes. Random states of the shipped classes
// and of a class with a group built by hand (no fields named: always
// checked), each field changed or not, to a good value or a bad one.
func TestCheckChangedIsCheck(t *testing.T) {
	names := bitstream.NewStringTable(4)
	reg, err := NewRegistry(DefaultBounds())
	if err != nil {
		t.Fatal(err)
	}
	handBuilt := Group{ // reads Health and Flags, names no field
		Name:    "hand",
		Encode:  func(*bitstream.Writer, *State) error { return nil },
		Decode:  func(*bitstream.Reader, *State) error { return nil },
		Changed: func(old, cur *State) bool { return old.Health != cur.Health },
		Check: func(s *State) error {
			if s.Health == 13 && s.Flags&1 != 0 {
				return fmt.Errorf("%w: unlucky", ErrBadState)
			}
			return nil
		},
	}
	hc := &Class{ID: 5, Name: "hand", Groups: []Group{PositionGroup(), handBuilt, HealthGroup(0, 100)}}
	classes := []*Class{PlayerClass(names), NPCClass(names), hc}
	if err := reg.Register(classes...); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(38, 2))
	good := func(s *State) {
		for a := range 3 {
			s.Pos[a] = (rng.Float64()*2 - 1) * 250
			s.Vel[a] = (rng.Float64()*2 - 1) * 40
		}
		s.Yaw = rng.Float64() * 7
		s.Health = int32(rng.IntN(101))
		s.Flags = uint32(rng.IntN(256))
		s.Extra[0] = rng.Uint32() >> 8
		s.Name = MustName([]string{"wolf", "guard", "a"}[rng.IntN(3)])
	}
	// change changes field f of s, to a value check may refuse.
	change := func(s *State, f int) {
		bad := rng.IntN(4) == 0
		switch f {
		case 0:
			s.Pos[rng.IntN(3)] += 0.5
			if bad {
				s.Pos[rng.IntN(3)] = 1e6
			}
		case 1:
			s.Yaw += 0.1
			if bad {
				s.Yaw = math.NaN()
			}
		case 2:
			s.Vel[rng.IntN(3)] += 1
			if bad {
				s.Vel[rng.IntN(3)] = math.NaN()
			}
		case 3:
			s.Health = int32(rng.IntN(101))
			if bad {
				s.Health = 100001 + int32(rng.IntN(100))
			} else if rng.IntN(3) == 0 {
				s.Health = 13 // the hand-built group's refusal, with an odd Flags
			}
		case 4:
			s.Name = MustName("goblin")
		case 5:
			s.Flags ^= 1 << rng.IntN(8)
			if bad {
				s.Flags |= 1 << 20
			}
		case 6:
			s.Extra[rng.IntN(4)]++
		}
	}
	refused, n := 0, 0
	for n < 20000 {
		c := classes[rng.IntN(len(classes))]
		var prev State
		good(&prev)
		var pq [3]uint32
		if reg.check(c, &prev, &pq) != nil {
			continue // checkChanged's premise: the previous state was accepted
		}
		cur := prev
		for f := range 7 {
			if rng.IntN(3) == 0 {
				change(&cur, f)
			}
		}
		diff := fieldDiff(&prev, &cur)
		var q, qc [3]uint32
		want := reg.check(c, &cur, &q)
		got := reg.checkChanged(c, &cur, &qc, &pq, diff, c.groupsOf(diff))
		if (got == nil) != (want == nil) || got != nil && !errors.Is(got, ErrBadState) {
			t.Fatalf("case %d (%s, diff %#x): checkChanged %v, check %v", n, c.Name, diff, got, want)
		}
		if want == nil && q != qc {
			t.Fatalf("case %d (%s, diff %#x): position codes %v, check's %v", n, c.Name, diff, qc, q)
		}
		if want != nil {
			refused++
		}
		n++
	}
	if refused < n/10 || refused > n*9/10 {
		t.Fatalf("%d of %d states refused: the cases do not test both verdicts", refused, n)
	}
}
