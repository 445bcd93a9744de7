package ghost

import "testing"

// BenchmarkTables1000Pump is BenchmarkTables1000ServerCold in a
// connection's order (informative): each table's view is taken right
// before its Write (ghostmgr applies a waiting view in the pump, right
// before the packet reads the same ghosts), so the view's walk and the
// packet's share the slots' lines, and the fates come after every table
// wrote, in another order, each finding its slots cold. Under cachegrind
// its D1 misses a ghost are what a ghost's record costs a server's tick:
// the view and the packet one visit, the fate another
// (view-cpu-ns/ghost reads 0: the views are in the write's time).
func BenchmarkTables1000Pump(b *testing.B) {
	benchTablesColdOf(b, 1000, 0, nil, true, true, true, false, true, false)
}

// BenchmarkTables1000PumpSparse is BenchmarkTables1000Pump with each
// table's 48 ghosts in view holding ids spread over 96 (as
// BenchmarkTables1000Sparse) (informative).
func BenchmarkTables1000PumpSparse(b *testing.B) {
	benchTablesColdOf(b, 1000, 0, nil, true, true, true, true, true, false)
}

// BenchmarkTables1000Visit is BenchmarkTables1000Pump with each packet's
// fate applied right after its Write (informative): a connection's pump
// applies the fates that came, then the view, then writes (actors/conn
// Conn.pump), so a table is visited once a tick — its first touch cold,
// the rest in the lines it brought — and the fate of this tick's packet
// is in the next visit, where it comes first. Under cachegrind its misses
// a ghost are what a ghost's record costs a server's tick.
func BenchmarkTables1000Visit(b *testing.B) {
	benchTablesColdOf(b, 1000, 0, nil, true, false, true, false, true, false)
}

// BenchmarkTables1000VisitSparse is BenchmarkTables1000Visit with each
// table's 48 ghosts in view holding ids spread over 96 (informative).
func BenchmarkTables1000VisitSparse(b *testing.B) {
	benchTablesColdOf(b, 1000, 0, nil, true, false, true, true, true, false)
}
