package swarm

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ghostwire/ghostwire/replication/handshake"
)

// epollTransport is the Linux transport: non-blocking connected UDP sockets
// in one epoll set per worker. The worker thread blocks in epoll_wait, then
// reads each ready socket with one read(2): no goroutine, channel or timer
// per bot, and the kernel drops datagrams from any address but the server's.
//
// The worker does not block in epoll_wait itself: a goroutine blocked in a
// system call pins a thread and makes the runtime hand its P to another
// thread and back on every datagram. Instead the epoll fd is itself
// registered with Go's network poller (an epoll fd is readable while it has
// events), so the worker parks like any goroutine waiting on a socket and
// calls epoll_wait only when it will not block.
type epollTransport struct {
	epfd   int
	ep     *os.File // epfd, registered with the runtime poller
	rc     syscall.RawConn
	events []unix.EpollEvent
	tags   []int32 // by fd; -1 when the fd is not ours
	nopen  int
	buf    [maxDatagram]byte
	n      int
	waitFn func(uintptr) bool
}

func newEpollTransport() (*epollTransport, error) {
	fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll_create1: %w", err)
	}
	// Non-blocking, so os.NewFile registers it with the runtime poller.
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("epoll: %w", err)
	}
	t := &epollTransport{epfd: fd, events: make([]unix.EpollEvent, 256)}
	t.ep = os.NewFile(uintptr(fd), "epoll")
	if t.rc, err = t.ep.SyscallConn(); err != nil {
		t.ep.Close()
		return nil, fmt.Errorf("epoll: %w", err)
	}
	t.waitFn = func(fd uintptr) bool {
		n, err := unix.EpollWait(int(fd), t.events, 0)
		if err != nil || n <= 0 {
			t.n = 0
			return false // park until the epoll fd is readable
		}
		t.n = n
		return true
	}
	return t, nil
}

func (t *epollTransport) name() string                { return "epoll" }
func (t *epollTransport) shared() bool                { return false }
func (t *epollTransport) bind(sock, *handshake.Token) {}

func (t *epollTransport) open(server netip.AddrPort, tag int32) (sock, error) {
	var sa unix.Sockaddr
	domain := unix.AF_INET
	addr := server.Addr().Unmap()
	if addr.Is4() {
		sa = &unix.SockaddrInet4{Port: int(server.Port()), Addr: addr.As4()}
	} else {
		domain = unix.AF_INET6
		sa = &unix.SockaddrInet6{Port: int(server.Port()), Addr: addr.As16()}
	}
	fd, err := unix.Socket(domain, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP)
	if err != nil {
		return -1, fmt.Errorf("socket: %w", err)
	}
	if err := unix.Connect(fd, sa); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("connect %v: %w", server, err)
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}
	if err := unix.EpollCtl(t.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("epoll_ctl: %w", err)
	}
	for len(t.tags) <= fd {
		t.tags = append(t.tags, -1)
	}
	t.tags[fd] = tag
	t.nopen++
	return fd, nil
}

func (t *epollTransport) close(s sock) {
	if s < 0 || s >= len(t.tags) || t.tags[s] < 0 {
		return
	}
	_ = unix.EpollCtl(t.epfd, unix.EPOLL_CTL_DEL, s, nil)
	unix.Close(s)
	t.tags[s] = -1
	t.nopen--
}

func (t *epollTransport) send(s sock, p []byte) error {
	for {
		_, err := unix.Write(s, p)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EAGAIN):
			return errWouldBlock
		}
		return err
	}
}

func (t *epollTransport) wait(timeout time.Duration, fn func(int32, []byte, error)) int {
	t.n = 0
	if timeout <= 0 {
		t.waitFn(uintptr(t.epfd))
	} else {
		_ = t.ep.SetReadDeadline(time.Now().Add(timeout))
		_ = t.rc.Read(t.waitFn) // a deadline error just means nothing came
	}
	n := t.n
	calls := 0
	for i := range n {
		fd := int(t.events[i].Fd)
		if fd >= len(t.tags) || t.tags[fd] < 0 {
			continue
		}
		tag := t.tags[fd]
		// Level-triggered: one read per readiness; a socket with more queued
		// is reported again by the next epoll_wait, so no bot starves others.
		m, err := unix.Read(fd, t.buf[:])
		switch {
		case err == nil:
			fn(tag, t.buf[:m], nil)
			calls++
		case errors.Is(err, unix.EAGAIN), errors.Is(err, unix.EINTR):
		default:
			fn(tag, nil, err) // ECONNREFUSED: the server is not there (ICMP)
			calls++
		}
	}
	return calls
}

func (t *epollTransport) shutdown() {
	for fd, tag := range t.tags {
		if tag >= 0 {
			unix.Close(fd)
			t.tags[fd] = -1
		}
	}
	t.nopen = 0
	t.ep.Close()
}
