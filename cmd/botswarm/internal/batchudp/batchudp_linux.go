//go:build linux

package batchudp

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"unsafe"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
	"golang.org/x/sys/unix"
)

// Conn is a UDP socket moving batches. One goroutine may read while
// another writes.
type Conn struct {
	uc    *net.UDPConn
	rc    syscall.RawConn
	write func([]ipv4.Message, int) (int, error)
	gro   bool
	gso   bool
}

// Listen opens a UDP socket on addr with UDP_GRO on where the kernel has it.
func Listen(addr string) (*Conn, error) {
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("batchudp: %w", err)
	}
	uc, err := net.ListenUDP("udp", ua)
	if err != nil {
		return nil, fmt.Errorf("batchudp: %w", err)
	}
	c := NewConn(uc)
	c.gro = EnableGRO(uc)
	return c, nil
}

// NewConn batches on uc as it is (UDP_GRO as the caller set it; a read
// cuts up super-datagrams only when the kernel says it sent one).
func NewConn(uc *net.UDPConn) *Conn {
	c := &Conn{uc: uc, gso: true}
	c.rc, _ = uc.SyscallConn()
	if uc.LocalAddr().(*net.UDPAddr).IP.To4() != nil {
		c.write = ipv4.NewPacketConn(uc).WriteBatch
	} else {
		c.write = ipv6.NewPacketConn(uc).WriteBatch
	}
	return c
}

// SetGSO turns UDP_SEGMENT groups on or off (on by default; off for good
// once the kernel refuses one).
func (c *Conn) SetGSO(on bool) { c.gso = on }

// GSO reports whether flushes still group datagrams.
func (c *Conn) GSO() bool { return c.gso }

// EnableGRO turns UDP_GRO on for uc; false when the kernel refuses.
func EnableGRO(uc *net.UDPConn) bool {
	rc, err := uc.SyscallConn()
	if err != nil {
		return false
	}
	ok := false
	_ = rc.Control(func(fd uintptr) {
		ok = unix.SetsockoptInt(int(fd), unix.IPPROTO_UDP, unix.UDP_GRO, 1) == nil
	})
	return ok
}

// DisableGRO turns UDP_GRO off again: the kernel then cuts a sender's
// UDP_SEGMENT super-datagrams up before queueing them, in the sender's
// context on loopback — as for a receiver that never asked for GRO.
func (c *Conn) DisableGRO() {
	_ = c.rc.Control(func(fd uintptr) {
		_ = unix.SetsockoptInt(int(fd), unix.IPPROTO_UDP, unix.UDP_GRO, 0)
	})
	c.gro = false
}

// GRO reports whether reads may return super-datagrams.
func (c *Conn) GRO() bool { return c.gro }

// SetBuffers sizes the kernel's socket buffers (past the sysctl limits
// when the process may).
func (c *Conn) SetBuffers(readBytes, writeBytes int) {
	_ = c.uc.SetReadBuffer(readBytes)
	_ = c.uc.SetWriteBuffer(writeBytes)
	if rc, err := c.uc.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) {
			_ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, readBytes)
			_ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, writeBytes)
		})
	}
}

// LocalAddr is the bound address.
func (c *Conn) LocalAddr() netip.AddrPort { return addrPortOf(c.uc.LocalAddr()) }

// Close closes the socket; a blocked ReadBatch returns an error.
func (c *Conn) Close() error { return c.uc.Close() }

// Batch is a recvmmsg's worth of storage, read with recvmmsg(2) directly:
// x/net's ReadBatch allocates a source address per message and an error
// for every read that finds nothing, garbage at every turn of a busy
// reader. Not safe for concurrent use.
type Batch struct {
	hdrs  []mmsghdr
	iovs  []unix.Iovec
	names []unix.RawSockaddrInet6 // room for either family
	bufs  [][]byte
	oob   [][]byte
	lens  []int
	seg   []int
	from  []netip.AddrPort
	n     int
	// The read in progress, for fn (bound once: a closure made per read
	// would be garbage too).
	flags int
	got   int
	errno unix.Errno
	fn    func(fd uintptr) bool
}

// mmsghdr is struct mmsghdr: Go's rounding of the size to the alignment
// gives the C layout on 32- and 64-bit alike.
type mmsghdr struct {
	hdr unix.Msghdr
	len uint32
}

