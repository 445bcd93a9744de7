//go:build linux

package swarm

import (
	"fmt"
	"math"
	"net"
	"net/netip"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ghostwire/ghostwire/cmd/botswarm/internal/batchudp"
	"github.com/ghostwire/ghostwire/replication/handshake"
)

// sharedTransport puts all of a worker's bots on one unconnected UDP
// socket (docs/protocol.md § 7.18.6): every bot's session sends the long
// form (connection id in the clear), so the server routes by connection id,
// and the transport sorts the server's datagrams without trial decryption —
// long form, Disconnect and NoConnection by connection id, Challenge and
// Denied by the token id they echo, an Accepted (which names neither) by
// verifying its tag under the key of each bot of that server still
// connecting. Datagrams move in batches: one recvmmsg reads up to
// sharedBatch messages, and the datagrams the bots send during a turn go
// out with one sendmmsg when the worker next waits (batchudp.Writer). The worker
// blocks in recvmmsg itself (the runtime's poller, a read deadline for the
// timeout): no goroutine, channel or timer per socket or bot.
type sharedTransport struct {
	uc *net.UDPConn
	v6 bool

	// rb takes what one recvmmsg reads (batchudp: no garbage per read).
	rb *batchudp.Batch
	// With gro (UDP_GRO on), a read may return a super-datagram: equal
	// datagrams the server sent as one UDP_SEGMENT message, which the
	// kernel then hands over whole — on loopback that spares the server's
	// CPU the cutting up and queueing of each — and dispatch cuts it up.
	gro      bool
	deadline time.Time // read deadline in force (zero: none)

	// Datagrams the bots sent this turn, sent at the next wait (or when
	// sendQueue are queued) with one sendmmsg; those of one size to one
	// server as one UDP_SEGMENT super-datagram that the kernel cuts up
	// again — one trip through the send path for the group (≈ 3.5×
	// cheaper per datagram on loopback here) and the same datagrams on the
	// wire. The longer the queue, the larger the groups.
	bc *batchudp.Conn
	w  *batchudp.Writer

	socks []sharedSock // by tag (a bot has one session at a time)
	// to is, by tag, 1 + the index in servers of the open socket's server
	// (0: closed): send reads these dense 2 bytes, not the tag's cold
	// sharedSock (a cache miss a datagram with thousands of bots).
	to      []uint16
	servers []netip.AddrPort
	byConn  map[handshake.ConnID]int32
	byToken map[handshake.TokenID]int32
	pending []int32 // tags still handshaking, for Accepted
	nopen   int
	// unrouted counts datagrams that named no bot of this socket (late
	// ones for ended sessions, short forms): dropped.
	unrouted uint64
}

type sharedSock struct {
	open   bool
	server netip.AddrPort
	tok    *handshake.Token
	conn   handshake.ConnID
}

// sharedBatch is how many messages one recvmmsg takes, sendQueue how many
// datagrams wait for one flush.
const (
	sharedBatch = 64
	sendQueue   = 1024
)

// sharedBuffer is the socket buffer size asked for: one socket carries
// thousands of bots (≈ 20 datagrams a second each), so it must absorb a
// worker's turn of them.
const sharedBuffer = 8 << 20

func newSharedTransport(v6 bool) (*sharedTransport, error) {
	network := "udp4"
	if v6 {
		network = "udp6"
	}
	// Any local address: the kernel picks the source per destination.
	uc, err := net.ListenUDP(network, nil)
	if err != nil {
		return nil, fmt.Errorf("shared socket: %w", err)
	}
	t := &sharedTransport{uc: uc, v6: v6,
		byConn: map[handshake.ConnID]int32{}, byToken: map[handshake.TokenID]int32{}}
	_ = uc.SetReadBuffer(sharedBuffer)
	_ = uc.SetWriteBuffer(sharedBuffer)
	if rc, err := uc.SyscallConn(); err == nil {
		// As root, past net.core.rmem_max (ignored when not permitted).
		_ = rc.Control(func(fd uintptr) {
			_ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, sharedBuffer)
			_ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, sharedBuffer)
		})
	}
	t.gro = groDefault && batchudp.EnableGRO(uc)
	rsize := maxDatagram
	if t.gro {
		rsize = 1 << 16
	}
	t.bc = batchudp.NewConn(uc)
	t.bc.SetGSO(gsoDefault)
	t.w = t.bc.NewWriter(sendQueue)
	t.rb = batchudp.NewBatch(sharedBatch, rsize)
	return t, nil
}

