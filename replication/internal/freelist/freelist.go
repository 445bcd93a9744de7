// Package freelist is a free list of fixed-size buffers shared by every
// connection of a process: as many buffers as were ever in use at once
// (one per busy goroutine), where a buffer per connection would cost every
// idle one its size. Unlike a sync.Pool it is never emptied by a garbage
// collection, so a steady state allocates nothing.
package freelist

import "sync"

// List holds free *T. The zero List is ready to use and keeps every
// buffer given back; Max > 0 bounds it (past Max free buffers the rest go
// to the garbage collector), for a list a peer's behaviour can grow.
// Trim sizes it by use (Trim), for a list of state that traffic holds
// for a while, where a burst's buffers would otherwise stay for good.
type List[T any] struct {
	Max  int
	Trim bool
	mu   sync.Mutex
	free []*T
	use  Use
}

// Get returns a free buffer, or a new one.
func (l *List[T]) Get() *T {
	l.mu.Lock()
	if n := len(l.free); n > 0 {
		b := l.free[n-1]
		l.free[n-1] = nil // the list's spare capacity keeps nothing reachable
		l.free = l.free[:n-1]
		if l.Trim {
			if drop := l.use.Got(n - 1); drop > 0 {
				l.free = DropOldest(l.free, drop)
			}
		}
		l.mu.Unlock()
		return b
	}
	if l.Trim {
		l.use.Got(0)
	}
	l.mu.Unlock()
	return new(T)
}

// Put gives b back; b must not be used afterwards.
func (l *List[T]) Put(b *T) {
	l.mu.Lock()
	if l.Max <= 0 || len(l.free) < l.Max {
		l.free = append(l.free, b)
	}
	l.mu.Unlock()
}

// Reset drops every free buffer to the garbage collector: a test that
// counts a heap's bytes starts from an empty list, not from whatever the
// tests before it (in any order) gave back.
func (l *List[T]) Reset() {
	l.mu.Lock()
	l.free = nil
	l.mu.Unlock()
}

// Use sizes a free list by use: of the buffers that lay free through a
// whole period (TrimPeriod Gets), untouched by any Get, half go at its
// end. A list's buffers beyond what its traffic takes (a burst's, or a
// node's that fell behind and caught up: every connection held an echo's
// state then) decay in a few periods, while a steady flow, whose every
// period takes the same buffers, keeps them all and allocates nothing.
// The zero Use is ready to use.
type Use struct {
	low  int // the fewest free since the period began
	gets int // Gets in this period
}

// TrimPeriod is Use's period in Gets: at 2,000 connections each with an
// echo a second, about half a second.
const TrimPeriod = 1024

// Got notes a Get that left free buffers free, and returns how many of
// the oldest (the bottom of the stack, which the period's Gets did not
// reach) to drop now: none but at a period's end.
func (u *Use) Got(free int) int {
	u.low = min(u.low, free)
	if u.gets++; u.gets < TrimPeriod {
		return 0
	}
	drop := u.low / 2
	u.low, u.gets = free-drop, 0
	return drop
}

// minTrimCap is the room a trimmed list always keeps (a copy to a smaller
// array below it would save less than the array's header).
const minTrimCap = 16

// DropOldest drops the k first (oldest) of free, moving the rest down and
// clearing what they leave so it keeps nothing reachable, and gives the
// array back for a smaller one once a quarter of it is in use. Not
// inlined: it runs once a period, and its copies inlined into every Get
// made the Gets' code longer for nothing.
//
//go:noinline
func DropOldest[E any](free []E, k int) []E {
	n := copy(free, free[k:])
	clear(free[n:])
	free = free[:n]
	if c := cap(free); c > minTrimCap && n <= c/4 {
		free = append(make([]E, 0, max(2*n, minTrimCap)), free...)
	}
	return free
}