// NewBatch makes room for n messages of up to size bytes each (a
// super-datagram needs 64 KiB; 0 means that).
func NewBatch(n, size int) *Batch {
	if size <= 0 {
		size = 1 << 16
	}
	b := &Batch{hdrs: make([]mmsghdr, n), iovs: make([]unix.Iovec, n), names: make([]unix.RawSockaddrInet6, n),
		bufs: make([][]byte, n), oob: make([][]byte, n),
		lens: make([]int, n), seg: make([]int, n), from: make([]netip.AddrPort, n)}
	for i := range n {
		b.bufs[i] = make([]byte, size)
		b.oob[i] = make([]byte, unix.CmsgSpace(4)*2)
		b.iovs[i].Base = &b.bufs[i][0]
		b.iovs[i].SetLen(size)
		h := &b.hdrs[i].hdr
		h.Name = (*byte)(unsafe.Pointer(&b.names[i]))
		h.Iov = &b.iovs[i]
		h.SetIovlen(1)
		h.Control = &b.oob[i][0]
	}
	b.fn = func(fd uintptr) bool {
		for i := range b.hdrs {
			b.hdrs[i].hdr.Namelen = unix.SizeofSockaddrInet6
			b.hdrs[i].hdr.SetControllen(len(b.oob[i]))
			b.hdrs[i].hdr.Flags = 0
			b.hdrs[i].len = 0
		}
		r, _, e := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&b.hdrs[0])), uintptr(len(b.hdrs)), uintptr(b.flags), 0, 0)
		if e == unix.EAGAIN && b.flags&unix.MSG_DONTWAIT == 0 {
			return false // nothing yet: wait in the runtime's poller
		}
		b.got, b.errno = int(r), e
		if e != 0 {
			b.got = 0
		}
		return true
	}
	return b
}

// ReadBatch blocks until at least one datagram arrives (or the read
// deadline passes) and fills b.
func (c *Conn) ReadBatch(b *Batch) error { return c.readBatch(b, 0) }

// TryReadBatch fills b with what is queued, without waiting: b.Len() is 0
// when nothing was.
func (c *Conn) TryReadBatch(b *Batch) error { return c.readBatch(b, unix.MSG_DONTWAIT) }

func (c *Conn) readBatch(b *Batch, flags int) error {
	b.n, b.flags = 0, flags
	if err := c.rc.Read(b.fn); err != nil {
		return err
	}
	if b.errno != 0 {
		if b.errno == unix.EAGAIN || b.errno == unix.EINTR {
			return nil
		}
		return b.errno
	}
	for i := range b.got {
		h := &b.hdrs[i]
		b.lens[i] = min(int(h.len), len(b.bufs[i]))
		b.seg[i] = groSize(b.oob[i][:h.hdr.Controllen])
		b.from[i] = sockaddrAddrPort(&b.names[i])
	}
	b.n = b.got
	return nil
}

// Len is how many messages the last read filled b with.
func (b *Batch) Len() int { return b.n }

// Msg returns message i: its bytes, the segment size when it is a
// super-datagram to cut up (0: one datagram) and its source.
func (b *Batch) Msg(i int) (p []byte, seg int, from netip.AddrPort) {
	return b.bufs[i][:b.lens[i]], b.seg[i], b.from[i]
}

func sockaddrAddrPort(sa *unix.RawSockaddrInet6) netip.AddrPort {
	pb := (*[2]byte)(unsafe.Pointer(&sa.Port)) // network order
	port := uint16(pb[0])<<8 | uint16(pb[1])
	switch sa.Family {
	case unix.AF_INET:
		sa4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		return netip.AddrPortFrom(netip.AddrFrom4(sa4.Addr), port)
	case unix.AF_INET6:
		return netip.AddrPortFrom(netip.AddrFrom16(sa.Addr).Unmap(), port)
	}
	return netip.AddrPort{}
}

// groSize is the segment size of a UDP_GRO control message, 0 when there
// is none (a plain datagram).
func groSize(oob []byte) int {
	for len(oob) >= unix.SizeofCmsghdr {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
		l := int(h.Len)
		if l < unix.SizeofCmsghdr || l > len(oob) {
			return 0
		}
		if h.Level == unix.IPPROTO_UDP && h.Type == unix.UDP_GRO && l >= unix.CmsgLen(2) {
			d := oob[unix.CmsgLen(0):l]
			if len(d) >= 4 {
				return int(binary.NativeEndian.Uint32(d))
			}
			return int(binary.NativeEndian.Uint16(d))
		}
		oob = oob[min(unix.CmsgSpace(l-unix.CmsgLen(0)), len(oob)):]
	}
	return 0
}

// GROSize is groSize for other batch readers of this module (the swarm's
// shared sockets).
func GROSize(oob []byte) int { return groSize(oob) }

type writerPlat struct {
	msgs  []ipv4.Message
	oob   [][]byte
	gsize []int
	gleft []int
	gkey  map[groupKey]int
	addrs map[netip.AddrPort]*net.UDPAddr
}

type groupKey struct {
	to   netip.AddrPort
	size int
}

