package event

import (
	"sync"

	"github.com/ghostwire/ghostwire/replication/internal/freelist"
)

// ringPool recycles the smallest rings of streams and Senders that went
// idle: a connection sending an event a second or two holds a unit for a
// round trip (tens of milliseconds) and then nothing, so its rings are
// given back as soon as the last fate resolves them (Sender.releaseIdle)
// and taken again for the next event, and a server keeps rings for the
// connections with an event in flight, not for every connection (≈ 360
// bytes of each idle one). Shared by every Sender of the process; bounded:
// past maxPooledRings free rings of a kind the rest go to the garbage
// collector, and those beyond what the traffic takes decay
// (freelist.Use): a node that fell behind, where every connection held an
// echo's rings, gives them back once it has caught up. Larger rings (a
// burst's) are never pooled.
type ringPool[T any] struct {
	mu   sync.Mutex
	free [][]T
	use  freelist.Use
}

// maxPooledRings bounds each pool (≈ 460 KB for the largest kind, units).
const maxPooledRings = 1 << 12

// get returns a zeroed ring of length n.
func (p *ringPool[T]) get(n int) []T {
	p.mu.Lock()
	if k := len(p.free); k > 0 {
		r := p.free[k-1]
		p.free[k-1] = nil
		p.free = p.free[:k-1]
		if drop := p.use.Got(k - 1); drop > 0 {
			p.free = freelist.DropOldest(p.free, drop)
		}
		p.mu.Unlock()
		return r
	}
	p.use.Got(0)
	p.mu.Unlock()
	return make([]T, n)
}

// put gives back r, which get(n) returned (or make made with length and
// capacity n); the caller may not use it afterwards. r is cleared here:
// a unit's or pending event's payload slab must not stay reachable.
func (p *ringPool[T]) put(r []T, n int) {
	if len(r) != n || cap(r) != n {
		return // a grown ring: not ours to keep
	}
	clear(r)
	p.mu.Lock()
	if len(p.free) < maxPooledRings {
		p.free = append(p.free, r)
	}
	p.mu.Unlock()
}

var (
	// The per-stream state of idle streams (sendStream, laneRx), recycled
	// the way ringPool does their rings: a connection keeps it only while
	// the stream holds something. get returns one as put left it (new:
	// zero); the caller clears what it gives back (it must hold no payload:
	// a sendStream keeps its zero resend word).
	streamStructs = freelist.List[sendStream]{Max: maxPooledRings, Trim: true}
	laneStructs   = freelist.List[laneRx]{Max: maxPooledRings, Trim: true}

	pendRings  ringPool[pendEvent]
	unitRings  ringPool[unit]
	pktRings   ringPool[txPacket]
	entryRings ringPool[txEntry]
)
