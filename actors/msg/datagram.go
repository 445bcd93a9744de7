package msg

import (
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/ghostwire/ghostwire/actors/udp"
)

// Datagram is one UDP datagram in a reusable buffer: read by the gateway and
// handed to a connection, or a handshake reply handed to the gateway's
// writer. Pooled: NewDatagram / Release. Whoever holds it last (the
// connection after reading it, the writer after sending it) releases it.
type Datagram struct {
	// Buf is udp.MaxDatagram bytes (NewDatagram), or TinyDatagram,
	// MidDatagram, SmallDatagram or LargeDatagram bytes for a copy of a
	// received datagram that fits one (Compact).
	Buf  []byte
	N    int
	Addr netip.AddrPort // source (received) or destination (to send)
	At   time.Duration  // when it was read (node monotonic clock)
}

// SmallDatagram is the buffer of a compacted datagram. A client's packets
// (moves, acks, the odd event) are mostly under 200 bytes, and a datagram
// waits in its connection's queue while the shard is busy: a full-size
// buffer per waiting datagram made the queues of a server behind on its
// work 1.2 KB a datagram (up to MaxInbound per connection).
const SmallDatagram = 256

// TinyDatagram is the buffer of a compacted datagram that fits it, in the
// same object as its Datagram (tinyDatagram: 160 bytes, one allocation,
// where a SmallDatagram copy is 336 in two): most of a client's packets
// are moves and acks, 30 to 90 bytes, and what waits in the connections'
// queues of a server behind on its work is mostly those.
const TinyDatagram = 88

// MidDatagram is the same for a datagram of up to 184 bytes (midDatagram:
// 256 bytes in all): a client whose acks come late (a server behind on
// its work) repeats more of its moves in each packet.
const MidDatagram = 184

// LargeDatagram is the same for a datagram of up to 440 bytes
// (largeDatagram: 512 bytes in all, where a full-size buffer is 1.3 KB): a
// client whose acks stop coming (a server far behind) repeats up to its
// whole move window in each packet.
const LargeDatagram = 440

type tinyDatagram struct {
	d   Datagram
	buf [TinyDatagram]byte
}

type midDatagram struct {
	d   Datagram
	buf [MidDatagram]byte
}

type largeDatagram struct {
	d   Datagram
	buf [LargeDatagram]byte
}

var (
	datagramPool = sync.Pool{New: func() any { return &Datagram{Buf: make([]byte, udp.MaxDatagram)} }}
	smallPool    = sync.Pool{New: func() any { return &Datagram{Buf: make([]byte, SmallDatagram)} }}
	tinyPool     = sync.Pool{New: func() any { t := new(tinyDatagram); t.d.Buf = t.buf[:]; return &t.d }}
	midPool      = sync.Pool{New: func() any { t := new(midDatagram); t.d.Buf = t.buf[:]; return &t.d }}
	largePool    = sync.Pool{New: func() any { t := new(largeDatagram); t.d.Buf = t.buf[:]; return &t.d }}
)

// NewDatagram returns a full-size datagram from the pool (N = 0; Buf holds
// garbage).
func NewDatagram() *Datagram {
	d := datagramPool.Get().(*Datagram)
	d.N = 0
	return d
}

// Compact returns a copy of d in a TinyDatagram, MidDatagram,
// SmallDatagram or LargeDatagram buffer, the smallest it fits, or nil when
// it fits none. d is unchanged.
func (d *Datagram) Compact() *Datagram { return d.CompactWith(nil) }

// CompactWith is Compact with a TinyDatagram copy taken from c, the
// calling goroutine's cache (nil: the pool).
func (d *Datagram) CompactWith(c *DatagramCache) *Datagram {
	var s *Datagram
	switch {
	case d.N <= TinyDatagram:
		if c != nil {
			s = c.getTiny()
		} else {
			s = tinyPool.Get().(*Datagram)
		}
	case d.N <= MidDatagram:
		s = midPool.Get().(*Datagram)
	case d.N <= SmallDatagram:
		s = smallPool.Get().(*Datagram)
	case d.N <= LargeDatagram:
		s = largePool.Get().(*Datagram)
	default:
		return nil
	}
	s.N = copy(s.Buf, d.Buf[:d.N])
	s.Addr, s.At = d.Addr, d.At
	return s
}

