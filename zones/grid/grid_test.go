package grid

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ghostwire/ghostwire/zones/world"
)

func bounds(x0, z0, x1, z1 float64) world.Rect {
	return world.Rect{Min: [2]float64{x0, z0}, Max: [2]float64{x1, z1}}
}

func brute(px, pz []float32, live []bool, x, z, r float32) []Hit {
	var out []Hit
	for s := range px {
		if !live[s] {
			continue
		}
		dx, dz := px[s]-x, pz[s]-z
		if d2 := dx*dx + dz*dz; d2 <= r*r {
			out = append(out, Hit{Meta: Meta{Slot: int32(s), Aux: uint32(s) * 3}, D2: d2})
		}
	}
	return out
}

func sortHits(h []Hit) []Hit {
	slices.SortFunc(h, func(a, b Hit) int { return int(a.Slot - b.Slot) })
	return h
}

// TestQueryMatchesBruteForce compares random queries against a linear scan,
// including positions outside the bounds, radii larger than the world and
// cell sizes that do not divide the bounds.
func TestQueryMatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, cell := range []float64{7, 25, 100, 333} {
		g, err := New(Config{Bounds: bounds(-500, -300, 500, 300), CellSize: cell})
		if err != nil {
			t.Fatal(err)
		}
		const n = 2000
		g.Resize(n)
		px, pz, live := make([]float32, n), make([]float32, n), make([]bool, n)
		for round := range 5 {
			for s := range n {
				live[s] = rng.IntN(10) != 0
				px[s] = float32(rng.Float64()*1200 - 600) // some outside [-500, 500]
				pz[s] = float32(rng.Float64()*800 - 400)
				if live[s] {
					g.Set(int32(s), px[s], pz[s], uint32(s)*3)
				} else {
					g.Clear(int32(s))
				}
			}
			g.Build()
			var hits []Hit
			for q := range 200 {
				x := float32(rng.Float64()*1400 - 700)
				z := float32(rng.Float64()*1000 - 500)
				r := float32(rng.Float64() * 150)
				if q%50 == 0 {
					r = 2000
				}
				hits = g.Query(hits[:0], x, z, r)
				want := brute(px, pz, live, x, z, r)
				if got := sortHits(slices.Clone(hits)); !slices.Equal(got, want) {
					t.Fatalf("cell %g round %d: query (%g,%g,r=%g): %d hits, brute force %d", cell, round, x, z, r, len(got), len(want))
				}
			}
		}
	}
}

