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
	Buf  [udp.MaxDatagram]byte
	N    int
	Addr netip.AddrPort // source (received) or destination (to send)
	At   time.Duration  // when it was read (node monotonic clock)
}

var datagramPool = sync.Pool{New: func() any { return new(Datagram) }}

// NewDatagram returns a datagram from the pool (N = 0; Buf holds garbage).
func NewDatagram() *Datagram {
	d := datagramPool.Get().(*Datagram)
	d.N = 0
	return d
}

// Bytes is the datagram's content, Buf[:N].
func (d *Datagram) Bytes() []byte { return d.Buf[:d.N] }

// Release returns d to the pool; d may not be used afterwards.
func (d *Datagram) Release() { datagramPool.Put(d) }
