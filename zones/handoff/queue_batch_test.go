package handoff

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/move"
)

// pushBatchRef is PushBatch as it was before its in-order fast path: the
// losses marked, then every move through Push.
func pushBatchRef(q *MoveQueue, lostBefore uint64, moves []move.Move) int {
	if len(moves) > 0 {
		if first := moves[0].Seq; lostBefore > 0 && lostBefore < first {
			q.MarkLost(first-lostBefore, first-1)
		}
		for i := 1; i < len(moves); i++ {
			if a, b := moves[i-1].Seq, moves[i].Seq; b > a+1 {
				q.MarkLost(a+1, b-1)
			}
		}
	}
	return q.Push(moves...)
}

// TestPushBatchMatchesPush drives two queues with the same random batches
// (in order, overlapping, stale, shuffled, with duplicates, past a small
// bound) and pops, one through PushBatch and one through the reference:
// every return, queued move, peek and counter must agree.
func TestPushBatchMatchesPush(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 7))
		sa, sb := &QueueShared{Max: 12}, &QueueShared{Max: 12}
		a, b := &MoveQueue{Shared: sa}, &MoveQueue{Shared: sb}
		next := uint64(1)
		now := time.Duration(0)
		for op := range 3000 {
			switch r.IntN(5) {
			case 0, 1, 2: // a batch
				var mv []move.Move
				start := next
				if r.IntN(4) == 0 { // a resend from further back
					start = next - min(next-1, uint64(r.IntN(8))) // never below 1
				}
				n := r.IntN(5)
				for k := range n {
					s := start + uint64(k)
					if r.IntN(6) == 0 {
						s++ // a gap
					}
					mv = append(mv, move.Move{Seq: s, Dt: 32})
				}
				if r.IntN(8) == 0 {
					r.Shuffle(len(mv), func(i, j int) { mv[i], mv[j] = mv[j], mv[i] })
				}
				if r.IntN(8) == 0 && len(mv) > 0 {
					mv = append(mv, mv[0]) // a duplicate
				}
				for _, m := range mv {
					next = max(next, m.Seq+1)
				}
				lost := uint64(0)
				if r.IntN(5) == 0 {
					lost = uint64(r.IntN(3))
				}
				ga, gb := a.PushBatch(lost, mv), pushBatchRef(b, lost, mv)
				if ga != gb {
					t.Fatalf("seed %d op %d: PushBatch(%d, %v) added %d, Push %d", seed, op, lost, mv, ga, gb)
				}
			default: // a tick's pops
				now += 50 * time.Millisecond
				for range r.IntN(4) {
					ma, oka := a.Peek(now)
					mb, okb := b.Peek(now)
					if ma != mb || oka != okb {
						t.Fatalf("seed %d op %d: Peek %v %v, want %v %v", seed, op, ma, oka, mb, okb)
					}
					if !oka {
						break
					}
					a.Pop()
					b.Pop()
				}
			}
			if !slices.Equal(a.Queued(), b.Queued()) || a.LastApplied() != b.LastApplied() || sa.Stats != sb.Stats || a.peak != b.peak {
				t.Fatalf("seed %d op %d: queue %v last %d %+v peak %d, want %v last %d %+v peak %d", seed, op,
					a.Queued(), a.LastApplied(), sa.Stats, a.peak, b.Queued(), b.LastApplied(), sb.Stats, b.peak)
			}
		}
	}
}

// BenchmarkPushBatch (informative): a player's usual input at the zone, one
// new move pushed and popped.
func BenchmarkPushBatch(b *testing.B) {
	q := &MoveQueue{Shared: &QueueShared{}}
	mv := []move.Move{{Dt: 32}}
	b.ReportAllocs()
	for b.Loop() {
		mv[0].Seq++
		q.PushBatch(0, mv)
		if _, ok := q.Peek(0); ok {
			q.Pop()
		}
	}
}