// Bytes is the datagram's content, Buf[:N].
func (d *Datagram) Bytes() []byte { return d.Buf[:d.N] }

// Release returns d to its pool; d may not be used afterwards.
func (d *Datagram) Release() {
	switch len(d.Buf) {
	case TinyDatagram:
		tinyPool.Put(d)
	case MidDatagram:
		midPool.Put(d)
	case LargeDatagram:
		largePool.Put(d)
	case SmallDatagram:
		smallPool.Put(d)
	default:
		datagramPool.Put(d)
	}
}

// DatagramCache is one goroutine's stock of TinyDatagram copies — a
// client's moves and acks, nearly every datagram a server receives —
// taken (CompactWith) on one goroutine, the gateway's reader, and
// released (DatagramCache.Release) on another, a connection shard. Through
// the sync.Pool, each such pair was a Get and a Put on two processors: the
// Put fills the shard's per-P queue (poolDequeue.pushHead), the Get finds
// its own empty and steals from the other's tail, ≈ 120 instructions and
// a cache line bouncing between the cores a datagram. Here each goroutine
// takes and gives from a slice of its own, and whole magazines of
// cacheMag datagrams change hands through a depot, one lock each.
//
// Bounded: the depot keeps at most depotMags full magazines (256
// datagrams, 40 KB), a cache one magazine; what a full depot cannot take
// goes back to the pool. The zero DatagramCache is ready. Not safe for
// concurrent use: one goroutine's.
type DatagramCache struct {
	free []*Datagram
}

// cacheMag is the datagrams a magazine holds; depotMags the full
// magazines the depot keeps.
const (
	cacheMag  = 32
	depotMags = 8
)

// tinyDepot holds the full magazines between the caches, and empty ones
// to trade for them (each came with a full one taken: as many as full ones
// were taken, at most depotMags plus one a cache).
var tinyDepot struct {
	mu          sync.Mutex
	full, empty [][]*Datagram
}

// getTiny is a TinyDatagram from c, from a full magazine of the depot
// when c is out, or from the pool when the depot is too.
func (c *DatagramCache) getTiny() *Datagram {
	if len(c.free) == 0 {
		c.refill()
		if len(c.free) == 0 {
			return tinyPool.Get().(*Datagram)
		}
	}
	n := len(c.free) - 1
	d := c.free[n]
	c.free[n] = nil
	c.free = c.free[:n]
	return d
}

// refill trades c's empty magazine for a full one of the depot, if any.
func (c *DatagramCache) refill() {
	dp := &tinyDepot
	dp.mu.Lock()
	if n := len(dp.full); n > 0 {
		if c.free != nil {
			dp.empty = append(dp.empty, c.free[:0])
		}
		c.free = dp.full[n-1]
		dp.full[n-1] = nil
		dp.full = dp.full[:n-1]
	}
	dp.mu.Unlock()
}

// Release returns d (any Datagram) for reuse: a TinyDatagram to c, the
// rest to their pools (Datagram.Release). d may not be used afterwards.
func (c *DatagramCache) Release(d *Datagram) {
	if len(d.Buf) != TinyDatagram {
		d.Release()
		return
	}
	if len(c.free) == cacheMag {
		c.spill()
	}
	if c.free == nil {
		c.free = make([]*Datagram, 0, cacheMag)
	}
	c.free = append(c.free, d)
}

// spill hands c's full magazine to the depot and takes an empty one; a
// full depot leaves the magazine's datagrams to the pool.
func (c *DatagramCache) spill() {
	dp := &tinyDepot
	dp.mu.Lock()
	if len(dp.full) < depotMags {
		dp.full = append(dp.full, c.free)
		c.free = nil
		if n := len(dp.empty); n > 0 {
			c.free = dp.empty[n-1]
			dp.empty[n-1] = nil
			dp.empty = dp.empty[:n-1]
		}
		dp.mu.Unlock()
		return
	}
	dp.mu.Unlock()
	for i, d := range c.free {
		tinyPool.Put(d)
		c.free[i] = nil
	}
	c.free = c.free[:0]
}

// Len is the datagrams c holds (tests).
func (c *DatagramCache) Len() int { return len(c.free) }

// Holds reports whether c holds d (tests).
func (c *DatagramCache) Holds(d *Datagram) bool { return slices.Contains(c.free, d) }
