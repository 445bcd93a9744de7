package handoff

import (
	"math"
	"slices"
	"time"

	"github.com/ghostwire/ghostwire/replication/move"
)

// DefaultGapTimeout is how long a MoveQueue waits for a missing sequence
// before it skips it. Moves the client lost (MarkLost) are skipped at once;
// what is waited for is moves still on their way (forwarded by a previous
// owner, across processes, behind a busy zone's mailbox), so the wait is
// long enough for those and only a safety net.
const DefaultGapTimeout = time.Second

// MoveQueue hands out one player's moves exactly once and in sequence
// order, whatever order and however often they arrive: from the connection
// directly, forwarded by a previous owner, repeated in a Commit. A gap (a
// move that has not arrived while later ones have) holds the queue until
// the move arrives or GapTimeout passes; then the missing moves count as
// Lost and the queue goes on. A gap the connection declared lost (the
// client never delivered those moves: MarkLost) is skipped at once, so
// waiting is only ever for moves that are on their way.
//
// Bounded: at most Shared.Max moves are held (the newest beyond that are
// dropped and counted; the client resends moves until they are
// acknowledged, and the acknowledgement follows LastApplied).
//
// The zero MoveQueue is ready (nothing applied; the first move is 1, the
// bound 256, the gap timeout DefaultGapTimeout, nothing counted). Not safe
// for concurrent use.
//
// 64 bytes: a zone keeps one per player, so the bound, the gap timeout and
// the counters live in the zone's one QueueShared (they were 56 bytes of
// every player's queue, and the counters' 40-byte copies were read around
// every push and every tick's pops).
//
// What a push reads comes first (last, q, Shared, peak: 42 bytes), so
// that a player's input, whose queue is seldom in the cache, reads as few
// lines as it can (sim.playerSlot).
type MoveQueue struct {
	last uint64
	q    []move.Move // sorted by Seq, all > last, no duplicates
	// Shared holds the bound, the gap timeout and the counters, shared by
	// a zone's queues; nil: the defaults, nothing counted.
	Shared *QueueShared
	// peak is the most moves held since the window began; pops counts the
	// window's moves handed out (trim).
	peak, pops uint16
	// lost: ranges of moves the connection says will never come (lost at
	// the client), sorted, all above last; a handful at most. Made on the
	// first: a client that loses no move never needs it (16 bytes of
	// every queue as a slice).
	lost *[]seqRange
	// gapSince: when the gap at the head opened, at least 1 ns (noGap, 0:
	// none is open; a gap opened at time 0 counts from 1 ns).
	gapSince time.Duration
}

// QueueShared is what a zone's move queues share: their bound and gap
// timeout, and the counters they add to.
type QueueShared struct {
	Max        int           // moves held at most; 0: 256
	GapTimeout time.Duration // 0: DefaultGapTimeout
	Stats      QueueStats
}

// noGap is gapSince while no gap is open.
const noGap = 0

type seqRange struct{ from, to uint64 }

// maxLostRanges bounds the ranges remembered; older ones are dropped (their
// gaps are then waited out).
const maxLostRanges = 32

// MarkLost records that moves from..to (inclusive) will never arrive: the
// client lost them before they reached the connection. A gap made only of
// such moves does not wait.
func (q *MoveQueue) MarkLost(from, to uint64) {
	if to < from || to <= q.last {
		return
	}
	from = max(from, q.last+1)
	if q.lost == nil {
		q.lost = new([]seqRange)
	}
	l := *q.lost
	i := len(l)
	for i > 0 && l[i-1].from > from {
		i--
	}
	l = slices.Insert(l, i, seqRange{from, to})
	if len(l) > maxLostRanges {
		l = l[len(l)-maxLostRanges:]
	}
	*q.lost = l
}