func (t *sharedTransport) name() string { return "shared" }
func (t *sharedTransport) shared() bool { return true }

func (t *sharedTransport) open(server netip.AddrPort, tag int32) (sock, error) {
	a := server.Addr().Unmap()
	if a.Is4() == t.v6 {
		return -1, fmt.Errorf("shared socket: server %v is not of the socket's address family (one --server family per run)", server)
	}
	for int(tag) >= len(t.socks) {
		t.socks = append(t.socks, sharedSock{})
		t.to = append(t.to, 0)
	}
	s := &t.socks[tag]
	if s.open {
		t.close(int(tag))
	}
	*s = sharedSock{open: true, server: netip.AddrPortFrom(a, server.Port())}
	i := slices.Index(t.servers, s.server)
	if i < 0 {
		if len(t.servers) == math.MaxUint16 {
			*s = sharedSock{}
			return -1, fmt.Errorf("shared socket: more than %d servers", math.MaxUint16)
		}
		i = len(t.servers)
		t.servers = append(t.servers, s.server)
	}
	t.to[tag] = uint16(i + 1)
	t.pending = append(t.pending, tag)
	t.nopen++
	return int(tag), nil
}

func (t *sharedTransport) bind(s sock, tok *handshake.Token) {
	if s < 0 || s >= len(t.socks) || !t.socks[s].open {
		return
	}
	t.socks[s].tok = tok
	t.byToken[tok.ID] = int32(s)
}

func (t *sharedTransport) close(s sock) {
	if s < 0 || s >= len(t.socks) || !t.socks[s].open {
		return
	}
	ss := &t.socks[s]
	if ss.tok != nil && t.byToken[ss.tok.ID] == int32(s) {
		delete(t.byToken, ss.tok.ID)
	}
	if !ss.conn.IsZero() && t.byConn[ss.conn] == int32(s) {
		delete(t.byConn, ss.conn)
	}
	t.unpend(int32(s))
	*ss = sharedSock{}
	t.to[s] = 0
	t.nopen--
}

func (t *sharedTransport) unpend(tag int32) {
	for i, p := range t.pending {
		if p == tag {
			last := len(t.pending) - 1
			t.pending[i] = t.pending[last]
			t.pending = t.pending[:last]
			return
		}
	}
}

// send queues one datagram for the next sendmmsg (when the worker waits,
// or when the queue is full).
func (t *sharedTransport) send(s sock, p []byte) error {
	if s < 0 || s >= len(t.to) || t.to[s] == 0 {
		return net.ErrClosed
	}
	if len(p) > maxDatagram {
		return fmt.Errorf("datagram of %d bytes", len(p))
	}
	t.w.Commit(p, t.servers[t.to[s]-1])
	return nil
}

// groDefault: UDP_GRO (Linux ≥ 5.0) is asked for on every shared socket;
// tests turn it off to cover the kernel that cuts up for us.
var groDefault = true

// gsoDefault: UDP_SEGMENT (Linux ≥ 4.18) is tried first; a kernel that
// refuses it turns it off for the transport.
var gsoDefault = true

// flush sends every queued datagram (it waits for buffer space rather
// than drop).
func (t *sharedTransport) flush() { t.w.Flush() }

// takeSendErrors returns and resets the count of datagrams sendmmsg lost.
func (t *sharedTransport) takeSendErrors() uint64 {
	n := t.w.Errs
	t.w.Errs = 0
	return n
}

func (t *sharedTransport) wait(timeout time.Duration, fn func(int32, []byte, error)) int {
	t.flush()
	n := t.readNow()
	if n == 0 && timeout > 0 {
		t.deadline = time.Now().Add(timeout)
		_ = t.uc.SetReadDeadline(t.deadline)
		n = 0 // the deadline passed, or the socket is closed
		if err := t.bc.ReadBatch(t.rb); err == nil {
			n = t.rb.Len()
		}
	}
	calls := t.dispatch(n, fn)
	// A full batch: more may be queued. Take a few more batches now
	// (bounded, so the bots' timers are not starved).
	for i := 0; n == sharedBatch && i < 4; i++ {
		n = t.readNow()
		calls += t.dispatch(n, fn)
	}
	return calls
}

