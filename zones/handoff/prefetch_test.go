package handoff

import (
	"testing"

	"github.com/ghostwire/ghostwire/replication/move"
)

// PrefetchHead is a hint: on an empty queue, a zero one and a full one it
// neither panics nor changes what the queue hands out.
func TestPrefetchHeadChangesNothing(t *testing.T) {
	var zero MoveQueue
	zero.PrefetchHead()
	if zero.Head() != nil || zero.Len() != 0 {
		t.Fatal("a zero queue changed")
	}
	q := MoveQueue{Shared: &QueueShared{}}
	q.PrefetchHead()
	if n := q.Push(move.Move{Seq: 1, Dt: 32}, move.Move{Seq: 2, Dt: 32}, move.Move{Seq: 3, Dt: 32}); n != 3 {
		t.Fatalf("pushed %d new, want 3", n)
	}
	q.PrefetchHead()
	if m := q.Head(); m == nil || m.Seq != 1 || q.Len() != 3 {
		t.Fatalf("head %v, %d held after the prefetch; want seq 1, 3 held", m, q.Len())
	}
}
