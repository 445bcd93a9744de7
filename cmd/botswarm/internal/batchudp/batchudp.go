package batchudp

import (
	"net"
	"net/netip"
)

// MaxDatagram is the largest single datagram a Writer slot holds
// (ghostwire's datagrams are ≤ 1200 bytes).
const MaxDatagram = 1500

// maxSuper bounds a super-datagram: a UDP payload is < 64 KiB.
const maxSuper = 60000

// maxSegments is the most datagrams one UDP_SEGMENT message carries (the
// kernel's UDP_MAX_SEGMENTS).
const maxSegments = 64

// ErrClosed is returned by reads on a closed Conn.
var ErrClosed = net.ErrClosed

func addrPortOf(a net.Addr) netip.AddrPort {
	ua, ok := a.(*net.UDPAddr)
	if !ok {
		return netip.AddrPort{}
	}
	ap := ua.AddrPort()
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// Each calls fn for every datagram the last ReadBatch filled b with, in
// arrival order, a super-datagram cut into its segments. p is valid only
// during the call.
func (b *Batch) Each(fn func(p []byte, from netip.AddrPort)) {
	for i := range b.n {
		p := b.bufs[i][:b.lens[i]]
		seg := b.seg[i]
		if seg <= 0 || seg >= len(p) {
			fn(p, b.from[i])
			continue
		}
		for len(p) > 0 {
			k := min(seg, len(p))
			fn(p[:k], b.from[i])
			p = p[k:]
		}
	}
}

// Datagrams is how many datagrams b holds (after cutting up).
func (b *Batch) Datagrams() int {
	n := 0
	for i := range b.n {
		if seg := b.seg[i]; seg > 0 && seg < b.lens[i] {
			n += (b.lens[i] + seg - 1) / seg
		} else {
			n++
		}
	}
	return n
}

// Writer queues datagrams and sends them in batches. Not safe for
// concurrent use; one goroutine owns it.
type Writer struct {
	c     *Conn
	bufs  [][MaxDatagram]byte
	lens  []int
	to    []netip.AddrPort
	n     int
	plat  writerPlat
	Errs  uint64 // datagrams a failed send dropped
	Super uint64 // super-datagrams sent (diagnostic)
}

// Slot is the next queued datagram's buffer, empty with room for
// MaxDatagram bytes: append to it and Commit what you built.
func (w *Writer) Slot() []byte { return w.bufs[w.n][:0] }

// Commit queues p (built in Slot's buffer, or any bytes: they are copied
// when they are not) for to, and flushes when the queue is full.
func (w *Writer) Commit(p []byte, to netip.AddrPort) {
	if len(p) == 0 || len(p) > MaxDatagram {
		return
	}
	if &p[0] != &w.bufs[w.n][0] {
		copy(w.bufs[w.n][:], p)
	}
	w.lens[w.n], w.to[w.n] = len(p), to
	w.n++
	if w.n == len(w.bufs) {
		w.Flush()
	}
}

// Queued is how many datagrams wait for the next Flush.
func (w *Writer) Queued() int { return w.n }
