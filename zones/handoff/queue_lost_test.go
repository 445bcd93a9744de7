package handoff

import (
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/move"
)

func mvs(ns ...uint64) []move.Move {
	out := make([]move.Move, len(ns))
	for i, n := range ns {
		out[i] = move.Move{Seq: n, Dt: 16}
	}
	return out
}

// A gap the connection declared lost is skipped at once; one that is merely
// late (moves on their way, forwarded by a previous owner) is waited for up
// to GapTimeout, and the late moves are applied, not lost.
func TestMoveQueueSkipsOnlyDeclaredLosses(t *testing.T) {
	var q MoveQueue
	q.PushBatch(0, mvs(1, 2))
	for range 2 {
		if _, ok := q.Peek(0); !ok {
			t.Fatal("in-order move not ready")
		}
		q.Pop()
	}
	// 3 and 4 lost at the client (LostBefore 2), 6 lost inside the batch.
	q.PushBatch(2, mvs(5, 7))
	for _, want := range []uint64{5, 7} {
		m, ok := q.Peek(time.Millisecond)
		if !ok || m.Seq != want {
			t.Fatalf("declared-lost gap waited: got %v %v, want %d at once", m.Seq, ok, want)
		}
		q.Pop()
	}
	if got := q.Stats().Lost; got != 3 {
		t.Fatalf("Lost = %d, want 3", got)
	}
	// 8 is late (not declared lost): 9 waits for it.
	q.PushBatch(0, mvs(9))
	if _, ok := q.Peek(10 * time.Millisecond); ok {
		t.Fatal("a late move's gap was skipped at once")
	}
	if _, ok := q.Peek(10*time.Millisecond + DefaultGapTimeout/2); ok {
		t.Fatal("gap skipped before GapTimeout")
	}
	q.Push(mvs(8)...) // arrives, forwarded
	for _, want := range []uint64{8, 9} {
		m, ok := q.Peek(20 * time.Millisecond)
		if !ok || m.Seq != want {
			t.Fatalf("got %d %v, want %d", m.Seq, ok, want)
		}
		q.Pop()
	}
	if got := q.Stats().Lost; got != 3 {
		t.Fatalf("Lost = %d after the late move came, want still 3", got)
	}
	// Still a safety net: a gap nobody fills is skipped after GapTimeout.
	q.PushBatch(0, mvs(11))
	if _, ok := q.Peek(time.Second); ok {
		t.Fatal("skipped at once")
	}
	if m, ok := q.Peek(time.Second + DefaultGapTimeout); !ok || m.Seq != 11 {
		t.Fatal("gap never skipped")
	}
}
