package interest

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ghostwire/ghostwire/replication/ghost"
	"github.com/ghostwire/ghostwire/zones/grid"
	"github.com/ghostwire/ghostwire/zones/world"
)

// scene is a small world of slots for tests.
type scene struct {
	g      *grid.Grid
	id     []uint64
	kind   []uint8
	gen    []uint8
	always []int32
	x      []float32
	z      []float32
}

func newScene(t testing.TB, n int, half float64) *scene {
	t.Helper()
	g, err := grid.New(grid.Config{Bounds: world.Rect{Min: [2]float64{-half, -half}, Max: [2]float64{half, half}}, CellSize: 25})
	if err != nil {
		t.Fatal(err)
	}
	g.Resize(n)
	s := &scene{g: g, x: make([]float32, n), z: make([]float32, n)}
	s.id = make([]uint64, n)
	s.kind = make([]uint8, n)
	s.gen = make([]uint8, n)
	return s
}

func (s *scene) put(slot int, id uint64, x, z float32) {
	if s.id[slot] != id {
		s.gen[slot]++ // a new entity in this slot
	}
	s.id[slot], s.x[slot], s.z[slot] = id, x, z
	s.g.Set(int32(slot), x, z, Aux(s.kind[slot], s.gen[slot], 0))
}

func (s *scene) remove(slot int) {
	s.id[slot] = 0
	s.g.Clear(int32(slot))
}

func (sc *scene) ids(set *Set) []uint64 {
	var out []uint64
	for _, e := range set.Entries() {
		out = append(out, sc.id[e.Slot()])
	}
	slices.Sort(out)
	return out
}

func mustTracker(t testing.TB, cfg Config) *Tracker {
	t.Helper()
	tr, err := NewTracker(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestEnterLeaveHysteresis(t *testing.T) {
	sc := newScene(t, 2, 500)
	tr := mustTracker(t, Config{EnterRadius: 100, LeaveRadius: 120})
	tr.Resize(2)
	var set Set
	sc.put(0, 1, 0, 0) // the player
	steps := []struct {
		name   string
		x      float32
		member bool
	}{
		{"far away", 200, false},
		{"in the band, never was a member", 110, false},
		{"just inside enter", 99, true},
		{"back in the band: sticky", 115, true},
		{"exactly at leave is still in", 120, true},
		{"beyond leave: out", 121, false},
		{"band again: stays out", 105, false},
		{"exactly at enter: in", 100, true},
	}
	for _, st := range steps {
		sc.put(1, 42, st.x, 0)
		sc.g.Build()
		tr.Update(&set, 0, 0, 0, sc.g, sc.always)
		if got := slices.Contains(sc.ids(&set), 42); got != st.member {
			t.Fatalf("%s (x=%g): member=%v, want %v", st.name, st.x, got, st.member)
		}
	}
	if st := tr.Stats(); st.Enters != 2 || st.Leaves != 1 {
		t.Fatalf("stats %+v, want 2 enters 1 leave", st)
	}
}

// TestHysteresisProperty checks the tracker against the set definition
// set' = {d ≤ enter} ∪ {set ∩ d ≤ leave} ∪ always, minus self, over random
// walks with entities despawning and slots being reused by new ids.
func TestHysteresisProperty(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 7))
		const n = 60
		sc := newScene(t, n, 300)
		tr := mustTracker(t, Config{EnterRadius: 40, LeaveRadius: 40 + float32(rng.IntN(30)), MaxView: 1000})
		tr.Resize(n)
		nextID := uint64(1)
		for s := range n {
			sc.put(s, nextID, float32(rng.Float64()*200-100), float32(rng.Float64()*200-100))
			nextID++
		}
		sc.always = []int32{int32(n - 1), int32(n - 2)}
		var set Set
		model := map[uint64]bool{}
		self := int32(0)
		enter2 := tr.cfg.EnterRadius * tr.cfg.EnterRadius
		leave2 := tr.cfg.LeaveRadius * tr.cfg.LeaveRadius
		for tick := range 300 {
			for s := range n {
				switch r := rng.IntN(100); {
				case r < 2 && s != int(self): // despawn and maybe reuse the slot at once
					sc.remove(s)
					if rng.IntN(2) == 0 {
						sc.put(s, nextID, float32(rng.Float64()*200-100), float32(rng.Float64()*200-100))
						nextID++
					}
				case sc.id[s] == 0 && r < 10:
					sc.put(s, nextID, float32(rng.Float64()*200-100), float32(rng.Float64()*200-100))
					nextID++
				case sc.id[s] != 0:
					sc.put(s, sc.id[s], sc.x[s]+float32(rng.NormFloat64()*4), sc.z[s]+float32(rng.NormFloat64()*4))
				}
			}
			sc.g.Build()
			px, pz := sc.x[self], sc.z[self]
			want := map[uint64]bool{}
			for s := range n {
				id := sc.id[s]
				if id == 0 || int32(s) == self {
					continue
				}
				dx, dz := sc.x[s]-px, sc.z[s]-pz
				d2 := dx*dx + dz*dz
				if d2 <= enter2 || model[id] && d2 <= leave2 || slices.Contains(sc.always, int32(s)) {
					want[id] = true
				}
			}
			entered, left := tr.Update(&set, self, px, pz, sc.g, sc.always)
			got := sc.ids(&set)
			var wantIDs []uint64
			wEnter, wLeave := 0, 0
			for id := range want {
				wantIDs = append(wantIDs, id)
				if !model[id] {
					wEnter++
				}
			}
			for id := range model {
				if !want[id] {
					wLeave++
				}
			}
			slices.Sort(wantIDs)
			if !slices.Equal(got, wantIDs) {
				t.Fatalf("seed %d tick %d: set %v, want %v", seed, tick, got, wantIDs)
			}
			if entered != wEnter || left != wLeave {
				t.Fatalf("seed %d tick %d: entered/left %d/%d, want %d/%d", seed, tick, entered, left, wEnter, wLeave)
			}
			model = want
		}
	}
}

