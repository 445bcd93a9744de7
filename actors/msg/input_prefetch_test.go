package msg

import (
	"testing"

	"github.com/ghostwire/ghostwire/replication/move"
)

// InputCache.Get asks for the next Inputs' lines as it hands one out
// (prefetchNext): a hint that must leave the free list whole — every
// released Input handed out once, empty, unlinked, in the stack's order.
func TestInputCacheGetAfterPrefetch(t *testing.T) {
	inputReturns.Swap(nil) // only this test's Inputs on the returns stack
	var released []*Input
	for i := range 3 {
		in := NewInput()
		in.Player = uint64(i + 1)
		in.Moves = append(in.Moves, move.Move{Seq: uint64(i + 1)})
		released = append(released, in)
	}
	for _, in := range released {
		in.Release()
	}
	var c InputCache
	seen := map[*Input]bool{}
	for i := range len(released) {
		in := c.Get()
		if want := released[len(released)-1-i]; in != want {
			t.Fatalf("Get %d returned %p, want %p (the returns stack's order)", i, in, want)
		}
		if seen[in] || in.Player != 0 || len(in.Moves) != 0 || in.next != nil {
			t.Fatalf("Get %d: Input handed out twice or not empty (player %d, %d moves, next %p)", i, in.Player, len(in.Moves), in.next)
		}
		seen[in] = true
	}
	if in := c.Get(); in == nil || seen[in] {
		t.Fatal("the cache, empty, did not make a new Input")
	}
}
