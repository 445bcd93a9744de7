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
type List[T any] struct {
	Max  int
	mu   sync.Mutex
	free []*T
}

// Get returns a free buffer, or a new one.
func (l *List[T]) Get() *T {
	l.mu.Lock()
	if n := len(l.free); n > 0 {
		b := l.free[n-1]
		l.free[n-1] = nil // the list's spare capacity keeps nothing reachable
		l.free = l.free[:n-1]
		l.mu.Unlock()
		return b
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