// An entity pacing across the enter radius but inside the leave radius
// enters once and never leaves; without hysteresis it would flicker every
// step.
func TestNoFlickerAtTheEdge(t *testing.T) {
	sc := newScene(t, 2, 500)
	tr := mustTracker(t, Config{EnterRadius: 100, LeaveRadius: 110})
	tr.Resize(2)
	sc.put(0, 1, 0, 0)
	var set Set
	for i := range 200 {
		x := float32(97)
		if i%2 == 1 {
			x = 106
		}
		sc.put(1, 2, x, 0)
		sc.g.Build()
		tr.Update(&set, 0, 0, 0, sc.g, sc.always)
	}
	if st := tr.Stats(); st.Enters != 1 || st.Leaves != 0 {
		t.Fatalf("pacing at the edge: %+v, want 1 enter and no leave", st)
	}
}

func TestPriority(t *testing.T) {
	var w [MaxKinds]float32
	w[1] = 2
	tr := mustTracker(t, Config{EnterRadius: 100, LeaveRadius: 100, FarPriority: 0.1, KindWeight: w, StaleTicks: 10})
	if p := tr.Priority(0, 0, 0); p != 1 {
		t.Errorf("at distance 0: %g, want 1", p)
	}
	if p := tr.Priority(0, 100*100, 0); math.Abs(float64(p)-0.1) > 1e-6 {
		t.Errorf("at the leave radius: %g, want 0.1", p)
	}
	if p := tr.Priority(0, 1e9, 0); math.Abs(float64(p)-0.1) > 1e-6 {
		t.Errorf("beyond the leave radius: %g, want the floor 0.1", p)
	}
	if a, b := tr.Priority(0, 30*30, 0), tr.Priority(0, 60*60, 0); !(a > b) {
		t.Errorf("nearer must rank higher: %g vs %g", a, b)
	}
	if a, b := tr.Priority(1, 50*50, 0), tr.Priority(0, 50*50, 0); a != 2*b {
		t.Errorf("kind weight 2: %g vs %g", a, b)
	}
	if a, b := tr.Priority(0, 50*50, 10), tr.Priority(0, 50*50, 0); a != 2*b {
		t.Errorf("stale by StaleTicks doubles: %g vs %g", a, b)
	}
	if p := tr.Priority(200, 0, 0); p != 1 {
		t.Errorf("unknown kind weighs 1: %g", p)
	}
}

