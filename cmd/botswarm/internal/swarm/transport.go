package swarm

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/ghostwire/ghostwire/replication/handshake"
)

// transport is one worker's sockets. Two kinds:
//
//   - one UDP socket per bot session, connected to the server (epoll,
//     goroutines): the bots send the short form, which the server routes
//     by source address;
//   - one socket shared by all of the worker's bots (shared): the bots send
//     the long form with the connection id (docs/protocol.md § 7.18.6), the
//     transport sorts the server's replies by connection or token id, and
//     datagrams move in recvmmsg/sendmmsg batches.
//
// A worker goroutine owns its transport; only wait blocks. Sockets are
// named by a tag, the bot's slot in the worker.
type transport interface {
	// open creates the bot's socket to server (a shared transport: its
	// place on the shared socket).
	open(server netip.AddrPort, tag int32) (sock, error)
	// bind tells the transport the token the bot's session connects with,
	// so that a shared socket can route the handshake's replies to it.
	bind(s sock, tok *handshake.Token)
	// close closes a socket; datagrams still queued for it are dropped.
	close(s sock)
	// send writes one datagram (a shared transport queues it until the
	// next wait). A full socket buffer drops it (errWouldBlock).
	send(s sock, p []byte) error
	// wait sends what is queued, then blocks until a datagram arrives or
	// timeout passes and calls fn for every datagram it read (p valid only
	// during fn; err set for a socket error, p nil then). It returns how
	// many callbacks it made.
	wait(timeout time.Duration, fn func(tag int32, p []byte, err error)) int
	// shutdown closes every socket and frees the transport.
	shutdown()
	name() string
	// shared: the bots share sockets and must send the long form.
	shared() bool
}

type sock = int

var errWouldBlock = errors.New("socket buffer full")

// maxDatagram bounds a read; the protocol's datagrams are ≤ 1200 bytes, so a
// longer one is garbage and is truncated (then rejected by the session).
const maxDatagram = 1500

// newTransport returns the named transport ("auto": the cheapest this
// platform has — shared sockets with batches, else a socket per bot). v6:
// the servers are IPv6 (a shared socket serves one address family).
func newTransport(kind string, v6 bool) (transport, error) {
	switch kind {
	case "", "auto":
		if t, err := newSharedTransport(v6); err == nil {
			return t, nil
		} else if !errors.Is(err, errUnsupported) {
			return nil, err
		}
		if t, err := newEpollTransport(); err == nil {
			return t, nil
		} else if !errors.Is(err, errUnsupported) {
			return nil, err
		}
		return newChanTransport(), nil
	case "shared":
		return newSharedTransport(v6)
	case "epoll":
		return newEpollTransport()
	case "goroutines":
		return newChanTransport(), nil
	}
	return nil, fmt.Errorf("unknown transport %q (auto, shared, epoll, goroutines)", kind)
}

var errUnsupported = errors.New("transport not supported on this platform")

// chanTransport is the portable transport: a net.UDPConn per socket and a
// reader goroutine per socket feeding one channel the worker drains. It
// costs a goroutine switch per datagram; the epoll transport does not.
type chanTransport struct {
	in    chan datagram
	mu    sync.Mutex
	socks map[int]*chanSock
	next  int
	wg    sync.WaitGroup
	pool  sync.Pool
}

type chanSock struct {
	c   *net.UDPConn
	tag int32
}

type datagram struct {
	tag int32
	buf *[maxDatagram]byte
	n   int
	err error
}

func newChanTransport() *chanTransport {
	t := &chanTransport{in: make(chan datagram, 4096), socks: map[int]*chanSock{}}
	t.pool.New = func() any { return new([maxDatagram]byte) }
	return t
}

func (t *chanTransport) name() string                { return "goroutines" }
func (t *chanTransport) shared() bool                { return false }
func (t *chanTransport) bind(sock, *handshake.Token) {}

func (t *chanTransport) open(server netip.AddrPort, tag int32) (sock, error) {
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(server))
	if err != nil {
		return -1, err
	}
	t.mu.Lock()
	t.next++
	id := t.next
	s := &chanSock{c: c, tag: tag}
	t.socks[id] = s
	t.mu.Unlock()
	t.wg.Add(1)
	go t.read(s)
	return id, nil
}

func (t *chanTransport) read(s *chanSock) {
	defer t.wg.Done()
	for {
		b := t.pool.Get().(*[maxDatagram]byte)
		n, err := s.c.Read(b[:])
		if err != nil {
			t.pool.Put(b)
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// ICMP port unreachable and friends: report, keep reading.
			select {
			case t.in <- datagram{tag: s.tag, err: err}:
			default:
			}
			continue
		}
		// Bounded queue, drop-newest when the worker falls behind (a real
		// socket buffer would do the same).
		select {
		case t.in <- datagram{tag: s.tag, buf: b, n: n}:
		default:
			t.pool.Put(b)
		}
	}
}

func (t *chanTransport) close(s sock) {
	t.mu.Lock()
	cs := t.socks[s]
	delete(t.socks, s)
	t.mu.Unlock()
	if cs != nil {
		cs.c.Close()
	}
}

func (t *chanTransport) send(s sock, p []byte) error {
	t.mu.Lock()
	cs := t.socks[s]
	t.mu.Unlock()
	if cs == nil {
		return net.ErrClosed
	}
	_, err := cs.c.Write(p)
	return err
}

func (t *chanTransport) wait(timeout time.Duration, fn func(int32, []byte, error)) int {
	var d datagram
	select {
	case d = <-t.in:
	default:
		if timeout <= 0 {
			return 0
		}
		tm := time.NewTimer(timeout)
		select {
		case d = <-t.in:
			tm.Stop()
		case <-tm.C:
			return 0
		}
	}
	n := 0
	for {
		if d.err != nil {
			fn(d.tag, nil, d.err)
		} else {
			fn(d.tag, d.buf[:d.n], nil)
			t.pool.Put(d.buf)
		}
		n++
		if n >= 256 {
			return n
		}
		select {
		case d = <-t.in:
		default:
			return n
		}
	}
}

func (t *chanTransport) shutdown() {
	t.mu.Lock()
	for id, s := range t.socks {
		s.c.Close()
		delete(t.socks, id)
	}
	t.mu.Unlock()
	t.wg.Wait()
}
