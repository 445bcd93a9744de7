//go:build !linux

package batchudp

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"time"
)

// Conn is a UDP socket; here, one datagram per system call.
type Conn struct{ uc *net.UDPConn }

// Listen opens a UDP socket on addr.
func Listen(addr string) (*Conn, error) {
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("batchudp: %w", err)
	}
	uc, err := net.ListenUDP("udp", ua)
	if err != nil {
		return nil, fmt.Errorf("batchudp: %w", err)
	}
	return &Conn{uc: uc}, nil
}

// DisableGRO does nothing: this platform has no UDP_GRO.
func (c *Conn) DisableGRO() {}

// NewConn wraps uc.
func NewConn(uc *net.UDPConn) *Conn { return &Conn{uc: uc} }

// SetGSO does nothing here.
func (c *Conn) SetGSO(bool) {}

// GSO is false here.
func (c *Conn) GSO() bool { return false }

// EnableGRO is not available here.
func EnableGRO(*net.UDPConn) bool { return false }

// GROSize: no control messages here.
func GROSize([]byte) int { return 0 }

// GRO is false here.
func (c *Conn) GRO() bool { return false }

// SetBuffers sizes the kernel's socket buffers.
func (c *Conn) SetBuffers(readBytes, writeBytes int) {
	_ = c.uc.SetReadBuffer(readBytes)
	_ = c.uc.SetWriteBuffer(writeBytes)
}

// LocalAddr is the bound address.
func (c *Conn) LocalAddr() netip.AddrPort { return addrPortOf(c.uc.LocalAddr()) }

// Close closes the socket.
func (c *Conn) Close() error { return c.uc.Close() }

// Batch holds one datagram here.
type Batch struct {
	bufs [][]byte
	lens []int
	seg  []int
	from []netip.AddrPort
	n    int
}

// NewBatch makes room for one datagram of up to size bytes (n is ignored
// here).
func NewBatch(_, size int) *Batch {
	if size <= 0 {
		size = 1 << 16
	}
	return &Batch{bufs: [][]byte{make([]byte, size)}, lens: make([]int, 1), seg: make([]int, 1), from: make([]netip.AddrPort, 1)}
}

// TryReadBatch reads one datagram if one is queued.
func (c *Conn) TryReadBatch(b *Batch) error {
	_ = c.uc.SetReadDeadline(time.Now())
	err := c.ReadBatch(b)
	_ = c.uc.SetReadDeadline(time.Time{})
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return nil
	}
	return err
}

// Len is how many datagrams the last read filled b with.
func (b *Batch) Len() int { return b.n }

// Msg returns datagram i and its source (never cut up here).
func (b *Batch) Msg(i int) (p []byte, seg int, from netip.AddrPort) {
	return b.bufs[i][:b.lens[i]], 0, b.from[i]
}

// ReadBatch blocks for one datagram.
func (c *Conn) ReadBatch(b *Batch) error {
	b.n = 0
	n, from, err := c.uc.ReadFromUDPAddrPort(b.bufs[0])
	if err != nil {
		b.n = 0
		return err
	}
	b.lens[0], b.from[0], b.n = n, netip.AddrPortFrom(from.Addr().Unmap(), from.Port()), 1
	return nil
}

type writerPlat struct{}

// NewWriter queues up to n datagrams between flushes.
func (c *Conn) NewWriter(n int) *Writer {
	n = max(n, 1)
	return &Writer{c: c, bufs: make([][MaxDatagram]byte, n), lens: make([]int, n), to: make([]netip.AddrPort, n)}
}

// Flush sends the queued datagrams one by one.
func (w *Writer) Flush() {
	for i := range w.n {
		if _, err := w.c.uc.WriteToUDPAddrPort(w.bufs[i][:w.lens[i]], w.to[i]); err != nil {
			w.Errs++
		}
	}
	w.n = 0
}