func TestSelfAndEmptySlotsExcluded(t *testing.T) {
	sc := newScene(t, 3, 500)
	tr := mustTracker(t, Config{})
	tr.Resize(3)
	sc.put(0, 10, 0, 0)
	sc.put(1, 11, 5, 0)
	sc.put(2, 12, 6, 0)
	sc.remove(2)
	sc.g.Build()
	var set Set
	tr.Update(&set, 0, 0, 0, sc.g, sc.always)
	if got := sc.ids(&set); !slices.Equal(got, []uint64{11}) {
		t.Fatalf("set %v, want only 11", got)
	}
}

func TestMaxViewKeepsHighestPriorities(t *testing.T) {
	const n = 101
	sc := newScene(t, n, 500)
	tr := mustTracker(t, Config{MaxView: 10})
	tr.Resize(n)
	sc.put(0, 1000, 0, 0)
	for s := 1; s < n; s++ {
		sc.put(s, uint64(s), float32(s), 0) // id s at distance s
	}
	sc.g.Build()
	var set Set
	tr.Update(&set, 0, 0, 0, sc.g, sc.always)
	want := []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	if got := sc.ids(&set); !slices.Equal(got, want) {
		t.Fatalf("capped set %v, want the 10 nearest %v", got, want)
	}
	if tr.Stats().Capped != 90 {
		t.Fatalf("Capped = %d", tr.Stats().Capped)
	}
	// Capped again with the 10 nearest moved off (ids 1–5 out, 11–15 in):
	// five members kept, five entered, five left. The count of members
	// kept is redone over the capped set, by each entry's mark.
	for s := 1; s <= 5; s++ {
		sc.put(s, uint64(s), float32(s)+400, 0)
	}
	sc.g.Build()
	entered, left := tr.Update(&set, 0, 0, 0, sc.g, sc.always)
	if got, want := sc.ids(&set), []uint64{6, 7, 8, 9, 10, 11, 12, 13, 14, 15}; !slices.Equal(got, want) {
		t.Fatalf("capped set %v, want %v", got, want)
	}
	if entered != 5 || left != 5 {
		t.Fatalf("entered %d, left %d; want 5, 5", entered, left)
	}
}

func TestKeepTopRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	bySlot := func(a, b ranked) int { return int(a.e.Slot() - b.e.Slot()) }
	for range 200 {
		n := 1 + rng.IntN(60)
		k := 1 + rng.IntN(n)
		e := make([]ranked, n)
		for i := range e {
			e[i] = ranked{e: Entry{key: uint32(i) << 8}, p: float32(rng.IntN(8))} // many ties
		}
		ref := slices.Clone(e)
		slices.SortFunc(ref, func(a, b ranked) int {
			if a.p != b.p {
				if a.p > b.p {
					return -1
				}
				return 1
			}
			return bySlot(a, b)
		})
		keepTop(e, k)
		got := slices.Clone(e[:k])
		slices.SortFunc(got, bySlot)
		want := slices.Clone(ref[:k])
		slices.SortFunc(want, bySlot)
		if !slices.Equal(got, want) {
			t.Fatalf("keepTop(n=%d,k=%d): %v, want %v", n, k, got, want)
		}
	}
}

func TestSeedKeepsBandMembers(t *testing.T) {
	sc := newScene(t, 3, 500)
	tr := mustTracker(t, Config{EnterRadius: 100, LeaveRadius: 120})
	tr.Resize(3)
	sc.put(0, 1, 0, 0)
	sc.put(1, 7, 110, 0) // in the band
	sc.put(2, 8, 115, 0) // in the band, not handed over
	sc.g.Build()
	var set Set
	set.Seed(sc.g, []int32{1})
	tr.Update(&set, 0, 0, 0, sc.g, sc.always)
	if got := sc.ids(&set); !slices.Equal(got, []uint64{7}) {
		t.Fatalf("seeded set %v, want [7]", got)
	}
}

func TestAppendView(t *testing.T) {
	sc := newScene(t, 3, 500)
	tr := mustTracker(t, Config{})
	tr.Resize(3)
	sc.kind[2] = 3 // no class for kind 3: skipped
	sc.put(0, 1, 0, 0)
	sc.put(1, 2, 10, 0)
	sc.put(2, 3, 20, 0)
	sc.g.Build()
	var set Set
	tr.Update(&set, 0, 0, 0, sc.g, sc.always)
	states := make([]ghost.State, 3)
	states[1].Health = 77
	var classes [MaxKinds]*ghost.Class
	classes[0] = ghost.NPCClass(nil)
	view := tr.AppendView(nil, &set, sc.id, sc.kind, states, &classes)
	if len(view) != 1 || view[0].Entity != 2 || view[0].State.Health != 77 || view[0].Class != classes[0] || !(view[0].Priority > 0.9) {
		t.Fatalf("view %+v", view)
	}
}

