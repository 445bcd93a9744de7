package event

import (
	"math/bits"
	"sync"
	"unsafe"

	"github.com/ghostwire/ghostwire/replication/internal/freelist"
)

// Payload storage: power-of-two slabs from 16 B to 64 KiB, recycled through
// free lists shared by every Sender and Receiver of the process, so the
// steady state allocates nothing (every size has been seen before) and a
// connection keeps no free slabs of its own: per connection they were the
// lists' 312 bytes and the slabs of its last burst, and most connections
// hold one or two events at a time. A slab holds at most twice its payload,
// and the free lists keep at most maxSharedFree bytes; the rest is left to
// the garbage collector; and the slabs of a class beyond what the traffic
// takes decay (freelist.Use), as the rings do.
const (
	minSlabShift  = 4
	numSlabClass  = 17 - minSlabShift // 16 B .. 64 KiB
	maxSharedFree = 4 << 20
)

// arena is a Sender's or Receiver's handle on the shared slabs (it holds
// nothing itself). Safe for concurrent use.
type arena struct{}

var slabs struct {
	mu   sync.Mutex
	free [numSlabClass][][]byte
	use  [numSlabClass]freelist.Use
	size int // bytes on the free lists
}

func slabClass(n int) int {
	if n <= 1<<minSlabShift {
		return 0
	}
	return bits.Len(uint(n-1)) - minSlabShift
}

// get returns a slice of length n (n ≤ MaxEventSizeLimit); nil for n = 0.
func (arena) get(n int) []byte {
	if n == 0 {
		return nil
	}
	c := slabClass(n)
	slabs.mu.Lock()
	if l := slabs.free[c]; len(l) > 0 {
		b := l[len(l)-1]
		l[len(l)-1] = nil
		slabs.free[c] = l[:len(l)-1]
		slabs.size -= cap(b)
		if drop := slabs.use[c].Got(len(l) - 1); drop > 0 {
			slabs.free[c] = freelist.DropOldest(slabs.free[c], drop)
			slabs.size -= cap(b) * drop // every slab of a class has its size
		}
		slabs.mu.Unlock()
		return b[:n]
	}
	slabs.use[c].Got(0)
	slabs.mu.Unlock()
	return make([]byte, n, 1<<(c+minSlabShift))
}

// putSlab recycles the slab get(size) returned, of which p is the first
// byte (unit and pendEvent keep a payload so); the caller may not use it
// afterwards.
func (a arena) putSlab(p *byte, size int32) {
	if size == 0 {
		return // get made none
	}
	c := slabClass(int(size))
	a.putClass(unsafe.Slice(p, 1<<(c+minSlabShift)), c)
}

// put recycles a slice that get returned; the caller may not use it
// afterwards.
func (a arena) put(b []byte) {
	if cap(b) == 0 {
		return
	}
	c := slabClass(cap(b))
	if cap(b) != 1<<(c+minSlabShift) {
		return // not one of ours
	}
	a.putClass(b, c)
}

// putClass puts b, a slab of class c, on its free list.
func (arena) putClass(b []byte, c int) {
	slabs.mu.Lock()
	if slabs.size+cap(b) <= maxSharedFree {
		slabs.free[c] = append(slabs.free[c], b[:0])
		slabs.size += cap(b)
	}
	slabs.mu.Unlock()
}