// NewWriter queues up to n datagrams between flushes (more queued, larger
// super-datagrams).
func (c *Conn) NewWriter(n int) *Writer {
	n = max(n, 1)
	w := &Writer{c: c, bufs: make([][MaxDatagram]byte, n), lens: make([]int, n), to: make([]netip.AddrPort, n)}
	p := &w.plat
	p.msgs, p.oob = make([]ipv4.Message, n), make([][]byte, n)
	p.gsize, p.gleft = make([]int, n), make([]int, n)
	p.gkey, p.addrs = map[groupKey]int{}, map[netip.AddrPort]*net.UDPAddr{}
	for i := range p.msgs {
		p.msgs[i].Buffers = make([][]byte, 0, maxSegments)
		p.oob[i] = make([]byte, unix.CmsgSpace(2))
		h := (*unix.Cmsghdr)(unsafe.Pointer(&p.oob[i][0]))
		h.Level, h.Type = unix.SOL_UDP, unix.UDP_SEGMENT
		h.SetLen(unix.CmsgLen(2))
	}
	return w
}

func (w *Writer) udpAddr(to netip.AddrPort) *net.UDPAddr {
	p := &w.plat
	if a, ok := p.addrs[to]; ok {
		return a
	}
	if len(p.addrs) >= 1<<16 {
		clear(p.addrs) // bound it: a server with a socket per client sees many
	}
	a := net.UDPAddrFromAddrPort(to)
	p.addrs[to] = a
	return a
}

// Flush sends every queued datagram: with UDP_SEGMENT, those of one size
// to one address share a message (in the order their groups first
// appear); it waits for buffer space rather than drop.
func (w *Writer) Flush() {
	if w.n == 0 {
		return
	}
	p := &w.plat
	n := w.pack(w.c.gso)
	sent := 0
	for sent < n {
		got, err := w.c.write(p.msgs[sent:n], 0)
		got = max(got, 0)
		sent += got
		if err == nil && got > 0 {
			continue
		}
		if w.c.gso && sent < n && p.gsize[sent] > 0 {
			// The kernel refused UDP_SEGMENT: send everything plain
			// from now on (the whole flush again would repeat the sent
			// ones, so only the rest).
			w.c.gso = false
			rest := w.unpack(sent, n)
			n = sent + rest
			continue
		}
		if sent < n {
			w.Errs += uint64(max(len(p.msgs[sent].Buffers), 1))
			sent++
		}
	}
	for i := range n {
		m := &p.msgs[i]
		clear(m.Buffers)
		m.Buffers, m.Addr, m.OOB = m.Buffers[:0], nil, nil
	}
	w.n = 0
}

func (w *Writer) pack(gso bool) int {
	p := &w.plat
	clear(p.gkey)
	n := 0
	for i := range w.n {
		b := w.bufs[i][:w.lens[i]]
		g, ok := -1, false
		k := groupKey{w.to[i], w.lens[i]}
		if gso {
			g, ok = p.gkey[k]
			if ok && (p.gleft[g] == 0) {
				ok = false
			}
		}
		if !ok {
			g = n
			n++
			p.msgs[g].Addr = w.udpAddr(w.to[i])
			p.gsize[g] = w.lens[i]
			p.gleft[g] = min(maxSegments, maxSuper/max(w.lens[i], 1))
			if gso {
				p.gkey[k] = g
			}
		}
		p.msgs[g].Buffers = append(p.msgs[g].Buffers, b)
		p.gleft[g]--
	}
	for j := range n {
		m := &p.msgs[j]
		m.OOB = nil
		if len(m.Buffers) > 1 {
			binary.NativeEndian.PutUint16(p.oob[j][unix.CmsgLen(0):], uint16(p.gsize[j]))
			m.OOB = p.oob[j]
			w.Super++
		} else {
			p.gsize[j] = 0
		}
	}
	return n
}

// unpack lays the datagrams of messages [from, n) out one per message from
// index from; it returns how many messages that makes.
func (w *Writer) unpack(from, n int) int {
	p := &w.plat
	type one struct {
		b    []byte
		addr net.Addr
	}
	var all []one
	for j := from; j < n; j++ {
		for _, b := range p.msgs[j].Buffers {
			all = append(all, one{b, p.msgs[j].Addr})
		}
		m := &p.msgs[j]
		clear(m.Buffers)
		m.Buffers, m.Addr, m.OOB = m.Buffers[:0], nil, nil
	}
	for k, o := range all {
		m := &p.msgs[from+k]
		m.Buffers = append(m.Buffers[:0], o.b)
		m.Addr, m.OOB = o.addr, nil
		p.gsize[from+k] = 0
	}
	return len(all)
}
