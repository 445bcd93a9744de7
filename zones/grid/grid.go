package grid

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/ghostwire/ghostwire/zones/world"
)

// ErrConfig reports an unusable Config.
var ErrConfig = errors.New("grid: invalid config")

// MaxCells bounds the cell count (memory and Build time are linear in it).
const MaxCells = 1 << 22

// Config describes the grid.
type Config struct {
	// Bounds is the area the cells cover (usually the world's bounds).
	Bounds world.Rect
	// CellSize is the side of a square cell in metres.
	CellSize float64
}

// Validate reports a config the grid cannot use.
func (c Config) Validate() error {
	sx, sz := c.Bounds.Size()
	if !(sx > 0) || !(sz > 0) || math.IsInf(sx, 0) || math.IsInf(sz, 0) {
		return fmt.Errorf("%w: bounds %v", ErrConfig, c.Bounds)
	}
	if !(c.CellSize > 0) || math.IsInf(c.CellSize, 0) {
		return fmt.Errorf("%w: cell size %g", ErrConfig, c.CellSize)
	}
	if nx, nz := math.Ceil(sx/c.CellSize), math.Ceil(sz/c.CellSize); nx*nz > MaxCells {
		return fmt.Errorf("%w: %g×%g cells, more than %d", ErrConfig, nx, nz, MaxCells)
	}
	return nil
}

// Meta is what the grid carries for each filed slot besides its position:
// the slot and a 32-bit word the caller defines. Queries hand it out, so
// their consumers need no random access into per-slot tables. No caller's
// id: the zone, its one user, never read it back, and it was 16 bytes a
// slot (the record's 8 and a filed id's 8).
type Meta struct {
	Slot int32
	Aux  uint32
}

// Hit is one query result: a slot's meta and its squared distance to the
// query point.
type Hit struct {
	Meta
	D2 float32
}

type rec struct {
	x, z float32
	m    Meta
}

// Run is a range [A, B) of Built() indices: entities filed in a row of
// consecutive cells.
type Run struct{ A, B int32 }

// Grid is a uniform grid of square cells. The zero Grid is not usable; call
// New. Not safe for concurrent use.
type Grid struct {
	minX, minZ float32
	inv        float32 // 1 / cell size
	cell       float32
	nx, nz     int32
	bounds     world.Rect

	// Per slot, set by Set/Clear: one record, so a lookup by slot (Pos) is
	// one cache line. rec.m.Slot < 0 marks an empty slot.
	recs   []rec
	cellOf []int32

	// Built by Build: slots sorted by cell (row-major); start[c]..start[c+1]
	// is the run of cell c. Positions apart from the rest: a query reads
	// every candidate's position but only the hits' meta.
	start []int32
	xz    [][2]float32
	ssa   []SlotAux
	n     int // live slots in the last Build
	runs  []Run
	// builds counts Builds, so a consumer that derives per-index tables
	// from the filed order knows when to redo them.
	builds uint64
}

// New returns an empty grid for cfg.
func New(cfg Config) (*Grid, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	g := &Grid{bounds: cfg.Bounds}
	g.setCells(cfg.CellSize)
	return g, nil
}

func (g *Grid) setCells(cell float64) {
	sx, sz := g.bounds.Size()
	g.minX, g.minZ = float32(g.bounds.Min[0]), float32(g.bounds.Min[1])
	g.inv, g.cell = float32(1/cell), float32(cell)
	g.nx, g.nz = int32(math.Ceil(sx/cell)), int32(math.Ceil(sz/cell))
	g.start = make([]int32, int(g.nx)*int(g.nz)+1)
}

// SetCellSize changes the cell size (same bounds; ErrConfig as New for an
// unusable one). Until the next Build the grid files nothing: queries find
// nothing, Built is 0. The best size depends on how crowded the grid is: a
// query pays per cell row it crosses and per candidate it reads.
func (g *Grid) SetCellSize(cell float64) error {
	if err := (Config{Bounds: g.bounds, CellSize: cell}).Validate(); err != nil {
		return err
	}
	g.setCells(cell)
	g.n = 0
	g.builds++
	return nil
}

// CellSize returns the cell size in metres.
func (g *Grid) CellSize() float64 { return float64(g.cell) }

// Cells returns the grid's size in cells along X and Z.
func (g *Grid) Cells() (nx, nz int) { return int(g.nx), int(g.nz) }

