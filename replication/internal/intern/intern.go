// Package intern keeps one shared, read-only copy of equal values, so that
// thousands of connections holding the same configuration point at one
// copy instead of carrying their own (issue 13: bytes per player).
package intern

import "sync"

// Max bounds a Table: a process has a handful of distinct configurations,
// and a caller that makes more (a bug, or values built from input) gets
// private copies instead of growing the table without end.
const Max = 64

// Table interns values of T. The zero Table is ready to use and safe for
// concurrent use. The values it returns must not be written to.
type Table[T comparable] struct {
	mu sync.Mutex
	m  map[T]*T
}

// Get returns the shared copy of v, or a private one once the table holds
// Max values.
func (t *Table[T]) Get(v T) *T {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p := t.m[v]; p != nil {
		return p
	}
	p := new(T)
	*p = v
	if len(t.m) < Max {
		if t.m == nil {
			t.m = make(map[T]*T)
		}
		t.m[v] = p
	}
	return p
}
