package swarm

import (
	"math"
	"sync/atomic"
	"time"
)

// truth is one bot's published trajectory, read by other bots' workers to
// judge their ghosts of it (view accuracy). The owning worker writes; any
// worker reads. Both rings are seqlock-style: an entry is valid when its key
// reads the same before and after its value, and keys only grow, so a
// reader sees either a whole entry or none — without a mutex on the hot path.
//
//   - pos: the bot's predicted position after move seq. move.Walk is
//     bit-deterministic, so unless the server corrected the bot this is
//     exactly the server's position after applying that move.
//   - acks: (server time, newest acknowledged move) each time the ack
//     advanced, server time in the swarm's normalised server clock (see
//     serverClock). It maps "server time T" to "moves applied by T".
type truth struct {
	session atomic.Uint64 // player id of the current session (0: none)
	pos     [truthLen]posEntry
	acks    [truthLen]ackEntry
	ackHead atomic.Uint64 // number of ack entries ever written
}

// truthLen entries: 8.5 s of moves at 30 Hz, 12 s of acks at 20 Hz. A ghost
// older than that is not judged (counted as "no truth").
const truthLen = 256

type posEntry struct {
	seq atomic.Uint64 // 0: invalid
	xz  atomic.Uint64 // float32 x | float32 z << 32
}

type ackEntry struct {
	n   atomic.Uint64 // write index + 1 (0: never written)
	at  atomic.Int64  // normalised server time, ns
	ack atomic.Uint64
}

// reset starts a new session: nothing published belongs to it yet.
func (t *truth) reset(pid uint64) {
	t.session.Store(0)
	for i := range t.pos {
		t.pos[i].seq.Store(0)
	}
	t.session.Store(pid)
}

// end marks the bot as having no session.
func (t *truth) end() { t.session.Store(0) }

// putPos publishes the position after move seq (seq ≥ 1).
func (t *truth) putPos(seq uint64, x, z float32) {
	e := &t.pos[seq%truthLen]
	e.seq.Store(0)
	e.xz.Store(uint64(math.Float32bits(x)) | uint64(math.Float32bits(z))<<32)
	e.seq.Store(seq)
}

// invalidate forgets the positions after move from (a correction made the
// predictions after it wrong) and those of the few moves before it.
func (t *truth) invalidate(from, to uint64) {
	lo := uint64(0)
	if from > 64 {
		lo = from - 64
	}
	for s := lo; s <= to && to-s < truthLen; s++ {
		e := &t.pos[s%truthLen]
		if e.seq.Load() == s {
			e.seq.Store(0)
		}
	}
}

// posAt returns the published position after move seq.
func (t *truth) posAt(seq uint64) (x, z float32, ok bool) {
	if seq == 0 {
		return 0, 0, false
	}
	e := &t.pos[seq%truthLen]
	if e.seq.Load() != seq {
		return 0, 0, false
	}
	xz := e.xz.Load()
	if e.seq.Load() != seq {
		return 0, 0, false
	}
	return math.Float32frombits(uint32(xz)), math.Float32frombits(uint32(xz >> 32)), true
}

// putAck publishes that by server time at the server had applied move ack.
// Times never go back (ackAt searches them): one before the previous entry's
// (a section stamp after an unstamped acknowledgement timed on arrival)
// takes the previous entry's.
func (t *truth) putAck(at time.Duration, ack uint64) {
	n := t.ackHead.Load()
	if n > 0 {
		at = max(at, time.Duration(t.acks[(n-1)%truthLen].at.Load()))
	}
	e := &t.acks[n%truthLen]
	e.n.Store(0)
	e.at.Store(int64(at))
	e.ack.Store(ack)
	e.n.Store(n + 1)
	t.ackHead.Store(n + 1)
}

// ackAt returns the newest acknowledged move published with a server time
// at or before at: the moves the server had applied by then, as far as this
// bot learned. ok is false when every entry it holds is later than at.
func (t *truth) ackAt(at time.Duration) (uint64, bool) {
	head := t.ackHead.Load()
	if head == 0 {
		return 0, false
	}
	lo := uint64(0)
	if head > truthLen {
		lo = head - truthLen + 1 // the oldest slot may be mid-overwrite
	}
	// Binary search over write indices [lo, head) for the last time ≤ at.
	read := func(i uint64) (int64, uint64, bool) {
		e := &t.acks[i%truthLen]
		if e.n.Load() != i+1 {
			return 0, 0, false
		}
		ts, a := e.at.Load(), e.ack.Load()
		if e.n.Load() != i+1 {
			return 0, 0, false
		}
		return ts, a, true
	}
	a, b := lo, head // invariant: entries < a are ≤ at (or a == lo), entries ≥ b are > at
	for a < b {
		m := a + (b-a)/2
		ts, _, ok := read(m)
		if !ok {
			return 0, false // overwritten under us: too old to judge
		}
		if ts <= int64(at) {
			a = m + 1
		} else {
			b = m
		}
	}
	if a == lo {
		return 0, false
	}
	_, ack, ok := read(a - 1)
	return ack, ok
}
