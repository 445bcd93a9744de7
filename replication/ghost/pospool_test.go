package ghost

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// The pool hands out its lowest free node and grows only when none is
// free: the nodes freed by a packet's fates, wherever they are, are taken
// again in order.
func TestPosPoolGetLowest(t *testing.T) {
	qt := quant{lim: [3]uint32{1<<19 - 1, 1<<16 - 1, 1<<19 - 1}, bits: [3]uint{19, 16, 19}}
	var x posPool
	x.init(&qt)
	x.fq1 = make([]uint64, 8) // the per-id second positions in flight (Table.resizeRecords)
	for i := range 203 {
		if got := x.get(); got != int32(i) {
			t.Fatalf("empty pool: node %d, want %d", got, i)
		}
	}
	if len(x.free)*64 < cap(x.nodes) {
		t.Fatalf("room %d, %d free words", cap(x.nodes), len(x.free))
	}
	r := rand.New(rand.NewPCG(3, 4))
	freed := r.Perm(203)[:40]
	for _, i := range freed {
		x.put(int32(i))
	}
	slices.Sort(freed)
	for k, want := range freed {
		if got := x.get(); got != int32(want) {
			t.Fatalf("get %d after freeing %v: node %d, want %d", k, freed, got, want)
		}
	}
	if got := x.get(); got != 203 {
		t.Fatalf("none free: node %d, want a new one, 203", got)
	}
	if x.used != 204 || x.hw != 204 {
		t.Fatalf("used %d, high water %d; want 204", x.used, x.hw)
	}
}
