//go:build !linux

package udp

import (
	"net"
	"net/netip"
)

// Socket is a UDP socket; outside Linux it moves one datagram per system call.
type Socket struct {
	uc *net.UDPConn
}

func newSocket(uc *net.UDPConn, _ int) (*Socket, error) { return &Socket{uc: uc}, nil }

// ReadBatch reads one datagram (blocking) into ms[0].
func (s *Socket) ReadBatch(ms []Message) (int, error) {
	if len(ms) == 0 {
		return 0, nil
	}
	n, ap, err := s.uc.ReadFromUDPAddrPort(ms[0].Buf)
	if err != nil {
		return 0, err
	}
	ms[0].N = n
	ms[0].Addr = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	return 1, nil
}

// ReadWaits is 0 outside Linux: reads block in the runtime's poller
// without a count of the waits.
func (s *Socket) ReadWaits() uint64 { return 0 }

// WriteBatch sends each message with its own system call.
func (s *Socket) WriteBatch(ms []Message) (int, error) {
	for i := range ms {
		if _, err := s.uc.WriteToUDPAddrPort(ms[i].Buf[:ms[i].N], ms[i].Addr); err != nil {
			return i, err
		}
	}
	return len(ms), nil
}

// Writer sends on its Socket; outside Linux, one datagram per system call.
type Writer struct{ s *Socket }

// NewWriter returns a Writer for s.
func (s *Socket) NewWriter(int) *Writer { return &Writer{s: s} }

// WriteBatch sends each message with its own system call.
func (w *Writer) WriteBatch(ms []Message) (int, error) { return w.s.WriteBatch(ms) }
