package handoff

import (
	"time"

	"github.com/ghostwire/ghostwire/replication/move"
)

// DefaultGapTimeout is how long a MoveQueue waits for a missing sequence
// before it skips it.
const DefaultGapTimeout = 250 * time.Millisecond

// MoveQueue hands out one player's moves exactly once and in sequence
// order, whatever order and however often they arrive: from the connection
// directly, forwarded by a previous owner, repeated in a Commit. A gap (a
// move that has not arrived while later ones have) holds the queue until
// the move arrives or GapTimeout passes; then the missing moves count as
// Lost and the queue goes on. In process nothing is reordered for longer
// than a handoff round trip, so a gap is only ever waited out, never
// skipped.
//
// Bounded: at most Max moves are held (the newest beyond that are dropped
// and counted; the client resends moves until they are acknowledged, and
// the acknowledgement follows LastApplied).
//
// The zero MoveQueue is ready (nothing applied; the first move is 1, the
// bound 256 and the gap timeout DefaultGapTimeout). Not safe for concurrent
// use.
type MoveQueue struct {
	last       uint64
	q          []move.Move // sorted by Seq, all > last, no duplicates
	gapSince   time.Duration
	gapOpen    bool
	Max        int
	GapTimeout time.Duration
	stats      QueueStats
}

// QueueStats counts a queue's moves.
type QueueStats struct {
	Pushed     uint64 // moves offered
	Duplicates uint64 // already applied or already queued
	Dropped    uint64 // queue full
	Lost       uint64 // skipped after GapTimeout
	Popped     uint64 // handed out
}

// Reset restarts the queue after move last (e.g. from a handoff snapshot's
// LastApplied), dropping anything queued.
func (q *MoveQueue) Reset(last uint64) {
	q.last, q.q, q.gapOpen = last, q.q[:0], false
}

// LastApplied returns the newest sequence handed out (or Reset to).
func (q *MoveQueue) LastApplied() uint64 { return q.last }

// Len returns how many moves are queued.
func (q *MoveQueue) Len() int { return len(q.q) }

// Queued returns the queued moves in sequence order (shared; do not
// modify), e.g. to carry them along in a handoff.
func (q *MoveQueue) Queued() []move.Move { return q.q }

// Stats returns the counters.
func (q *MoveQueue) Stats() QueueStats { return q.stats }

func (q *MoveQueue) max() int {
	if q.Max > 0 {
		return q.Max
	}
	return 256
}

// Push adds moves (any order, duplicates allowed). It returns how many
// were new.
func (q *MoveQueue) Push(moves ...move.Move) int {
	added := 0
	for _, m := range moves {
		q.stats.Pushed++
		if m.Seq <= q.last {
			q.stats.Duplicates++
			continue
		}
		// Usually m goes at the end: binary search only when it does not.
		i := len(q.q)
		if i > 0 && q.q[i-1].Seq >= m.Seq {
			lo, hi := 0, i
			for lo < hi {
				mid := (lo + hi) / 2
				if q.q[mid].Seq < m.Seq {
					lo = mid + 1
				} else {
					hi = mid
				}
			}
			i = lo
			if q.q[i].Seq == m.Seq {
				q.stats.Duplicates++
				continue
			}
		}
		if len(q.q) >= q.max() {
			q.stats.Dropped++
			continue
		}
		q.q = append(q.q, move.Move{})
		copy(q.q[i+1:], q.q[i:])
		q.q[i] = m
		added++
	}
	return added
}

// Peek returns the next move if it is ready at time now (the one after
// LastApplied, or the first queued one once a gap has waited GapTimeout).
// It does not consume it.
func (q *MoveQueue) Peek(now time.Duration) (move.Move, bool) {
	if len(q.q) == 0 {
		q.gapOpen = false
		return move.Move{}, false
	}
	m := q.q[0]
	if m.Seq == q.last+1 {
		q.gapOpen = false
		return m, true
	}
	if !q.gapOpen {
		q.gapOpen, q.gapSince = true, now
	}
	timeout := q.GapTimeout
	if timeout == 0 {
		timeout = DefaultGapTimeout
	}
	if now-q.gapSince >= timeout {
		return m, true
	}
	return move.Move{}, false
}

// Pop consumes the move Peek returned.
func (q *MoveQueue) Pop() {
	if len(q.q) == 0 {
		return
	}
	m := q.q[0]
	if m.Seq > q.last+1 {
		q.stats.Lost += m.Seq - q.last - 1
	}
	q.last = m.Seq
	q.stats.Popped++
	copy(q.q, q.q[1:])
	q.q = q.q[:len(q.q)-1]
	q.gapOpen = false
}
