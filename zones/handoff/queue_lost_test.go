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
	q := MoveQueue{Shared: &QueueShared{}}
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

// A backlog's room goes back once the queue drains (a burst grows it
// towards Max; a queue swinging by many moves keeps its room), and the
// moves come out the same either way.
func TestMoveQueueGivesBacklogRoomBack(t *testing.T) {
	var q MoveQueue
	seq := uint64(0)
	push := func(n int) {
		for range n {
			seq++
			q.Push(move.Move{Seq: seq, Dt: 16})
		}
	}
	popped := uint64(0)
	pop := func(n int) {
		for range n {
			m, ok := q.Peek(0)
			if !ok {
				t.Fatalf("move %d not ready", popped+1)
			}
			if m.Seq != popped+1 {
				t.Fatalf("popped %d, want %d", m.Seq, popped+1)
			}
			q.Pop()
			popped++
		}
	}
	push(200) // a burst
	if cap(q.q) < 200 {
		t.Fatalf("room %d for 200 moves", cap(q.q))
	}
	pop(198)
	// Steady play after it, one or two moves queued: within two windows
	// the room follows the window's peak.
	for range 2 * trimEvery {
		push(1)
		pop(1)
	}
	if c := cap(q.q); c > 2*keepRoom {
		t.Fatalf("room %d two windows after the backlog drained to %d moves, want ≤ %d", c, q.Len(), 2*keepRoom)
	}
	// Steady play does not reallocate.
	if a := testing.AllocsPerRun(200, func() { push(1); pop(1) }); a != 0 {
		t.Fatalf("%.1f allocations a move in steady play", a)
	}
	// Swinging between 1 and 20 queued moves: the room stays, no reallocation.
	pop(1)
	push(19)
	room := cap(q.q)
	for range 50 {
		pop(19)
		push(19)
		if cap(q.q) != room {
			t.Fatalf("room changed %d → %d while the queue swung by 19 moves", room, cap(q.q))
		}
	}
	pop(q.Len())
	if q.LastApplied() != seq {
		t.Fatalf("last applied %d, want %d", q.LastApplied(), seq)
	}
	push(100)
	q.Reset(seq)
	if c := cap(q.q); c > keepRoom {
		t.Fatalf("room %d after Reset, want ≤ %d", c, keepRoom)
	}
}
