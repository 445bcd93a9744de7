package handoff

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/move"
)

// peekRef is Peek as it was before Next and Head: the next move if it is
// ready at now, the gap's clock closed or opened on every call.
func peekRef(q *MoveQueue, now time.Duration) (move.Move, bool) {
	if len(q.q) == 0 {
		q.gapSince = noGap
		return move.Move{}, false
	}
	m := q.q[0]
	if m.Seq == q.last+1 {
		q.gapSince = noGap
		return m, true
	}
	if q.declaredLost(q.last+1, m.Seq-1) {
		return m, true
	}
	if q.gapSince == noGap {
		q.gapSince = max(now, 1)
	}
	timeout := q.Shared.GapTimeout
	if now-q.gapSince >= timeout {
		return m, true
	}
	return move.Move{}, false
}

// TestHeadThenNextMatchesPeek drives two queues with the same random
// batches (gaps that arrive late or never, moves declared lost, resends,
// shuffles) and ticks that pop a random number of ready moves: one as a
// zone's tick does (Head, else Next), one through the reference Peek.
// Every move handed out, when, and every counter must agree: Head leaves
// the gap's clock alone and must never tell a different time.
func TestHeadThenNextMatchesPeek(t *testing.T) {
	for seed := range uint64(40) {
		r := rand.New(rand.NewPCG(seed, 11))
		sa, sb := &QueueShared{Max: 16, GapTimeout: 170 * time.Millisecond}, &QueueShared{Max: 16, GapTimeout: 170 * time.Millisecond}
		a, b := &MoveQueue{Shared: sa}, &MoveQueue{Shared: sb}
		next := uint64(1)
		var late []move.Move // moves held back to arrive later (or never)
		now := time.Duration(0)
		heads := 0
		for op := range 4000 {
			switch r.IntN(6) {
			case 0, 1, 2: // a batch
				var mv []move.Move
				start := next
				if k := uint64(r.IntN(6)); r.IntN(5) == 0 && next > k { // a resend from further back
					start = next - k
				}
				for k := range uint64(r.IntN(4)) {
					m := move.Move{Seq: start + k, Dt: 32}
					if r.IntN(7) == 0 {
						late = append(late, m) // a gap, filled later or never
						continue
					}
					mv = append(mv, m)
				}
				if len(late) > 0 && r.IntN(3) == 0 {
					i := r.IntN(len(late))
					mv = append(mv, late[i])
					late = slices.Delete(late, i, i+1)
				}
				if r.IntN(6) == 0 {
					r.Shuffle(len(mv), func(i, j int) { mv[i], mv[j] = mv[j], mv[i] })
				}
				next = max(next, start+4)
				lost := uint64(0)
				if r.IntN(6) == 0 {
					lost = uint64(r.IntN(3))
				}
				a.PushBatch(lost, mv)
				b.PushBatch(lost, mv)
			default: // a tick's pops, at times that cross the gap timeout
				now += time.Duration(20+r.IntN(60)) * time.Millisecond
				for range r.IntN(4) {
					ma := a.Head()
					if ma != nil {
						heads++
					} else {
						ma = a.Next(now)
					}
					mb, okb := peekRef(b, now)
					if (ma != nil) != okb || ma != nil && *ma != mb {
						t.Fatalf("seed %d op %d at %v: Head/Next %v, want %v %v", seed, op, now, ma, mb, okb)
					}
					if ma == nil {
						break
					}
					a.Pop()
					b.Pop()
				}
			}
			if !slices.Equal(a.Queued(), b.Queued()) || a.LastApplied() != b.LastApplied() || sa.Stats != sb.Stats {
				t.Fatalf("seed %d op %d: queue %v last %d %+v, want %v last %d %+v", seed, op,
					a.Queued(), a.LastApplied(), sa.Stats, b.Queued(), b.LastApplied(), sb.Stats)
			}
		}
		if heads == 0 || sa.Stats.Lost == 0 {
			t.Fatalf("seed %d: %d moves by Head, %d lost: the scenario misses a case", seed, heads, sa.Stats.Lost)
		}
	}
}
