package msg

import (
	"net/netip"
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
func (d *Datagram) Compact() *Datagram {
	var s *Datagram
	switch {
	case d.N <= TinyDatagram:
		s = tinyPool.Get().(*Datagram)
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