func TestConfigValidate(t *testing.T) {
	bad := []Config{
		{EnterRadius: -1},
		{EnterRadius: 100, LeaveRadius: 50},
		{FarPriority: 2},
		{MaxView: -3},
		{EnterRadius: float32(math.Inf(1))},
	}
	for _, c := range bad {
		if _, err := NewTracker(c); !errors.Is(err, ErrConfig) {
			t.Errorf("NewTracker(%+v) = %v, want ErrConfig", c, err)
		}
	}
	tr := mustTracker(t, Config{EnterRadius: 200})
	if c := tr.Config(); c.LeaveRadius != 220 {
		t.Errorf("default leave radius for enter 200: %g, want 220", c.LeaveRadius)
	}
}

// TestUpdateMatchesReference checks Update against a naive reference for
// many players sharing one tracker and grid, as a zone uses them: every
// set must hold exactly {d ≤ enter} ∪ {previous set ∩ d ≤ leave} minus
// self, each member with Tracker.Priority of its kind, distance and
// staleness as of the last Build, over random walks with kinds of
// different weights, states going stale and fresh, despawns and slot
// reuse. The scan reads per-Build tables; this also pins that they follow
// every Build. Every priority lies in PriorityRange of its member's kind.
func TestUpdateMatchesReference(t *testing.T) {
	var w [MaxKinds]float32
	w[0], w[1], w[2] = 3, 1, 0.5
	for seed := range uint64(6) {
		rng := rand.New(rand.NewPCG(seed, 11))
		const n, players = 400, 12
		sc := newScene(t, n, 250)
		stale := make([]uint16, n)
		tr := mustTracker(t, Config{EnterRadius: 50, LeaveRadius: 50 + float32(1+rng.IntN(20)), KindWeight: w, StaleTicks: 5, MaxView: 1 << 20})
		tr.Resize(n)
		nextID := uint64(1)
		spawn := func(s int) {
			sc.kind[s] = uint8(rng.IntN(4)) // kind 3 has the default weight
			stale[s] = 0                    // put files a fresh state
			sc.put(s, nextID, float32(rng.Float64()*400-200), float32(rng.Float64()*400-200))
			nextID++
		}
		for s := range n {
			spawn(s)
		}
		sets := make([]Set, players)
		models := make([]map[uint64]bool, players)
		for p := range models {
			models[p] = map[uint64]bool{}
		}
		enter2, leave2 := tr.enter2, tr.leave2
		for tick := range 120 {
			for s := range n {
				switch r := rng.IntN(100); {
				case r < 2 && s >= players: // despawn and maybe reuse the slot at once
					sc.remove(s)
					if rng.IntN(2) == 0 {
						spawn(s)
					}
				case sc.id[s] == 0 && r < 10:
					spawn(s)
				case sc.id[s] != 0:
					sc.x[s] += float32(rng.NormFloat64() * 3)
					sc.z[s] += float32(rng.NormFloat64() * 3)
					stale[s] = uint16(rng.IntN(12))
					sc.g.Set(int32(s), sc.x[s], sc.z[s], Aux(sc.kind[s], sc.gen[s], stale[s]))
				}
			}
			sc.g.Build()
			for p := range players {
				self := int32(p)
				px, pz := sc.x[p], sc.z[p]
				want := map[uint64]float32{}
				for s := range n {
					if sc.id[s] == 0 || int32(s) == self {
						continue
					}
					dx, dz := sc.x[s]-px, sc.z[s]-pz
					d2 := dx*dx + dz*dz
					if d2 <= enter2 || models[p][sc.id[s]] && d2 <= leave2 {
						want[sc.id[s]] = tr.Priority(sc.kind[s], d2, stale[s])
					}
				}
				entered, left := tr.Update(&sets[p], self, px, pz, sc.g, nil)
				got := map[uint64]float32{}
				prios := tr.AppendPriorities(nil, &sets[p])
				for i, e := range sets[p].Entries() {
					got[sc.id[e.Slot()]] = prios[i]
					if lo, hi := tr.PriorityRange(sc.kind[e.Slot()]); !(prios[i] >= lo && prios[i] <= hi) {
						t.Fatalf("seed %d tick %d player %d: priority %g of kind %d outside PriorityRange [%g, %g]", seed, tick, p, prios[i], sc.kind[e.Slot()], lo, hi)
					}
				}
				if len(got) != len(want) || len(got) != sets[p].Len() {
					t.Fatalf("seed %d tick %d player %d: %d members (%d distinct), want %d", seed, tick, p, sets[p].Len(), len(got), len(want))
				}
				wEnter := 0
				for id, wp := range want {
					gp, ok := got[id]
					if !ok {
						t.Fatalf("seed %d tick %d player %d: entity %d missing", seed, tick, p, id)
					}
					if math.Abs(float64(gp-wp)) > 1e-6*float64(wp) {
						t.Fatalf("seed %d tick %d player %d: entity %d priority %g, want %g", seed, tick, p, id, gp, wp)
					}
					if !models[p][id] {
						wEnter++
					}
				}
				if wLeave := len(models[p]) + wEnter - len(want); entered != wEnter || left != wLeave {
					t.Fatalf("seed %d tick %d player %d: entered/left %d/%d, want %d/%d", seed, tick, p, entered, left, wEnter, wLeave)
				}
				models[p] = map[uint64]bool{}
				for id := range want {
					models[p][id] = true
				}
			}
		}
	}
}