// readNow reads what is queued without blocking.
func (t *sharedTransport) readNow() int {
	if !t.deadline.IsZero() && !time.Now().Before(t.deadline) {
		// An expired deadline fails every read before it is tried.
		t.deadline = time.Time{}
		_ = t.uc.SetReadDeadline(t.deadline)
	}
	if err := t.bc.TryReadBatch(t.rb); err != nil {
		return 0
	}
	return t.rb.Len()
}

func (t *sharedTransport) dispatch(n int, fn func(int32, []byte, error)) int {
	calls := 0
	for i := range n {
		p, seg, from := t.rb.Msg(i)
		if seg <= 0 || seg >= len(p) {
			calls += t.deliver(p[:min(len(p), maxDatagram)], from, fn)
			continue
		}
		for len(p) > 0 {
			k := min(seg, len(p))
			calls += t.deliver(p[:k], from, fn)
			p = p[k:]
		}
	}
	return calls
}

// deliver routes one datagram to its bot: 1 when it had one.
func (t *sharedTransport) deliver(p []byte, from netip.AddrPort, fn func(int32, []byte, error)) int {
	tag := t.route(p, from)
	if tag < 0 {
		t.unrouted++
		return 0
	}
	fn(tag, p, nil)
	return 1
}

// route names the bot a datagram from the server is for, or -1.
func (t *sharedTransport) route(p []byte, from netip.AddrPort) int32 {
	kind, err := handshake.Classify(p)
	if err != nil {
		return -1
	}
	byConn := func(id handshake.ConnID, err error) int32 {
		if err != nil {
			return -1
		}
		if tag, ok := t.byConn[id]; ok {
			return tag
		}
		return -1
	}
	byToken := func(id handshake.TokenID, err error) int32 {
		if err != nil {
			return -1
		}
		if tag, ok := t.byToken[id]; ok {
			return tag
		}
		return -1
	}
	switch kind {
	case handshake.KindRouted:
		id, _, err := handshake.ParseRouted(p)
		return byConn(id, err)
	case handshake.KindDisconnect:
		return byConn(handshake.ParseDisconnectID(p))
	case handshake.KindRedirect:
		return byConn(handshake.ParseRedirectID(p))
	case handshake.KindNoConnection:
		return byConn(handshake.ParseNoConnection(p))
	case handshake.KindChallenge:
		id, _, err := handshake.ParseChallenge(p)
		return byToken(id, err)
	case handshake.KindDenied:
		_, id, err := handshake.ParseDenied(p)
		return byToken(id, err)
	case handshake.KindAccepted:
		return t.routeAccepted(p, from)
	}
	return -1 // a short form names no one on a shared socket
}

// routeAccepted finds the bot an Accepted is for: a retry by the
// connection id it names (known after the first), the first one by its tag
// under the keys of that server's bots still connecting.
func (t *sharedTransport) routeAccepted(p []byte, src netip.AddrPort) int32 {
	if len(p) < 1+handshake.ConnIDSize {
		return -1
	}
	var id handshake.ConnID
	copy(id[:], p[1:1+handshake.ConnIDSize])
	if tag, ok := t.byConn[id]; ok {
		return tag
	}
	for _, tag := range t.pending {
		s := &t.socks[tag]
		if s.tok == nil || (src.IsValid() && s.server != src) {
			continue
		}
		got, err := handshake.OpenAccepted(p, s.tok, s.server)
		if err != nil || got != id {
			continue
		}
		s.conn = id
		t.byConn[id] = tag
		t.unpend(tag)
		return tag
	}
	return -1
}

func (t *sharedTransport) shutdown() {
	t.flush()
	for i := range t.socks {
		t.socks[i] = sharedSock{}
		t.to[i] = 0
	}
	clear(t.byConn)
	clear(t.byToken)
	t.pending, t.nopen = t.pending[:0], 0
	_ = t.uc.Close()
}