// PushBatch adds a connection's batch of moves (in sequence order, as
// actors/msg.Input carries them): lostBefore moves right before the first
// were lost at the client, and so was every move missing between two of
// the batch's (a batch is contiguous in the connection's stream).
func (q *MoveQueue) PushBatch(lostBefore uint64, moves []move.Move) int {
	if len(moves) == 1 && lostBefore == 0 {
		// A connection's usual batch at 30 Hz input: one new move, after
		// everything queued, within the room the queue has (trim keeps
		// some): written in place, without append's checks and its store of
		// the slice (≈ 92 → ≈ 55 instructions an input).
		m, n := &moves[0], len(q.q)
		if m.Seq > q.last && (n == 0 || q.q[n-1].Seq < m.Seq) && n < cap(q.q) && n < q.max() {
			q.q = q.q[:n+1]
			q.q[n] = *m
			if n >= int(q.peak) {
				q.peak = uint16(min(n+1, math.MaxUint16))
			}
			if sh := q.Shared; sh != nil {
				sh.Stats.Pushed++
			}
			return 1
		}
	}
	if len(moves) == 0 {
		return 0
	}
	first := moves[0].Seq
	if lostBefore > 0 && lostBefore < first {
		q.MarkLost(first-lostBefore, first-1)
	}
	inOrder := true
	for i := 1; i < len(moves); i++ {
		a, b := moves[i-1].Seq, moves[i].Seq
		if b > a+1 {
			q.MarkLost(a+1, b-1)
		}
		inOrder = inOrder && b > a
	}
	// The usual batch: new moves, in order, after everything queued, with
	// room for them all. Push would append each as its own in-order case;
	// appending them at once skips its per-move search and checks
	// (BenchmarkZoneTickCrowd's pushes: 132 → 104 instructions an input).
	n := len(q.q)
	if inOrder && first > q.last && (n == 0 || q.q[n-1].Seq < first) && n+len(moves) <= q.max() {
		//lint:ignore S1011 one or two moves: a loop, not append's memmove call
		for i := range moves {
			q.q = append(q.q, moves[i])
		}
		if n += len(moves); n > int(q.peak) {
			q.peak = uint16(min(n, math.MaxUint16))
		}
		if sh := q.Shared; sh != nil {
			sh.Stats.Pushed += uint64(len(moves))
		}
		return len(moves)
	}
	return q.Push(moves...)
}

// declaredLost reports whether every move from..to is in a lost range.
func (q *MoveQueue) declaredLost(from, to uint64) bool {
	if q.lost == nil {
		return false
	}
	for _, r := range *q.lost {
		if r.to < from {
			continue
		}
		if r.from > from {
			return false
		}
		if r.to >= to {
			return true
		}
		from = r.to + 1
	}
	return false
}

// QueueStats counts the moves of the queues that share it.
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
	q.last, q.q, q.gapSince = last, q.q[:0], noGap
	if q.lost != nil {
		*q.lost = (*q.lost)[:0]
	}
	q.peak, q.pops = 0, 0
	q.trim()
}

// keepRoom is the room (in moves, 96 B) a queue keeps however little it
// holds: a player's queue usually holds a move or two between ticks.
const keepRoom = 4

// trimEvery is the window, in moves handed out (about two seconds of a
// client's input at 30 Hz), whose peak trim sizes the room by.
const trimEvery = 64

// trim sizes the room by use: to twice the window's peak (at least
// keepRoom) once that peak used a quarter of it or less. A burst (a
// stalled zone, a client resending its window) grows the queue towards
// Max (256 moves, 6 KB), and appending doubles the room past every
// backlog; without this the room stayed with the player for good — 1.5 KB
// a player at 1,000 players on a loaded host with no trimming, and 0.5 KB
// while a queue only gave back room above 32 moves (a backlog of 9 to 32
// kept it). A queue that swings by many moves keeps its room: its peak
// stays above a quarter of it (no reallocation every swing).
func (q *MoveQueue) trim() {
	if c := cap(q.q); c > keepRoom && int(q.peak) <= c/4 {
		q.q = append(make([]move.Move, 0, max(2*int(q.peak), keepRoom)), q.q...)
	}
	q.peak, q.pops = uint16(len(q.q)), 0
}

// LastApplied returns the newest sequence handed out (or Reset to).
func (q *MoveQueue) LastApplied() uint64 { return q.last }

// Len returns how many moves are queued.
func (q *MoveQueue) Len() int { return len(q.q) }

// Queued returns the queued moves in sequence order (shared; do not
// modify), e.g. to carry them along in a handoff.
func (q *MoveQueue) Queued() []move.Move { return q.q }

// Stats returns the counters of the queues sharing q's Shared (zero
// without one).
func (q *MoveQueue) Stats() QueueStats {
	if q.Shared == nil {
		return QueueStats{}
	}
	return q.Shared.Stats
}

