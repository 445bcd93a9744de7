//go:build linux

package udp

import (
	"net"
	"net/netip"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// Socket is a UDP socket with recvmmsg/sendmmsg batching.
type Socket struct {
	uc *net.UDPConn
	// batcher is ipv4 or ipv6 PacketConn; both move []ipv4.Message (the
	// same x/net socket.Message type).
	read  func([]ipv4.Message, int) (int, error)
	write func([]ipv4.Message, int) (int, error)
	rmsgs []ipv4.Message
	w     *Writer // WriteBatch's
}

// Writer sends batches on its Socket with its own scratch: every goroutine
// that sends at the same time as others uses its own Writer (sendmmsg
// itself is safe to call concurrently on one socket).
type Writer struct {
	write func([]ipv4.Message, int) (int, error)
	wmsgs []ipv4.Message
	waddr []net.UDPAddr
}

// NewWriter returns a Writer moving up to maxBatch datagrams per sendmmsg.
func (s *Socket) NewWriter(maxBatch int) *Writer {
	w := &Writer{write: s.write, wmsgs: make([]ipv4.Message, max(maxBatch, 1)), waddr: make([]net.UDPAddr, max(maxBatch, 1))}
	for i := range w.wmsgs {
		w.wmsgs[i].Buffers = make([][]byte, 1)
	}
	return w
}

func newSocket(uc *net.UDPConn, maxBatch int) *Socket {
	s := &Socket{uc: uc}
	if uc.LocalAddr().(*net.UDPAddr).IP.To4() != nil {
		pc := ipv4.NewPacketConn(uc)
		s.read, s.write = pc.ReadBatch, pc.WriteBatch
	} else {
		pc := ipv6.NewPacketConn(uc)
		s.read, s.write = pc.ReadBatch, pc.WriteBatch
	}
	s.rmsgs = make([]ipv4.Message, maxBatch)
	for i := range s.rmsgs {
		s.rmsgs[i].Buffers = make([][]byte, 1)
	}
	s.w = s.NewWriter(maxBatch)
	return s
}

// ReadBatch reads up to min(len(ms), maxBatch) datagrams with one recvmmsg.
func (s *Socket) ReadBatch(ms []Message) (int, error) {
	n := min(len(ms), len(s.rmsgs))
	for i := 0; i < n; i++ {
		s.rmsgs[i].Buffers[0] = ms[i].Buf
		s.rmsgs[i].N = 0
	}
	got, err := s.read(s.rmsgs[:n], 0)
	for i := 0; i < got; i++ {
		ms[i].N = s.rmsgs[i].N
		ms[i].Addr = addrPortOf(s.rmsgs[i].Addr)
		s.rmsgs[i].Buffers[0] = nil // don't pin caller buffers
	}
	return got, err
}

// WriteBatch sends ms with as few sendmmsg calls as it takes. Not safe to
// call concurrently with itself (use a Writer per goroutine).
func (s *Socket) WriteBatch(ms []Message) (int, error) { return s.w.WriteBatch(ms) }

// WriteBatch sends ms with as few sendmmsg calls as it takes.
func (s *Writer) WriteBatch(ms []Message) (int, error) {
	sent := 0
	for sent < len(ms) {
		n := min(len(ms)-sent, len(s.wmsgs))
		for i := 0; i < n; i++ {
			m := &ms[sent+i]
			s.wmsgs[i].Buffers[0] = m.Buf[:m.N]
			ua := &s.waddr[i]
			ua.IP = ua.IP[:0]
			ip := m.Addr.Addr()
			if ip.Is4() {
				a := ip.As4()
				ua.IP = append(ua.IP, a[:]...)
			} else {
				a := ip.As16()
				ua.IP = append(ua.IP, a[:]...)
			}
			ua.Port = int(m.Addr.Port())
			ua.Zone = ip.Zone()
			s.wmsgs[i].Addr = ua
		}
		got, err := s.write(s.wmsgs[:n], 0)
		for i := 0; i < n; i++ {
			s.wmsgs[i].Buffers[0] = nil
		}
		sent += got
		if err != nil {
			return sent, err
		}
		if got == 0 {
			break
		}
	}
	return sent, nil
}

func addrPortOf(a net.Addr) netip.AddrPort {
	ua, ok := a.(*net.UDPAddr)
	if !ok {
		return netip.AddrPort{}
	}
	ap := ua.AddrPort()
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}
