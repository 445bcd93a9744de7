package ghost

import (
	"math"
	"testing"
	"time"
)

func TestInterpolatorSample(t *testing.T) {
	ms := time.Millisecond
	g := &Ghost{}
	q := newQuant(Bounds{Min: [3]float64{-100, -100, -100}, Max: [3]float64{100, 100, 100}, Precision: 0.5})
	g.hist.reset(&q)
	for _, s := range []struct {
		ms  int64
		pos [3]float64
		yaw float64
	}{
		{1000, [3]float64{0, 0, 0}, 3.0},
		{1100, [3]float64{10, 0, 0}, -3.0}, // crosses ±π the short way
		{1200, [3]float64{20, 10, 0}, -3.0},
	} {
		g.hist.insert(snapshot{ms: s.ms, q: q.code(&s.pos), yaw: s.yaw})
	}
	ip := Interpolator{Delay: 100 * ms, MaxExtrapolation: 250 * ms}
	for _, tc := range []struct {
		name string
		at   time.Duration
		pos  [3]float64
		yaw  float64
		mode SampleMode
	}{
		{"before the oldest", 900 * ms, [3]float64{0, 0, 0}, 3.0, Held},
		{"between", 1050 * ms, [3]float64{5, 0, 0}, math.Pi, Interpolated},
		{"on a snapshot", 1100 * ms, [3]float64{10, 0, 0}, -3.0, Interpolated},
		{"second segment", 1150 * ms, [3]float64{15, 5, 0}, -3.0, Interpolated},
		{"newest", 1200 * ms, [3]float64{20, 10, 0}, -3.0, Held},
		{"extrapolated", 1300 * ms, [3]float64{30, 20, 0}, -3.0, Extrapolated},
		{"extrapolation capped", 2000 * ms, [3]float64{45, 35, 0}, -3.0, Held},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, mode := ip.Sample(g, tc.at)
			for a := range 3 {
				if math.Abs(p.Pos[a]-tc.pos[a]) > 1e-9 {
					t.Fatalf("pos %v, want %v", p.Pos, tc.pos)
				}
			}
			if d := math.Abs(math.Remainder(p.Yaw-tc.yaw, 2*math.Pi)); d > 1e-9 {
				t.Fatalf("yaw %v, want %v", p.Yaw, tc.yaw)
			}
			if mode != tc.mode {
				t.Fatalf("mode %v, want %v", mode, tc.mode)
			}
		})
	}
	var empty Ghost
	empty.State.Pos = [3]float64{1, 2, 3}
	if p, mode := ip.Sample(&empty, time.Second); p.Pos != empty.State.Pos || mode != Held {
		t.Fatalf("no history: %v %v", p, mode)
	}
}

// End to end: an entity walking a straight line, stopping, then walking
// again, rendered at RenderTime on the client, stays within a few
// centimetres of where it really was at that time — no creeping before the
// start, no overshoot after the stop (rest markers).
func TestInterpolationFollowsMotionAndStops(t *testing.T) {
	reg, _, nc := newTestRegistry(t)
	net := newFakeNet(3, 0.1, 40*time.Millisecond, 20*time.Millisecond)
	g := newRig(t, reg, DefaultConfig(), net, MaxPacketBytes)
	e := ViewEntry{Entity: 1, Class: nc, Priority: 1}
	const tick = 50 * time.Millisecond
	truth := map[time.Duration][3]float64{}
	pos := func(at time.Duration) [3]float64 {
		s := at.Seconds()
		switch {
		case s < 2:
			return [3]float64{0, 0, 0}
		case s < 4: // 5 m/s along x
			return [3]float64{5 * (s - 2), 0, 0}
		case s < 6:
			return [3]float64{10, 0, 0}
		default: // 3 m/s along y
			return [3]float64{10, 3 * (s - 6), 0}
		}
	}
	near := func(rt time.Duration, d time.Duration, edges ...time.Duration) bool {
		for _, e := range edges {
			if rt > e-d && rt < e+d {
				return true
			}
		}
		return false
	}
	var moving, resting, transition float64
	samples := 0
	for now := tick; now <= 9*time.Second; now += 5 * time.Millisecond {
		if now%tick == 0 {
			e.State.Pos = pos(now)
			truth[now] = e.State.Pos
			g.tick(now, []ViewEntry{e})
		} else {
			g.pump(now)
		}
		if now < time.Second || now%(10*time.Millisecond) != 0 {
			continue
		}
		gh, ok := g.mir.ByEntity(1)
		if !ok {
			continue
		}
		rt := g.mir.RenderTime(now)
		p, _ := g.mir.Pose(gh, now)
		want := pos(rt)
		if rt%tick != 0 { // the server's truth is per tick: interpolate it
			a, b := rt/tick*tick, rt/tick*tick+tick
			f := float64(rt-a) / float64(tick)
			pa, pb := pos(a), pos(b)
			for i := range 3 {
				want[i] = pa[i] + (pb[i]-pa[i])*f
			}
		}
		d := math.Hypot(p.Pos[0]-want[0], p.Pos[1]-want[1])
		samples++
		s := rt.Seconds()
		switch {
		case near(rt, 500*time.Millisecond, 2*time.Second, 4*time.Second, 6*time.Second):
			transition = max(transition, d)
		case s < 2 || (s >= 4 && s < 6):
			resting = max(resting, d)
		default:
			moving = max(moving, d)
		}
	}
	if samples < 500 {
		t.Fatalf("only %d samples", samples)
	}
	t.Logf("worst error: moving %.2f cm, resting %.2f cm, within 0.5 s of a start or stop %.2f cm (10%% loss)",
		moving*100, resting*100, transition*100)
	switch {
	case moving > 0.02:
		t.Fatalf("walking a straight line, the rendered position is off by %.1f cm", moving*100)
	case resting > 0.01:
		t.Fatalf("at rest, the rendered position is off by %.1f cm (creeping or overshoot)", resting*100)
	case transition > 5*DefaultMaxExtrapolation.Seconds(): // ≤ speed × MaxExtrapolation
		t.Fatalf("around a start or stop, off by %.1f cm", transition*100)
	}
}
