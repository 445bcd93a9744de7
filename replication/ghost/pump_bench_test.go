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
	benchTablesColdOf(b, 1000, 0, nil, true, true, true, false, true)
}

// BenchmarkTables1000PumpSparse is BenchmarkTables1000Pump with each
// table's 48 ghosts in view holding ids spread over 96 (as
// BenchmarkTables1000Sparse) (informative).
func BenchmarkTables1000PumpSparse(b *testing.B) {
	benchTablesColdOf(b, 1000, 0, nil, true, true, true, true, true)
}
