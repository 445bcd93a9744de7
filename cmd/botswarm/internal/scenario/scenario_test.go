package scenario

import (
	"math"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/zones/world"
)

const dt = time.Second / 30

// walk runs a mover for d of game time from start at 30 Hz with move.Walk,
// calling visit after every step.
func walk(m *Mover, start [2]float64, d time.Duration, visit func(now time.Duration, s move.ControlState, a Action)) move.ControlState {
	s := move.ControlState{Pos: [3]float32{float32(start[0]), 0, float32(start[1])}}
	for now := time.Duration(0); now < d; now += dt {
		a := m.Step(now, s.Pos)
		if a.Teleport {
			s.Pos = [3]float32{float32(a.To[0]), 0, float32(a.To[1])}
			s.Vel = [3]float32{}
		} else {
			mv := move.Move{Dt: 32, Forward: a.Forward, Strafe: a.Strafe, Yaw: a.Yaw}
			s = move.Walk(s, mv, mv.Seconds())
		}
		if visit != nil {
			visit(now, s, a)
		}
	}
	return s
}

func inside(w *world.World, s move.ControlState) bool {
	b := w.Bounds()
	x, z := float64(s.Pos[0]), float64(s.Pos[2])
	return x >= b.Min[0] && x <= b.Max[0] && z >= b.Min[1] && z <= b.Max[1]
}

func TestParseKind(t *testing.T) {
	for i, n := range kindNames {
		k, err := ParseKind(n)
		if err != nil || k != Kind(i) || k.String() != n {
			t.Errorf("ParseKind(%q) = %v, %v", n, k, err)
		}
	}
	if k, err := ParseKind("CROWD"); err != nil || k != Crowd {
		t.Errorf("case-insensitive: %v %v", k, err)
	}
	if _, err := ParseKind("stampede"); err == nil {
		t.Error("unknown scenario accepted")
	}
}

func TestWanderReachesWaypointsInsideTheWorld(t *testing.T) {
	w := world.Default()
	m := NewMover(Params{Kind: Wander, World: w, Seed: 1}, 0)
	var arrivals int
	var last [2]float64
	walk(m, [2]float64{0, 0}, 10*time.Minute, func(_ time.Duration, s move.ControlState, _ Action) {
		if !inside(w, s) {
			t.Fatalf("left the world at %v", s.Pos)
		}
		if tgt, ok := m.Target(); ok && tgt != last {
			arrivals++
			last = tgt
		}
	})
	// 10 min at 7 m/s is 4.2 km: a few waypoints ~1 km apart.
	if arrivals < 3 {
		t.Fatalf("only %d waypoints in 10 minutes", arrivals)
	}
}

func TestCrowdConverges(t *testing.T) {
	w := world.Default()
	pt := [2]float64{100, -200}
	for i := range 20 {
		m := NewMover(Params{Kind: Crowd, World: w, Seed: 7, CrowdPoint: &pt, CrowdRadius: 10}, i)
		start := [2]float64{-900 + float64(i)*90, 900}
		s := walk(m, start, 4*time.Minute, nil) // ≤ 1.6 km at 7 m/s: 230 s
		if d := math.Hypot(float64(s.Pos[0])-pt[0], float64(s.Pos[2])-pt[1]); d > 10+DefaultArrive+1 {
			t.Errorf("bot %d ended %.1f m from the crowd point", i, d)
		}
	}
}

func TestCrowdDefaultsToWorldCentre(t *testing.T) {
	m := NewMover(Params{Kind: Crowd, World: world.Default()}, 0)
	if c := m.crowdPoint(); c != [2]float64{0, 0} {
		t.Fatalf("crowd point %v", c)
	}
}

func TestBorderCrossesBackAndForth(t *testing.T) {
	w := world.Default()
	for i, start := range [][2]float64{{-60, -500}, {300, 40}, {-500, -930}} {
		m := NewMover(Params{Kind: Border, World: w, Seed: 3}, i)
		var crossings int
		prev, _ := w.ZoneAt(start[0], start[1])
		walk(m, start, 3*time.Minute, func(_ time.Duration, s move.ControlState, _ Action) {
			z, ok := w.ZoneAt(float64(s.Pos[0]), float64(s.Pos[2]))
			if !ok {
				t.Fatalf("left the world at %v", s.Pos)
			}
			if z.ID != prev.ID {
				crossings++
				prev = z
			}
		})
		// ≤ 500 m to the border (72 s), then a crossing every ~8 s.
		if crossings < 8 {
			t.Errorf("start %v: %d crossings in 3 minutes", start, crossings)
		}
	}
}

