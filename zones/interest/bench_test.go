package interest

import (
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/zones/grid"
	"github.com/ghostwire/ghostwire/zones/world"
)

// crowd is the BenchmarkInterest scene: players and NPCs wandering in a
// square world at walking/running speeds.
type crowd struct {
	g        *grid.Grid
	tr       *Tracker
	aux      []uint32
	x, z     []float32
	vx, vz   []float32
	sets     []Set
	players  int
	half, dt float32
}

func newCrowd(tb testing.TB, players, npcs int, side, cell float64, cfg Config) *crowd {
	n := players + npcs
	half := side / 2
	g, err := grid.New(grid.Config{Bounds: world.Rect{Min: [2]float64{-half, -half}, Max: [2]float64{half, half}}, CellSize: cell})
	if err != nil {
		tb.Fatal(err)
	}
	g.Resize(n)
	tr, err := NewTracker(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tr.Resize(n)
	c := &crowd{
		g: g, tr: tr, players: players, half: float32(half), dt: 0.05,
		x: make([]float32, n), z: make([]float32, n), vx: make([]float32, n), vz: make([]float32, n),
		sets: make([]Set, players),
	}
	c.aux = make([]uint32, n)
	rng := rand.New(rand.NewPCG(1, 1))
	for i := range n {
		if i >= players {
			c.aux[i] = Aux(1, 0, 0)
		}
		c.x[i] = float32((rng.Float64()*2 - 1) * half)
		c.z[i] = float32((rng.Float64()*2 - 1) * half)
		speed := 1 + 6*rng.Float64()
		a := rng.Float64() * 6.283185307179586
		c.vx[i], c.vz[i] = float32(speed*cos(a)), float32(speed*sin(a))
	}
	return c
}

func cos(a float64) float64 { return sin(a + 1.5707963267948966) }
func sin(a float64) float64 { // good enough for velocities; avoids importing math just here
	for a > 3.141592653589793 {
		a -= 6.283185307179586
	}
	x, t, s := a, a, a
	for i := 1; i < 10; i++ {
		t *= -x * x / float64((2*i)*(2*i+1))
		s += t
	}
	return s
}

// tick moves everyone, rebuilds the grid and updates every player's set:
// one zone tick's spatial update + interest + priorities.
func (c *crowd) tick() (members int) {
	h := c.half
	for i := range c.x {
		x, z := c.x[i]+c.vx[i]*c.dt, c.z[i]+c.vz[i]*c.dt
		if x < -h || x > h {
			c.vx[i] = -c.vx[i]
			x = c.x[i]
		}
		if z < -h || z > h {
			c.vz[i] = -c.vz[i]
			z = c.z[i]
		}
		c.x[i], c.z[i] = x, z
		c.g.Set(int32(i), x, z, c.aux[i])
	}
	c.g.Build()
	// Players in grid order: consecutive players are neighbours, so the
	// cells one scans are still in cache for the next (the zone does the same).
	for _, m := range c.g.SlotAuxes() {
		if AuxKind(m.Aux) != 0 {
			continue
		}
		p := m.Slot
		c.tr.Update(&c.sets[p], p, c.x[p], c.z[p], c.g, nil)
		members += c.sets[p].Len()
	}
	return members
}

// BenchmarkInterest (tracked): 1,000 players + 20,000 NPCs moving in 4 km²
// (2 km × 2 km), 100 m enter radius (110 m leave): one tick of spatial
// update + interest + priorities. Target ≤ 2 ms/tick on one core, 0 allocs.
//
// ms/tick is the CPU time of the benchmarking thread per tick (Linux
// CLOCK_THREAD_CPUTIME_ID; wall time elsewhere): the cost on one core,
// which the target is about. On a shared 2-vCPU machine wall time (ns/op)
// swings by ±50% with whatever else runs; CPU time does not count the
// time other processes hold the core. GW_CELL overrides the grid cell size
// (metres) for tuning.
func BenchmarkInterest(b *testing.B) {
	cell := 27.5
	if v, err := strconv.ParseFloat(os.Getenv("GW_CELL"), 64); err == nil && v > 0 {
		cell = v
	}
	c := newCrowd(b, 1000, 20000, 2000, cell, Config{EnterRadius: 100, LeaveRadius: 110})
	for range 3 { // warm: sets and buffers at their steady size
		c.tick()
	}
	members := 0
	defer lockThread()()
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	cpu0, useCPU := threadCPU()
	for b.Loop() {
		members = c.tick()
	}
	el := time.Since(start)
	if cpu1, ok := threadCPU(); useCPU && ok {
		el = cpu1 - cpu0
	}
	b.ReportMetric(float64(el.Nanoseconds())/1e6/float64(b.N), "ms/tick")
	b.ReportMetric(float64(members)/float64(c.players), "entities/view")
}