// A set keeps no priorities between ticks: AppendPriorities recomputes
// them from the tracker's table, and a set the zone does not update this
// tick (a player skipped under overload, or frozen) is held first, so its
// view keeps its last Update's priorities after the next Build. An
// always-relevant member beyond the scan keeps the priority the Update
// gave it (Config.AlwaysPriority), held or not.
func TestHoldKeepsPriorities(t *testing.T) {
	sc := newScene(t, 4, 500)
	tr := mustTracker(t, Config{EnterRadius: 100, LeaveRadius: 110, AlwaysPriority: 0.3})
	tr.Resize(4)
	sc.put(0, 1, 0, 0)                         // the player
	sc.put(1, 2, 50, 0)                        // in view
	sc.put(2, 3, 300, 0)                       // always relevant, far
	sc.put(3, 4, 200, 50)                      // another player
	sc.g.Set(2, 300, 0, Aux(0, sc.gen[2], 10)) // its state 10 ticks old
	sc.always = []int32{2}
	sc.g.Build()
	ap := float32(0.3) * (1 + 10*(1/float32(20)))
	var set, other Set
	tr.Update(&set, 0, 0, 0, sc.g, sc.always)
	want := tr.AppendPriorities(nil, &set)
	if len(want) != 2 || want[0] != tr.Priority(0, 50*50, 0) || want[1] != ap {
		t.Fatalf("priorities %v of %v, want [%g %g]", want, sc.ids(&set), tr.Priority(0, 50*50, 0), ap)
	}
	tr.Hold(&set)
	sc.put(1, 2, 20, 0) // moves: the next Build's table has it nearer
	sc.g.Build()
	tr.Update(&other, 3, 200, 50, sc.g, sc.always)
	if got := tr.AppendPriorities(nil, &set); !slices.Equal(got, want) {
		t.Fatalf("held set's priorities %v after the next Build, want its last Update's %v", got, want)
	}
	if got := sc.ids(&set); !slices.Equal(got, []uint64{2, 3}) {
		t.Fatalf("held set %v, want [2 3]", got)
	}
	tr.Update(&set, 0, 0, 0, sc.g, sc.always)
	if got := tr.AppendPriorities(nil, &set); got[0] != tr.Priority(0, 20*20, 0) || got[1] != ap {
		t.Fatalf("priorities %v after the set's next Update, want [%g %g]", got, tr.Priority(0, 20*20, 0), ap)
	}
}

