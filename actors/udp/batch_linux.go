//go:build linux

package udp

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Socket is a UDP socket with recvmmsg/sendmmsg batching.
//
// The two system calls are made with syscall.RawSyscall6 inside the
// socket's RawConn (the socket is non-blocking: EAGAIN parks the goroutine
// on the poller as any net read or write does). Not through
// golang.org/x/net's ipv4.PacketConn any more, whose plain Syscall6 tells
// the scheduler the thread may block: a sendmmsg of a few dozen datagrams
// to loopback runs 100–300 µs in the kernel (it delivers each one to the
// receiver's socket), long enough for sysmon to take the P away, start
// another thread for it and then, with a busy P seen in a system call,
// poll every 20 µs for the next millisecond. At 500 players that churn —
// sysmon's sleeps and the context switches around them — was ≈ 10 % of the
// server's CPU. A non-blocking socket call never sleeps, and the CPU it
// spends in the kernel is the work itself: there is nothing for another
// thread to take over.
type Socket struct {
	uc    *net.UDPConn
	rc    syscall.RawConn
	v6    bool // an AF_INET6 socket (IPv4 peers as v4-mapped addresses)
	local net.Addr
	r     *mmsgs // ReadBatch's scratch
	w     *Writer
}

// Writer sends batches on its Socket with its own scratch: every goroutine
// that sends at the same time as others uses its own Writer (sendmmsg
// itself is safe to call concurrently on one socket).
type Writer struct {
	s *Socket
	m *mmsgs
}

// mmsghdr is struct mmsghdr: a msghdr and the byte count the kernel
// fills in (its size rounds up to the msghdr's alignment, as in C).
type mmsghdr struct {
	hdr syscall.Msghdr
	n   uint32
}

// mmsgs is the scratch of one batched call: headers, one iovec and one
// address buffer per datagram, allocated once.
//
// call is the RawConn callback, made once (a closure made per call would
// be an allocation per batch): it moves hs[:n] and leaves the result in
// got and errno. waits counts the calls that found nothing to move
// (EAGAIN: the goroutine then parks on the poller until it may go on).
type mmsgs struct {
	hs    []mmsghdr
	iovs  []syscall.Iovec
	names []syscall.RawSockaddrInet6 // the larger of the two families
	n     int
	got   int
	errno syscall.Errno
	call  func(fd uintptr) bool
	waits atomic.Uint64
}

func newMmsgs(n int, trap uintptr) *mmsgs {
	m := &mmsgs{hs: make([]mmsghdr, n), iovs: make([]syscall.Iovec, n), names: make([]syscall.RawSockaddrInet6, n)}
	for i := range m.hs {
		m.hs[i].hdr.Iov = &m.iovs[i]
		m.hs[i].hdr.Iovlen = 1
	}
	m.call = func(fd uintptr) bool {
		m.got, m.errno = mmsg(trap, fd, m.hs[:m.n])
		if m.errno == syscall.EAGAIN {
			m.waits.Add(1)
			return false // wait on the poller and call again
		}
		return true
	}
	return m
}

// NewWriter returns a Writer moving up to maxBatch datagrams per sendmmsg.
func (s *Socket) NewWriter(maxBatch int) *Writer {
	return &Writer{s: s, m: newMmsgs(max(maxBatch, 1), unix.SYS_SENDMMSG)}
}

func newSocket(uc *net.UDPConn, maxBatch int) (*Socket, error) {
	s := &Socket{uc: uc, local: uc.LocalAddr()}
	s.v6 = uc.LocalAddr().(*net.UDPAddr).IP.To4() == nil
	rc, err := uc.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("udp: raw socket access: %w", err)
	}
	s.rc = rc
	s.r = newMmsgs(max(maxBatch, 1), unix.SYS_RECVMMSG)
	s.w = s.NewWriter(maxBatch)
	return s, nil
}

// ReadBatch reads up to min(len(ms), maxBatch) datagrams with one recvmmsg,
// waiting for the first.
func (s *Socket) ReadBatch(ms []Message) (int, error) {
	n := min(len(ms), len(s.r.hs))
	if n == 0 {
		return 0, nil
	}
	for i := 0; i < n; i++ {
		h := &s.r.hs[i]
		h.hdr.Name = (*byte)(unsafe.Pointer(&s.r.names[i]))
		h.hdr.Namelen = uint32(unsafe.Sizeof(s.r.names[i]))
		h.hdr.Flags, h.n = 0, 0
		setIov(&s.r.iovs[i], ms[i].Buf)
	}
	s.r.n = n
	err := s.rc.Read(s.r.call)
	got, errno := s.r.got, s.r.errno
	for i := 0; i < n; i++ {
		s.r.iovs[i].Base = nil // don't pin caller buffers
	}
	if err == nil && errno != 0 {
		err = os.NewSyscallError("recvmmsg", errno)
	}
	if err != nil {
		return 0, &net.OpError{Op: "read", Net: "udp", Source: s.local, Err: err}
	}
	for i := 0; i < got; i++ {
		ms[i].N = int(s.r.hs[i].n)
		ms[i].Addr = addrPortOf(&s.r.names[i])
	}
	return got, nil
}

// ReadWaits counts the times ReadBatch found the socket empty and waited
// for the poller: each is a wake-up of the reading goroutine (a recvmmsg
// that returned nothing, a park, a netpoll and a reschedule), so read
// batches ÷ waits is the batches a wake-up reads. Safe for concurrent use.
func (s *Socket) ReadWaits() uint64 { return s.r.waits.Load() }

