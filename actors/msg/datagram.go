package msg

import (
	"net/netip"
	"slices"
	"sync"
	"time"
	"unsafe"

	"github.com/ghostwire/ghostwire/actors/udp"
	"github.com/ghostwire/ghostwire/replication/prefetch"
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
// same object as its Datagram (tinyDatagram: 128 bytes, one allocation
// of a size class that starts on a cache line, so two lines): nearly all
// of a client's packets are a move and an ack, 36 bytes, or an ack
// alone, 19, and up to 59 with seven in eight of the server's packets
// lost (the client repeats its unacked moves). The reader writes each
// copy's lines and the shard reads them, on two cores: in the 160-byte
// object of ShortDatagram a copy spanned three lines every other object.
const TinyDatagram = 56

// ShortDatagram is the same for a datagram of up to 88 bytes
// (shortDatagram: 160 bytes in all): a client far behind on its acks.
const ShortDatagram = 88

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

type shortDatagram struct {
	d   Datagram
	buf [ShortDatagram]byte
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
	shortPool    = sync.Pool{New: func() any { t := new(shortDatagram); t.d.Buf = t.buf[:]; return &t.d }}
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

// Compact returns a copy of d in a TinyDatagram, ShortDatagram,
// MidDatagram, SmallDatagram or LargeDatagram buffer, the smallest it
// fits, or nil when it fits none. d is unchanged.
func (d *Datagram) Compact() *Datagram { return d.CompactWith(nil) }

// CompactWith is Compact with a TinyDatagram or ShortDatagram copy taken
// from c, the calling goroutine's cache (nil: the pool).
func (d *Datagram) CompactWith(c *DatagramCache) *Datagram {
	var s *Datagram
	switch {
	case d.N <= TinyDatagram:
		if c == nil {
			s = tinyPool.Get().(*Datagram)
		} else {
			if s = c.tiny.get(); s == nil {
				s = c.tiny.getSlow(&tinyDepot)
			}
			c.tiny.prefetchNext(unsafe.Sizeof(tinyDatagram{}))
		}
	case d.N <= ShortDatagram:
		if c == nil {
			s = shortPool.Get().(*Datagram)
		} else {
			if s = c.short.get(); s == nil {
				s = c.short.getSlow(&shortDepot)
			}
			c.short.prefetchNext(unsafe.Sizeof(shortDatagram{}))
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
	switch n := len(d.Buf); {
	case n > LargeDatagram: // first: the full-size buffers the reader reads into and the shards send from
		datagramPool.Put(d)
	case n == TinyDatagram:
		tinyPool.Put(d)
	case n == ShortDatagram:
		shortPool.Put(d)
	case n == MidDatagram:
		midPool.Put(d)
	case n == LargeDatagram:
		largePool.Put(d)
	case n == SmallDatagram:
		smallPool.Put(d)
	default:
		datagramPool.Put(d)
	}
}

// DatagramCache is one goroutine's stock of TinyDatagram and
// ShortDatagram copies — a client's moves and acks, nearly every datagram
// a server receives — taken (CompactWith) on one goroutine, the gateway's
// reader, and released (DatagramCache.Release) on another, a connection
// shard. Through the sync.Pool, each such pair was a Get and a Put on two
// processors: the Put fills the shard's per-P queue (poolDequeue.pushHead),
// the Get finds its own empty and steals from the other's tail, ≈ 120
// instructions and a cache line bouncing between the cores a datagram.
// Here each goroutine takes and gives from a slice of its own per size,
// and whole magazines of cacheMag datagrams change hands through a depot
// per size, one lock each.
//
// Bounded: a depot keeps at most depotMags full magazines (256
// datagrams: 32 KB of tiny ones, 40 KB of short), a cache one magazine a
// size; what a full depot cannot take goes back to the pool. The zero
// DatagramCache is ready. Not safe for concurrent use: one goroutine's.
type DatagramCache struct {
	tiny, short stock
}

// stock is a DatagramCache's datagrams of one size: a magazine, filled
// from and spilled to that size's depot.
type stock struct {
	free []*Datagram
}

// cacheMag is the datagrams a magazine holds; depotMags the full
// magazines a depot keeps.
const (
	cacheMag  = 32
	depotMags = 8
)

// depot holds one size's full magazines between the caches, and empty
// ones to trade for them (each came with a full one taken: as many as
// full ones were taken, at most depotMags plus one a cache).
type depot struct {
	mu          sync.Mutex
	full, empty [][]*Datagram
	pool        *sync.Pool
}

var (
	tinyDepot  = depot{pool: &tinyPool}
	shortDepot = depot{pool: &shortPool}
)

// get is a datagram from s's magazine, nil when it is empty (getSlow
// then). Inlined, as put: every datagram the reader routes is copied
// into one, and every one its shard handled comes back.
func (s *stock) get() *Datagram {
	n := len(s.free) - 1
	if n < 0 {
		return nil
	}
	d := s.free[n]
	s.free = s.free[:n] // the slot keeps d's pointer until refilled: a magazine's, bounded
	return d
}

// prefetchNext asks for the datagram the magazine hands out next (size
// bytes: its header and buffer, one allocation), which the next copy
// writes: a datagram's lines have left the caches between its release by
// a shard and its reuse on a loaded node (the copy's first store, 1.2 %
// of a 2,000-player node's samples). A hint; the magazine is the calling
// goroutine's own, so reading it races nothing.
func (s *stock) prefetchNext(size uintptr) {
	if n := len(s.free); n > 0 {
		prefetch.Lines(unsafe.Pointer(s.free[n-1]), size)
	}
}

// getSlow is a datagram from a full magazine of dp, s's being empty, or
// from the pool when dp has none either.
func (s *stock) getSlow(dp *depot) *Datagram {
	s.refill(dp)
	if d := s.get(); d != nil {
		return d
	}
	return dp.pool.Get().(*Datagram)
}

// refill trades s's empty magazine for a full one of dp, if any.
func (s *stock) refill(dp *depot) {
	dp.mu.Lock()
	if n := len(dp.full); n > 0 {
		if s.free != nil {
			dp.empty = append(dp.empty, s.free[:0])
		}
		s.free = dp.full[n-1]
		dp.full[n-1] = nil
		dp.full = dp.full[:n-1]
	}
	dp.mu.Unlock()
}

// Release returns d (any Datagram) for reuse: a TinyDatagram or
// ShortDatagram to c, the rest to their pools (Datagram.Release). d may
// not be used afterwards.
func (c *DatagramCache) Release(d *Datagram) {
	switch len(d.Buf) {
	case TinyDatagram:
		if !c.tiny.put(d) {
			c.tiny.putSlow(d, &tinyDepot)
		}
	case ShortDatagram:
		if !c.short.put(d) {
			c.short.putSlow(d, &shortDepot)
		}
	default:
		d.Release()
	}
}

// put keeps d in s's magazine if it has room (putSlow if not).
func (s *stock) put(d *Datagram) bool {
	n := len(s.free)
	if n == cap(s.free) { // cap is cacheMag; a nil stock has none
		return false
	}
	s.free = s.free[:n+1]
	s.free[n] = d
	return true
}

// putSlow keeps d in s, spilling s's full magazine to dp first.
func (s *stock) putSlow(d *Datagram, dp *depot) {
	if len(s.free) == cacheMag {
		s.spill(dp)
	}
	if s.free == nil {
		s.free = make([]*Datagram, 0, cacheMag)
	}
	s.free = append(s.free, d)
}

// spill hands s's full magazine to dp and takes an empty one; a full
// depot leaves the magazine's datagrams to the pool.
func (s *stock) spill(dp *depot) {
	dp.mu.Lock()
	if len(dp.full) < depotMags {
		dp.full = append(dp.full, s.free)
		s.free = nil
		if n := len(dp.empty); n > 0 {
			s.free = dp.empty[n-1]
			dp.empty[n-1] = nil
			dp.empty = dp.empty[:n-1]
		}
		dp.mu.Unlock()
		return
	}
	dp.mu.Unlock()
	for i, d := range s.free {
		dp.pool.Put(d)
		s.free[i] = nil
	}
	s.free = s.free[:0]
}

// Len is the datagrams c holds (tests).
func (c *DatagramCache) Len() int { return len(c.tiny.free) + len(c.short.free) }

// Holds reports whether c holds d (tests).
func (c *DatagramCache) Holds(d *Datagram) bool {
	return slices.Contains(c.tiny.free, d) || slices.Contains(c.short.free, d)
}
