package udp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
)

// MaxDatagram is the largest datagram ghostwire sends or accepts. Anything
// larger is not ours (DESIGN.md §3: datagrams ≤ 1200 bytes); reading into
// buffers of this size truncates it and the gateway rejects it by length.
const MaxDatagram = 1200

// Message is one datagram in a batch. For reads, Buf is caller-owned storage
// (its full length is usable) and N/Addr are filled in; for writes, Buf[:N]
// is sent to Addr.
type Message struct {
	Buf  []byte
	N    int
	Addr netip.AddrPort
}

// Conn is a batched datagram socket. One goroutine may read while another
// writes; neither method is safe for concurrent use with itself.
type Conn interface {
	// ReadBatch blocks until at least one datagram arrives and fills up to
	// len(ms) messages, returning how many.
	ReadBatch(ms []Message) (int, error)
	// WriteBatch sends ms in order and returns how many were sent.
	WriteBatch(ms []Message) (int, error)
	LocalAddr() netip.AddrPort
	Close() error
}

// ErrClosed is returned by reads and writes on a closed Conn.
var ErrClosed = net.ErrClosed

// Listen opens a UDP socket on addr ("127.0.0.1:0", ":7777", "[::1]:7777").
// maxBatch bounds how many datagrams one ReadBatch/WriteBatch system call moves.
func Listen(ctx context.Context, addr string, maxBatch int) (*Socket, error) {
	if maxBatch < 1 {
		return nil, fmt.Errorf("udp: maxBatch %d < 1", maxBatch)
	}
	var lc net.ListenConfig
	pc, err := lc.ListenPacket(ctx, "udp", addr)
	if err != nil {
		return nil, fmt.Errorf("udp: listen %s: %w", addr, err)
	}
	uc, ok := pc.(*net.UDPConn)
	if !ok {
		pc.Close()
		return nil, errors.New("udp: listener is not a *net.UDPConn")
	}
	s, err := newSocket(uc, maxBatch)
	if err != nil {
		uc.Close()
		return nil, err
	}
	return s, nil
}

// LocalAddr is the bound address (with the port the kernel chose for ":0").
func (s *Socket) LocalAddr() netip.AddrPort {
	ap := s.uc.LocalAddr().(*net.UDPAddr).AddrPort()
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// Close closes the socket; a blocked ReadBatch returns ErrClosed.
func (s *Socket) Close() error { return s.uc.Close() }

// SetBuffers sizes the kernel's socket buffers; a busy gateway wants megabytes
// so a burst does not overflow between two batch reads.
func (s *Socket) SetBuffers(readBytes, writeBytes int) error {
	if err := s.uc.SetReadBuffer(readBytes); err != nil {
		return fmt.Errorf("udp: set read buffer: %w", err)
	}
	if err := s.uc.SetWriteBuffer(writeBytes); err != nil {
		return fmt.Errorf("udp: set write buffer: %w", err)
	}
	return nil
}

var _ Conn = (*Socket)(nil)