// TestViewerDistancesAreTheGrids checks what a zone relies on to reuse a
// priority's distance (Viewer.PriorityDist2) for its own distance test:
// Current holds from an Update until the grid's next Build, and then each
// member's distance is (its position in the grid − the viewer's At)², with
// its priority Priority's.
func TestViewerDistancesAreTheGrids(t *testing.T) {
	sc := newScene(t, 4, 500)
	tr := mustTracker(t, Config{EnterRadius: 100, LeaveRadius: 110})
	tr.Resize(4)
	sc.put(0, 1, 10, -5) // the player
	sc.put(1, 2, 50, 30)
	sc.put(2, 3, -70, 20)
	sc.put(3, 4, 400, 0) // out of view
	sc.g.Build()
	if tr.Current(sc.g) {
		t.Fatal("Current before any Update")
	}
	var set Set
	tr.Update(&set, 0, 10, -5, sc.g, nil)
	if !tr.Current(sc.g) {
		t.Fatal("not Current after an Update of the grid's last Build")
	}
	v, ok := tr.Viewer(&set)
	if !ok {
		t.Fatal("no Viewer after an Update")
	}
	if x, z := v.At(); x != 10 || z != -5 {
		t.Fatalf("At %g, %g, want the Update's 10, -5", x, z)
	}
	want := tr.AppendPriorities(nil, &set)
	for i, e := range set.Entries() {
		p, d2 := v.PriorityDist2(e)
		dx, dz := sc.x[e.Slot()]-10, sc.z[e.Slot()]+5
		if d2 != dx*dx+dz*dz || p != want[i] || p != v.Priority(e) {
			t.Errorf("member %d: priority %g at d² %g, want %g at %g", sc.id[e.Slot()], p, d2, want[i], dx*dx+dz*dz)
		}
	}
	if len(want) != 2 {
		t.Fatalf("%d members, want 2", len(want))
	}
	sc.put(1, 2, 60, 30)
	sc.g.Build()
	if tr.Current(sc.g) {
		t.Fatal("Current after the grid's next Build: its positions are the previous Build's")
	}
	other, _ := grid.New(grid.Config{Bounds: world.Rect{Min: [2]float64{-500, -500}, Max: [2]float64{500, 500}}, CellSize: 25})
	if tr.Current(other) {
		t.Fatal("Current for another grid")
	}
}

// TestBucketRefs holds Viewer.BucketRefs to what it stands for: each
// member's slot, offset when its PriorityDist2 distance is beyond far2,
// ORed with the bucket of its priority × its kind's weight (kind k
// weighing w[k % MaxKinds]).
func TestBucketRefs(t *testing.T) {
	sc := newScene(t, 6, 500)
	tr := mustTracker(t, Config{EnterRadius: 100, LeaveRadius: 110})
	tr.Resize(6)
	for s, k := range []uint8{0, 1, 2, 1, 9} {
		sc.kind[s+1] = k
	}
	sc.put(0, 1, 10, -5) // the player
	sc.put(1, 2, 50, 30)
	sc.put(2, 3, -70, 20)
	sc.put(3, 4, 30, -60)
	sc.put(4, 5, 12, -4)
	sc.put(5, 6, -20, 25)
	sc.g.Build()
	w := [MaxKinds]float32{1, 2, 0.75, 1, 1, 1, 1, 3}
	var buckets [1 << 11]ghost.ViewRef
	for i := range buckets {
		buckets[i] = ghost.ViewRef(i) << 21
	}
	var set Set
	tr.Update(&set, 0, 10, -5, sc.g, nil)
	v, ok := tr.Viewer(&set)
	if !ok {
		t.Fatal("no Viewer after an Update")
	}
	const far2, off = 45 * 45, 1000
	es := set.Entries()
	if len(es) != 5 {
		t.Fatalf("%d members, want 5", len(es))
	}
	out := make([]ghost.ViewRef, len(es))
	sum := v.BucketRefs(out, es, sc.kind, &w, &buckets, far2, off)
	var wantSum uint64
	for i, e := range es {
		p, d2 := v.PriorityDist2(e)
		idx := uint32(e.Slot())
		if d2 > far2 {
			idx += off
			wantSum += off
		}
		want := buckets[math.Float32bits(p*w[sc.kind[e.Slot()]%MaxKinds])>>21] | ghost.ViewRef(idx)
		if out[i] != want {
			t.Errorf("member %d (kind %d, d² %g): ref %#x, want %#x", sc.id[e.Slot()], sc.kind[e.Slot()], d2, out[i], want)
		}
	}
	if sum != wantSum || sum == 0 || sum == off*uint64(len(es)) {
		t.Errorf("offsets summed %d, want %d (some members far, some near)", sum, wantSum)
	}
}