// Resize makes slots 0..n-1 valid. New slots start empty; slots ≥ n are
// dropped. It allocates only when n exceeds every earlier size.
func (g *Grid) Resize(n int) {
	old := len(g.recs)
	if n > cap(g.recs) {
		// Every per-slot slice gets the same capacity, chosen here: append
		// would round each to its own size class (a rec and an int32 grow
		// differently), and a later n between the two capacities would then
		// overrun the smaller one. By an eighth, not doubled: a zone's
		// table grows one slot at a time and never shrinks, so doubling
		// left up to half of it unused for good.
		c := (max(n, cap(g.recs)+cap(g.recs)/8) + 7) &^ 7
		recs := make([]rec, n, c)
		copy(recs, g.recs[:old])
		cellOf := make([]int32, n, c)
		copy(cellOf, g.cellOf[:old])
		g.recs, g.cellOf = recs, cellOf
		g.xz = make([][2]float32, c)
		g.ssa = make([]SlotAux, c)
	}
	g.recs, g.cellOf = g.recs[:n], g.cellOf[:n]
	for i := old; i < n; i++ {
		g.recs[i].m.Slot = -1
	}
}

// Len returns the number of slots.
func (g *Grid) Len() int { return len(g.recs) }

// Set places slot at [x, z] with the caller's aux word; it takes effect at
// the next Build. NaN coordinates clear the slot instead (a NaN would
// match no query anyway).
func (g *Grid) Set(slot int32, x, z float32, aux uint32) {
	if x != x || z != z {
		g.recs[slot].m.Slot = -1
		return
	}
	g.recs[slot] = rec{x: x, z: z, m: Meta{Slot: slot, Aux: aux}}
}

// Clear empties slot; it takes effect at the next Build.
func (g *Grid) Clear(slot int32) { g.recs[slot].m.Slot = -1 }

// Pos returns slot's position and meta as of the last Set, and whether it
// is live.
func (g *Grid) Pos(slot int32) (x, z float32, m Meta, ok bool) {
	if slot < 0 || int(slot) >= len(g.recs) {
		return 0, 0, Meta{}, false
	}
	r := &g.recs[slot]
	if r.m.Slot < 0 {
		return 0, 0, Meta{}, false
	}
	return r.x, r.z, r.m, true
}

// cellCoord maps a coordinate to a cell index along one axis, clamped.
func cellCoord(v, min, inv float32, n int32) int32 {
	c := int32((v - min) * inv)
	if v < min || c < 0 { // also catches -Inf
		return 0
	}
	if c >= n {
		return n - 1
	}
	return c
}

// Build files every live slot in its cell. Call it once per tick after the
// Sets; queries see the positions as of the last Build.
func (g *Grid) Build() {
	clear(g.start)
	counts := g.start[1:]
	// The grid's fields and slices in locals: the loops' stores may write
	// memory, and each iteration would reload every field of g after them
	// (≈ 83 instructions a slot). The arithmetic is the same, operation
	// for operation, so the cells are too.
	minX, minZ, inv, nx, nz := g.minX, g.minZ, g.inv, g.nx, g.nz
	recs := g.recs
	cellOf := g.cellOf[:len(recs)]
	n := 0
	for s := range recs {
		r := &recs[s]
		if r.m.Slot < 0 {
			cellOf[s] = -1
			continue
		}
		c := cellCoord(r.z, minZ, inv, nz)*nx + cellCoord(r.x, minX, inv, nx)
		cellOf[s] = c
		counts[c]++
		n++
	}
	// Exclusive prefix sums: counts[c] (= start[c+1]) = first index of cell c.
	var sum int32
	for c := range counts {
		k := counts[c]
		counts[c] = sum
		sum += k
	}
	// Scatter in slot order (stable: results are deterministic). counts[c]
	// walks from the start of cell c to its end, which leaves start[c+1] at
	// the end of cell c, which is the start of cell c+1.
	xz, ssa := g.xz[:n], g.ssa[:n]
	for s := range recs {
		c := cellOf[s]
		if c < 0 {
			continue
		}
		i := counts[c]
		counts[c]++
		r := &recs[s]
		xz[i] = [2]float32{r.x, r.z}
		ssa[i] = SlotAux{Slot: r.m.Slot, Aux: r.m.Aux}
	}
	g.n = n
	g.builds++
}

// Builds returns how many times Build has run: the filed order (Positions,
// SlotAuxes, Runs) changes only when it does.
func (g *Grid) Builds() uint64 { return g.builds }

// Built returns the number of slots filed by the last Build.
func (g *Grid) Built() int { return g.n }

// Positions returns the filed positions in cell order, [x, z]; with
// SlotAuxes and Runs it lets a hot caller scan candidates without an
// intermediate hit list. Valid until the next Build; do not modify.
func (g *Grid) Positions() [][2]float32 { return g.xz[:g.n] }