func TestNearestBorder(t *testing.T) {
	w := world.Default() // borders x = 0 and z = 0
	tests := []struct {
		name  string
		x, z  float64
		axis  int
		coord float64
	}{
		{"near x border", -10, -500, 0, 0},
		{"near z border", 400, 30, 1, 0},
		{"corner zone, nearer z", -900, -5, 1, 0},
		{"outside clamps", -5000, 700, 1, 0},
	}
	for _, tc := range tests {
		axis, coord, ok := NearestBorder(w, tc.x, tc.z)
		if !ok || axis != tc.axis || coord != tc.coord {
			t.Errorf("%s: got %d %v %v, want %d %v", tc.name, axis, coord, ok, tc.axis, tc.coord)
		}
	}
	one, err := world.Grid("one", 1, 1, 1000, [2]float64{0, 0})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := NearestBorder(one, 500, 500); ok {
		t.Error("a one-zone world has no border")
	}
}

func TestTeleportJumps(t *testing.T) {
	w := world.Default()
	m := NewMover(Params{Kind: Teleport, World: w, Seed: 9, TeleportEvery: 2 * time.Second}, 0)
	var jumps int
	walk(m, [2]float64{0, 0}, time.Minute, func(_ time.Duration, _ move.ControlState, a Action) {
		if a.Teleport {
			jumps++
			if b := w.Bounds(); a.To[0] < b.Min[0] || a.To[0] > b.Max[0] || a.To[1] < b.Min[1] || a.To[1] > b.Max[1] {
				t.Fatalf("teleport target %v outside the world", a.To)
			}
		}
	})
	// Mean 2 s, uniform in [1, 3) s: 20–60 jumps a minute.
	if jumps < 20 || jumps > 60 {
		t.Fatalf("%d jumps in a minute", jumps)
	}
}

func TestChurnLifetime(t *testing.T) {
	w := world.Default()
	m := NewMover(Params{Kind: Churn, World: w, Seed: 1, ChurnLife: 10 * time.Second, ChurnPause: time.Second}, 0)
	var sum time.Duration
	const n = 2000
	for range n {
		l := m.Lifetime()
		if l < time.Second || l > 50*time.Second {
			t.Fatalf("lifetime %v outside [1s, 50s]", l)
		}
		sum += l
		if p := m.Pause(); p < 0 || p > time.Second {
			t.Fatalf("pause %v", p)
		}
	}
	if mean := sum / n; mean < 8*time.Second || mean > 12*time.Second {
		t.Fatalf("mean lifetime %v, want ≈ 10s", mean)
	}
	if l := NewMover(Params{Kind: Wander, World: w}, 0).Lifetime(); l != 0 {
		t.Fatalf("wander lifetime %v, want forever", l)
	}
}

func TestDeterministic(t *testing.T) {
	w := world.Default()
	trace := func(seed uint64, bot int) []Action {
		m := NewMover(Params{Kind: Teleport, World: w, Seed: seed}, bot)
		var out []Action
		walk(m, [2]float64{10, 10}, 20*time.Second, func(_ time.Duration, _ move.ControlState, a Action) { out = append(out, a) })
		return out
	}
	a, b, c := trace(1, 0), trace(1, 0), trace(1, 1)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("step %d differs for the same seed and bot", i)
		}
	}
	same := true
	for i := range a {
		same = same && a[i] == c[i]
	}
	if same {
		t.Fatal("two bots made identical moves")
	}
}

func TestValidate(t *testing.T) {
	w := world.Default()
	out := [2]float64{5000, 0}
	for _, p := range []Params{{}, {World: w, Kind: 99}, {World: w, CrowdPoint: &out}, {World: w, Margin: 1500}} {
		if err := p.Validate(); err == nil {
			t.Errorf("Validate(%+v) passed", p)
		}
	}
	if err := (Params{World: w, Kind: Border}).Validate(); err != nil {
		t.Fatal(err)
	}
}