func (q *MoveQueue) max() int {
	if q.Shared != nil && q.Shared.Max > 0 {
		return q.Shared.Max
	}
	return 256
}

// Push adds moves (any order, duplicates allowed). It returns how many
// were new.
func (q *MoveQueue) Push(moves ...move.Move) int {
	added, dups, dropped := 0, 0, 0
	for _, m := range moves {
		if m.Seq <= q.last {
			dups++
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
				dups++
				continue
			}
		}
		if len(q.q) >= q.max() {
			dropped++
			continue
		}
		if i == len(q.q) { // in order: the usual case, no shift
			q.q = append(q.q, m)
			added++
			continue
		}
		q.q = append(q.q, move.Move{})
		copy(q.q[i+1:], q.q[i:])
		q.q[i] = m
		added++
	}
	if n := len(q.q); n > int(q.peak) {
		q.peak = uint16(min(n, math.MaxUint16))
	}
	if sh := q.Shared; sh != nil {
		sh.Stats.Pushed += uint64(len(moves))
		sh.Stats.Duplicates += uint64(dups)
		sh.Stats.Dropped += uint64(dropped)
	}
	return added
}

// Peek returns the next move if it is ready at time now (the one after
// LastApplied, or the first queued one once a gap has waited GapTimeout).
// It does not consume it.
func (q *MoveQueue) Peek(now time.Duration) (move.Move, bool) {
	if m := q.Next(now); m != nil {
		return *m, true
	}
	return move.Move{}, false
}

// Next is Peek by reference: the next move if it is ready at time now, in
// the queue (valid until the queue changes: Pop, Push, Reset), or nil.
func (q *MoveQueue) Next(now time.Duration) *move.Move {
	if len(q.q) == 0 {
		q.gapSince = noGap
		return nil
	}
	m := &q.q[0]
	if m.Seq == q.last+1 {
		q.gapSince = noGap
		return m
	}
	if q.declaredLost(q.last+1, m.Seq-1) {
		return m
	}
	if q.gapSince == noGap {
		q.gapSince = max(now, 1)
	}
	var timeout time.Duration
	if q.Shared != nil {
		timeout = q.Shared.GapTimeout
	}
	if timeout == 0 {
		timeout = DefaultGapTimeout
	}
	if now-q.gapSince >= timeout {
		return m
	}
	return nil
}

// Head is Next's usual case, inlined in the caller: the move after
// LastApplied if it is the queue's first (ready at any time), else nil
// (then ask Next). A zone's tick takes every player's moves so: Peek's
// call and its copy of the move (then 32 bytes) cost ≈ 60 instructions a move.
//
// It leaves gapSince as it was, where Next would close the gap: no gap
// can be open while the head is the move after LastApplied, nor open
// before Pop or Reset close it (a move pushed later is newer than the
// head), and gapSince is read only with a gap at the head.
func (q *MoveQueue) Head() *move.Move {
	if h := q.q; len(h) > 0 && h[0].Seq == q.last+1 {
		return &h[0]
	}
	return nil
}

// Pop consumes the move Peek returned.
func (q *MoveQueue) Pop() {
	if len(q.q) == 0 {
		return
	}
	seq := q.q[0].Seq // the move's sequence alone: a copy of it cost 5 instructions
	sh := q.Shared
	if seq > q.last+1 && sh != nil {
		sh.Stats.Lost += seq - q.last - 1
	}
	q.last = seq
	if q.lost != nil {
		l := *q.lost
		for len(l) > 0 && l[0].to <= q.last {
			l = l[1:]
		}
		*q.lost = l
	}
	if sh != nil {
		sh.Stats.Popped++
	}
	switch h := q.q; len(h) {
	case 1: // the usual last move of a tick: nothing to shift
		q.q = h[:0]
	case 2: // the other usual one (30 Hz input over 20 Hz ticks): one move to shift, not memmove's call (≈ 35 → ≈ 8 instructions)
		h[0] = h[1]
		q.q = h[:1]
	default:
		copy(h, h[1:])
		q.q = h[:len(h)-1]
	}
	q.gapSince = noGap
	if q.pops++; q.pops >= trimEvery {
		q.trim()
	}
}