// SlotAux is the part of Meta a scan needs for every candidate it keeps.
type SlotAux struct {
	Slot int32
	Aux  uint32
}

// SlotAuxes returns the filed slots and aux words, parallel to Positions.
func (g *Grid) SlotAuxes() []SlotAux { return g.ssa[:g.n] }

// Runs appends to dst the index runs whose cells the disc of radius r around
// [x, z] touches: per cell row the disc crosses, only the cells its chord
// spans. Every entity within r is in a run; runs also hold some farther
// ones, so the caller still checks distances.
func (g *Grid) Runs(dst []Run, x, z, r float32) []Run {
	if !(r >= 0) || x != x || z != z {
		return dst
	}
	// The grid's fields in locals: dst's appends may write memory, and
	// the loop would reload every field of g after each (≈ 86
	// instructions a row, now ≈ 50). The arithmetic is the same, operation
	// for operation, so the runs are too.
	minX, minZ, inv, cell, nx, nz := g.minX, g.minZ, g.inv, g.cell, g.nx, g.nz
	start := g.start
	r2 := r * r
	j0 := cellCoord(z-r, minZ, inv, nz)
	j1 := cellCoord(z+r, minZ, inv, nz)
	// Room for a run a row, written by index: no capacity check a row.
	n := len(dst)
	dst = slices.Grow(dst, int(j1-j0)+1)
	out := dst[n : n+int(j1-j0)+1]
	k := 0
	// A disc whose x span [x−r, x+r] lies within the grid's columns needs
	// no clamp on either end of any row's chord: the chord's ends lie in
	// that span (half ≤ r: √fl(r·r) is r for r·r a normal float, so r ≥
	// 1 here), and (v − minX)·inv, rounded,
	// is monotonic in v, so each end's column is cellCoord's unclamped
	// (≈ 12 instructions a row fewer; the usual query, away from the
	// zone's edges).
	// (The test is on the float: a conversion to int32 out of range is
	// not a large column.)
	if left, right := x-r, x+r; r >= 1 && left >= minX && (right-minX)*inv < float32(nx) {
		for j := j0; j <= j1; j++ {
			dz := rowGap(z, minZ, cell, j, nz)
			if dz > r {
				continue
			}
			half := float32(math.Sqrt(float64(r2 - dz*dz)))
			v0, v1 := x-half, x+half // cellCoord's arithmetic, unclamped
			i0, i1 := int32((v0-minX)*inv), int32((v1-minX)*inv)
			row := j * nx
			if a, b := start[row+i0], start[row+i1+1]; a < b {
				out[k] = Run{A: a, B: b}
				k++
			}
		}
		return dst[:n+k]
	}
	for j := j0; j <= j1; j++ {
		dz := rowGap(z, minZ, cell, j, nz)
		if dz > r {
			continue
		}
		half := float32(math.Sqrt(float64(r2 - dz*dz)))
		i0 := cellCoord(x-half, minX, inv, nx)
		i1 := cellCoord(x+half, minX, inv, nx)
		row := j * nx
		if a, b := start[row+i0], start[row+i1+1]; a < b {
			out[k] = Run{A: a, B: b}
			k++
		}
	}
	return dst[:n+k]
}

// rowGap is how far z lies from cell row j (of nz, from minZ, cell
// high) across z: 0 inside it, and 0 beyond the grid's first or last
// row, whose cells hold what lies past the edge too.
func rowGap(z, minZ, cell float32, j, nz int32) float32 {
	lo := minZ + float32(j)*cell
	hi := lo + cell
	switch {
	case z < lo && j > 0:
		return lo - z
	case z > hi && j < nz-1:
		return z - hi
	}
	return 0
}

// Query appends to dst every slot within r of [x, z] (d² ≤ r²) as of the
// last Build, with its squared distance, and returns dst. Order: by cell
// row, then cell, then slot: deterministic. It allocates only when dst
// must grow.
func (g *Grid) Query(dst []Hit, x, z, r float32) []Hit {
	g.runs = g.Runs(g.runs[:0], x, z, r)
	r2 := r * r
	for _, run := range g.runs {
		xz := g.xz[run.A:run.B]
		for k := range xz {
			dx, dz := xz[k][0]-x, xz[k][1]-z
			if d2 := dx*dx + dz*dz; d2 <= r2 {
				i := int(run.A) + k
				dst = append(dst, Hit{Meta: Meta{Slot: g.ssa[i].Slot, Aux: g.ssa[i].Aux}, D2: d2})
			}
		}
	}
	return dst
}