// WriteBatch sends ms with as few sendmmsg calls as it takes. Not safe to
// call concurrently with itself (use a Writer per goroutine).
func (s *Socket) WriteBatch(ms []Message) (int, error) { return s.w.WriteBatch(ms) }

// WriteBatch sends ms with as few sendmmsg calls as it takes; on an error
// it returns how many went before the datagram the kernel refused.
func (w *Writer) WriteBatch(ms []Message) (int, error) {
	sent := 0
	for sent < len(ms) {
		n := min(len(ms)-sent, len(w.m.hs))
		for i := 0; i < n; i++ {
			m := &ms[sent+i]
			h := &w.m.hs[i]
			h.hdr.Name = (*byte)(unsafe.Pointer(&w.m.names[i]))
			h.hdr.Namelen = w.s.putAddr(&w.m.names[i], m.Addr)
			h.hdr.Flags, h.n = 0, 0
			setIov(&w.m.iovs[i], m.Buf[:m.N])
		}
		w.m.n = n
		err := w.s.rc.Write(w.m.call)
		got, errno := w.m.got, w.m.errno
		for i := 0; i < n; i++ {
			w.m.iovs[i].Base = nil
		}
		if err == nil && errno != 0 {
			err = os.NewSyscallError("sendmmsg", errno)
		}
		if err != nil {
			return sent, &net.OpError{Op: "write", Net: "udp", Source: w.s.local, Err: err}
		}
		sent += got
		if got == 0 {
			break
		}
	}
	return sent, nil
}

// mmsg makes one recvmmsg or sendmmsg call (retried on EINTR) and returns
// the datagrams moved, or the error with 0.
func mmsg(trap, fd uintptr, hs []mmsghdr) (int, syscall.Errno) {
	for {
		r, _, errno := syscall.RawSyscall6(trap, fd, uintptr(unsafe.Pointer(&hs[0])), uintptr(len(hs)), 0, 0, 0)
		if errno == syscall.EINTR {
			continue
		}
		if errno != 0 {
			return 0, errno
		}
		return int(r), 0
	}
}

func setIov(iov *syscall.Iovec, b []byte) {
	if len(b) == 0 {
		iov.Base = nil
		iov.SetLen(0)
		return
	}
	iov.Base = &b[0]
	iov.SetLen(len(b))
}

// putAddr writes ap as the socket's family's sockaddr and returns its
// length (0 for an IPv6 peer of an IPv4 socket: the kernel refuses the
// datagram, as it would any address it cannot reach from this socket).
func (s *Socket) putAddr(sa *syscall.RawSockaddrInet6, ap netip.AddrPort) uint32 {
	ip := ap.Addr()
	if !s.v6 {
		if !ip.Unmap().Is4() {
			return 0
		}
		sa4 := (*syscall.RawSockaddrInet4)(unsafe.Pointer(sa))
		*sa4 = syscall.RawSockaddrInet4{Family: syscall.AF_INET, Addr: ip.Unmap().As4()}
		putPort(&sa4.Port, ap.Port())
		return syscall.SizeofSockaddrInet4
	}
	*sa = syscall.RawSockaddrInet6{Family: syscall.AF_INET6, Addr: ip.As16()}
	putPort(&sa.Port, ap.Port())
	if z := ip.Zone(); z != "" {
		sa.Scope_id = zoneIndex(z)
	}
	return syscall.SizeofSockaddrInet6
}

// putPort stores port in network byte order.
func putPort(p *uint16, port uint16) {
	b := (*[2]byte)(unsafe.Pointer(p))
	b[0], b[1] = byte(port>>8), byte(port)
}

func getPort(p *uint16) uint16 {
	b := (*[2]byte)(unsafe.Pointer(p))
	return uint16(b[0])<<8 | uint16(b[1])
}

// addrPortOf reads the sockaddr recvmmsg filled in (IPv4-mapped addresses
// unmapped, as everywhere in ghostwire).
func addrPortOf(sa *syscall.RawSockaddrInet6) netip.AddrPort {
	switch sa.Family {
	case syscall.AF_INET:
		sa4 := (*syscall.RawSockaddrInet4)(unsafe.Pointer(sa))
		return netip.AddrPortFrom(netip.AddrFrom4(sa4.Addr), getPort(&sa4.Port))
	case syscall.AF_INET6:
		ip := netip.AddrFrom16(sa.Addr).Unmap()
		if sa.Scope_id != 0 && ip.Is6() {
			ip = ip.WithZone(zoneName(sa.Scope_id))
		}
		return netip.AddrPortFrom(ip, getPort(&sa.Port))
	}
	return netip.AddrPort{}
}

// zoneIndex and zoneName map an IPv6 zone to its interface index and back
// (link-local peers only; a number stands for itself).
func zoneIndex(z string) uint32 {
	if ifi, err := net.InterfaceByName(z); err == nil {
		return uint32(ifi.Index)
	}
	n, _ := strconv.ParseUint(z, 10, 32)
	return uint32(n)
}

func zoneName(i uint32) string {
	if ifi, err := net.InterfaceByIndex(int(i)); err == nil {
		return ifi.Name
	}
	return strconv.FormatUint(uint64(i), 10)
}