func TestResizeAndClear(t *testing.T) {
	g, _ := New(Config{Bounds: bounds(0, 0, 100, 100), CellSize: 10})
	g.Resize(3)
	g.Set(0, 5, 5, 0)
	g.Set(1, 6, 5, 0)
	g.Set(2, float32(math.NaN()), 5, 0) // NaN clears
	g.Build()
	if got := g.Query(nil, 5, 5, 2); len(got) != 2 {
		t.Fatalf("got %v", got)
	}
	g.Clear(1)
	g.Resize(10) // new slots are empty
	g.Build()
	if got := g.Query(nil, 5, 5, 200); len(got) != 1 || got[0].Slot != 0 {
		t.Fatalf("after Clear and Resize: %v", got)
	}
	if g.Built() != 1 {
		t.Fatalf("Built = %d", g.Built())
	}
	g.Resize(0)
	g.Resize(5) // regrow within capacity: no stale slots come back
	g.Build()
	if got := g.Query(nil, 5, 5, 200); len(got) != 0 {
		t.Fatalf("stale slots after shrink+grow: %v", got)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []Config{
		{Bounds: bounds(0, 0, 0, 10), CellSize: 1},
		{Bounds: bounds(0, 0, 10, 10), CellSize: 0},
		{Bounds: bounds(0, 0, 10, 10), CellSize: math.NaN()},
		{Bounds: bounds(0, 0, 1e9, 1e9), CellSize: 1},
	} {
		if _, err := New(c); !errors.Is(err, ErrConfig) {
			t.Errorf("New(%+v) = %v, want ErrConfig", c, err)
		}
	}
}

func TestQueryAllocs(t *testing.T) {
	g, _ := New(Config{Bounds: bounds(-1000, -1000, 1000, 1000), CellSize: 25})
	g.Resize(5000)
	rng := rand.New(rand.NewPCG(3, 4))
	for s := range 5000 {
		g.Set(int32(s), float32(rng.Float64()*2000-1000), float32(rng.Float64()*2000-1000), 0)
	}
	g.Build()
	hits := make([]Hit, 0, 5000)
	allocs := testing.AllocsPerRun(50, func() {
		g.Build()
		hits = g.Query(hits[:0], 0, 0, 110)
	})
	if allocs != 0 {
		t.Fatalf("Build+Query allocated %v times", allocs)
	}
}

func BenchmarkBuild(b *testing.B) {
	g, _ := New(Config{Bounds: bounds(-1000, -1000, 1000, 1000), CellSize: 27.5})
	g.Resize(21000)
	rng := rand.New(rand.NewPCG(5, 6))
	for s := range 21000 {
		g.Set(int32(s), float32(rng.Float64()*2000-1000), float32(rng.Float64()*2000-1000), 0)
	}
	b.ReportAllocs()
	for b.Loop() {
		g.Build()
	}
}

// TestResizeOneSlotAtATime grows the grid the way a zone does (one slot per
// new entity) to 5,000 slots, filling and querying at every size. Before
// the per-slot slices shared one capacity, append rounded the record slice
// and the cell slice to different size classes and the 865th slot
// overran the smaller one: a panic inside the zone actor (restarted
// empty by its supervisor) at about 800 players in one zone.
func TestResizeOneSlotAtATime(t *testing.T) {
	g, _ := New(Config{Bounds: bounds(0, 0, 1000, 1000), CellSize: 27.5})
	for n := 1; n <= 5000; n++ {
		g.Resize(n)
		s := int32(n - 1)
		g.Set(s, float32(n%1000), float32(n/5), 0)
		if n%97 == 0 || n == 5000 {
			g.Build()
			if got := g.Built(); got != n {
				t.Fatalf("at %d slots: Built = %d", n, got)
			}
			if hits := g.Query(nil, float32(n%1000), float32(n/5), 0.5); len(hits) == 0 {
				t.Fatalf("at %d slots: slot %d not found", n, s)
			}
		}
	}
}

// TestSetCellSize: a grid whose cell size changes between Builds finds
// what a grid made with that size finds, files nothing until its next
// Build, and refuses a size New would refuse.
func TestSetCellSize(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	b := bounds(-500, -300, 500, 300)
	g, err := New(Config{Bounds: b, CellSize: 25})
	if err != nil {
		t.Fatal(err)
	}
	const n = 500
	g.Resize(n)
	px, pz, live := make([]float32, n), make([]float32, n), make([]bool, n)
	for s := range n {
		live[s] = true
		px[s], pz[s] = float32(rng.Float64()*1000-500), float32(rng.Float64()*600-300)
		g.Set(int32(s), px[s], pz[s], uint32(s)*3)
	}
	g.Build()
	for _, cell := range []float64{55, 13.75, 25} {
		builds := g.Builds()
		if err := g.SetCellSize(cell); err != nil {
			t.Fatal(err)
		}
		if g.Built() != 0 || len(g.Query(nil, 0, 0, 1000)) != 0 || g.Builds() == builds {
			t.Fatalf("cell %g: before the next Build the grid still files %d", cell, g.Built())
		}
		g.Build()
		f, _ := New(Config{Bounds: b, CellSize: cell})
		gx, _ := g.Cells()
		if fx, _ := f.Cells(); g.CellSize() != cell || gx != fx {
			t.Fatalf("cell %g: grid has %g m and %d columns, a new one %d", cell, g.CellSize(), gx, fx)
		}
		for q := range 50 {
			x, z, r := float32(rng.Float64()*1000-500), float32(rng.Float64()*600-300), float32(rng.Float64()*150)
			got, want := sortHits(g.Query(nil, x, z, r)), brute(px, pz, live, x, z, r)
			if !slices.Equal(got, want) {
				t.Fatalf("cell %g query %d: %d hits, want %d", cell, q, len(got), len(want))
			}
		}
	}
	if err := g.SetCellSize(0); !errors.Is(err, ErrConfig) {
		t.Fatalf("SetCellSize(0) = %v, want ErrConfig", err)
	}
}

// runsRef is Runs as it was before its unclamped fast path: every row's
// chord clamped to the grid's columns (cellCoord).
func runsRef(g *Grid, dst []Run, x, z, r float32) []Run {
	if !(r >= 0) || x != x || z != z {
		return dst
	}
	r2 := r * r
	j0 := cellCoord(z-r, g.minZ, g.inv, g.nz)
	j1 := cellCoord(z+r, g.minZ, g.inv, g.nz)
	for j := j0; j <= j1; j++ {
		lo := g.minZ + float32(j)*g.cell
		hi := lo + g.cell
		var dz float32
		switch {
		case z < lo && j > 0:
			dz = lo - z
		case z > hi && j < g.nz-1:
			dz = z - hi
		}
		if dz > r {
			continue
		}
		half := float32(math.Sqrt(float64(r2 - dz*dz)))
		i0 := cellCoord(x-half, g.minX, g.inv, g.nx)
		i1 := cellCoord(x+half, g.minX, g.inv, g.nx)
		row := j * g.nx
		if a, b := g.start[row+i0], g.start[row+i1+1]; a < b {
			dst = append(dst, Run{A: a, B: b})
		}
	}
	return dst
}

// TestRunsMatchClamped holds Runs (whose discs within the grid's columns
// skip the clamps) to the clamped reference, run for run: discs inside,
// across and beyond every edge, on and next to cell borders, radii from 0
// to beyond the world, and a dst that already holds runs.
func TestRunsMatchClamped(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, cell := range []float64{7, 25, 27.5, 100, 333} {
		g, err := New(Config{Bounds: bounds(-500, -300, 500, 300), CellSize: cell})
		if err != nil {
			t.Fatal(err)
		}
		const n = 3000
		g.Resize(n)
		for s := range n {
			g.Set(int32(s), float32(rng.Float64()*1100-550), float32(rng.Float64()*700-350), 0)
		}
		g.Build()
		prefix := []Run{{A: 1, B: 2}}
		for q := range 20000 {
			x := float32(rng.Float64()*1200 - 600)
			z := float32(rng.Float64()*800 - 400)
			r := float32(rng.Float64() * 200)
			switch q % 8 {
			case 1: // on a column border, the chord's end too
				x = g.minX + float32(rng.IntN(int(g.nx)+1))*g.cell
				r = float32(rng.IntN(5)) * g.cell
			case 2: // right at the grid's edges
				x = g.minX + r
				if q%16 == 2 {
					x = g.minX + float32(g.nx)*g.cell - r
				}
			case 3:
				r = float32(rng.Float64() * 2)
			case 4:
				r = 5000
			}
			got := g.Runs(slices.Clone(prefix), x, z, r)
			want := runsRef(g, slices.Clone(prefix), x, z, r)
			if !slices.Equal(got, want) {
				t.Fatalf("cell %g: Runs(%g, %g, r=%g) = %v, clamped %v", cell, x, z, r, got, want)
			}
		}
	}
}
