package event

import "math/bits"

// Payload storage: power-of-two slabs from 16 B to 64 KiB, recycled through
// free lists, so the steady state allocates nothing (every size has been seen
// before). A slab holds at most twice its payload, and the free lists keep at
// most maxFree bytes; the rest is left to the garbage collector.
const (
	minSlabShift = 4
	numSlabClass = 17 - minSlabShift // 16 B .. 64 KiB
)

// The free lists are made on the first put and dropped by release: a
// connection that never queues an event keeps 8 bytes here, not 312.
type arena struct {
	free     *[numSlabClass][][]byte
	freeSize int // bytes held by the free lists
	maxFree  int
}

func slabClass(n int) int {
	if n <= 1<<minSlabShift {
		return 0
	}
	return bits.Len(uint(n-1)) - minSlabShift
}

// get returns a slice of length n (n ≤ MaxEventSizeLimit); nil for n = 0.
func (a *arena) get(n int) []byte {
	if n == 0 {
		return nil
	}
	c := slabClass(n)
	if a.free == nil {
		return make([]byte, n, 1<<(c+minSlabShift))
	}
	if l := a.free[c]; len(l) > 0 {
		b := l[len(l)-1]
		l[len(l)-1] = nil
		a.free[c] = l[:len(l)-1]
		a.freeSize -= cap(b)
		return b[:n]
	}
	return make([]byte, n, 1<<(c+minSlabShift))
}

// put recycles a slice that get returned.
func (a *arena) put(b []byte) {
	if cap(b) == 0 || a.freeSize+cap(b) > a.maxFree {
		return
	}
	c := slabClass(cap(b))
	if cap(b) != 1<<(c+minSlabShift) {
		return // not one of ours
	}
	if a.free == nil {
		a.free = new([numSlabClass][][]byte)
	}
	a.free[c] = append(a.free[c], b[:0])
	a.freeSize += cap(b)
}

// release drops the free lists and the slabs on them (to the collector).
func (a *arena) release() {
	a.free, a.freeSize = nil, 0
}
