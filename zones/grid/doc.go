// Package grid is a uniform spatial grid over the X/Z plane for radius
// queries: which entities are within r of a point. It is rebuilt from
// scratch every tick with a counting sort (O(entities + cells), no
// allocation once warm), which beats incremental bucket updates when most
// entities move every tick, and it lays entities out cell by cell, rows
// contiguous, so a query scans a few contiguous runs of float32 pairs
// instead of chasing pointers.
//
//	g, _ := grid.New(grid.Config{Bounds: w.Bounds(), CellSize: 25})
//	g.Resize(n)                 // slots 0..n-1
//	g.Set(slot, x, z)           // or g.Clear(slot) for an empty slot
//	g.Build()                   // once per tick, after the Sets
//	hits = g.Query(hits[:0], x, z, 110) // slots within 110 m, with squared distances
//
// Slots are the caller's dense entity indices. Positions outside the bounds
// are filed in the nearest edge cell, so they are still found; distances are
// always exact. A query visits, per cell row the circle crosses, only the
// cells its chord spans; the cell size trades cells visited against
// candidates rejected: a quarter of the radius in a crowd, half of it when
// sparse (SetCellSize changes it between Builds; the zone picks it by its
// crowding). Bounds need only cover where the queries and most entities
// are: every Build clears and sums every cell.
//
// Not safe for concurrent use: the zone owns its grid.
package grid
