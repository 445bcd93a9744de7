package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ghostwire/ghostwire/replication/event"
	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/replication/session"
)

// Event is one event the server sent.
type Event struct {
	Class   event.Class // event.Ordered, event.Unordered or event.Unguaranteed
	Lane    int         // Ordered: the lane it came on
	Payload []byte      // yours to keep
}

// GhostView is one remote entity as View draws it.
type GhostView = session.GhostView

// Stats is a snapshot of a session's counters.
type Stats struct {
	session.ClientStats
	// EventsDropped counts received events discarded because nobody read
	// Events() and MaxPendingEvents were already waiting.
	EventsDropped uint64
	// SocketErrors counts failed reads and writes on the socket (other than
	// deadlines).
	SocketErrors uint64
	// Redirects counts the server Redirects the session followed: it moved
	// to another gateway (a node draining) and continued there.
	Redirects uint64
	// Failovers counts the gateways the session switched to after its
	// server went silent (WithFailover).
	Failovers uint64
	// GhostsCarried counts, per followed Redirect, the entities View kept
	// drawing from the previous connection until the new one showed them
	// (see Session): each is a pop avoided.
	GhostsCarried uint64
}

// Redirected describes a Redirect the session followed (OnRedirect).
type Redirected struct {
	From, To netip.AddrPort
	At       time.Time
}

// ErrClosed is returned by calls on a session that has ended.
var ErrClosed = errors.New("client: session closed")

// ErrFailingOver is returned by SendEvent and its kin while the session
// switches to another server (WithFailover): the event was not taken; send
// it again once connected (Stats().Failovers grows).
var ErrFailingOver = errors.New("client: switching to another server")

// maxWait bounds one sleep of the session goroutine, so a missed wake-up
// costs at most this much.
const maxWait = 100 * time.Millisecond

// Session is a connection to a ghostwire server. Create it with Dial. Its
// methods are safe for concurrent use; one goroutine per Session does the
// network work until the session ends (Close, a server disconnect, a
// timeout).
type Session struct {
	mu     sync.Mutex // guards c and everything below it
	c      *session.Client
	input  move.Move
	err    error
	closed bool // Close was called
	queue  []Event
	drops  uint64
	sockEr uint64

	conn    net.PacketConn
	server  netip.AddrPort
	udp     *net.UDPAddr
	start   time.Time
	opts    options
	events  chan Event
	up      chan struct{} // closed once connected
	upOnce  sync.Once
	done    chan struct{} // closed when the goroutine has exited
	woken   atomic.Bool
	sbuf    []byte
	rbuf    []byte
	inputIv time.Duration

	// A followed Redirect: the previous connection sends its Disconnect
	// copies (the acknowledgement) to its server, and its ghost view
	// bridges the gap until the new connection's has caught up.
	old       *session.Client
	oldUDP    *net.UDPAddr
	bridgeEnd time.Duration // View merges old's ghosts until then
	newSeen   time.Duration // when the new connection first held ghosts (0: not yet)
	redirects uint64
	carried   map[uint64]bool // entities View drew from old during this bridge
	carriedN  uint64

	// Failover (WithFailover): a token is being fetched; tries in a row
	// without a connection; failovers done.
	failing   bool
	tries     int
	tried     []netip.AddrPort // servers lost or failed since the last connection
	failovers uint64
}

// Dial connects to the server at addr ("host:port", one of the addresses
// the token lists) with token and returns once the session is up. ctx bounds
// the dialing only (as in net.Dialer.DialContext); the session then lives
// until Close, a disconnect or a timeout. Errors wrap the cause:
// *session.DeniedError (the server refused the token: errors.Is it with
// handshake.ErrTokenExpired, handshake.ErrServerFull, ...),
// session.ErrConnectTimeout, handshake.ErrWrongServer (addr is not in the
// token), or ctx.Err().
func Dial(ctx context.Context, addr string, token []byte, opts ...Option) (*Session, error) {
	o := defaultOptions()
	for _, f := range opts {
		f(&o)
	}
	server, err := resolve(ctx, addr, token)
	if err != nil {
		return nil, fmt.Errorf("client: dial %s: %w", addr, err)
	}
	pc, err := net.ListenPacket("udp", o.local)
	if err != nil {
		return nil, fmt.Errorf("client: dial %s: %w", addr, err)
	}
	var conn net.PacketConn = pc
	if o.wrap != nil {
		conn = o.wrap(pc)
	}
	s := &Session{
		conn: conn, server: server, udp: net.UDPAddrFromAddrPort(server), start: time.Now(), opts: o,
		events: make(chan Event, o.eventBuffer), up: make(chan struct{}), done: make(chan struct{}),
		sbuf: make([]byte, 0, session.MaxPacketSize), rbuf: make([]byte, session.MaxPacketSize+1),
	}
	s.c, err = session.NewClient(token, server, o.cfg, (*handler)(s), time.Now(), 0)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("client: dial %s: %w", addr, err)
	}
	rate := o.cfg.Moves.InputRate
	if rate == 0 {
		rate = move.DefaultInputRate
	}
	s.inputIv = time.Second / time.Duration(rate)
	go s.run()
	select {
	case <-s.up:
		o.log.Info("ghostwire connected", "server", server, "conn", s.c.ID(), "rtt", s.RTT())
		return s, nil
	case <-s.done:
		return nil, fmt.Errorf("client: dial %s: %w", addr, s.Err())
	case <-ctx.Done():
		s.conn.Close()
		<-s.done
		return nil, fmt.Errorf("client: dial %s: %w", addr, ctx.Err())
	}
}

// resolve turns addr into the token's spelling of the server address.
func resolve(ctx context.Context, addr string, token []byte) (netip.AddrPort, error) {
	tok, err := handshake.ParseToken(token)
	if err != nil {
		return netip.AddrPort{}, err
	}
	if ap, err := netip.ParseAddrPort(addr); err == nil {
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return netip.AddrPort{}, err
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return netip.AddrPort{}, err
	}
	p, err := net.DefaultResolver.LookupPort(ctx, "udp", port)
	if err != nil {
		return netip.AddrPort{}, err
	}
	for _, ip := range ips {
		if ap := netip.AddrPortFrom(ip.Unmap(), uint16(p)); tok.Lists(ap) {
			return ap, nil
		}
	}
	return netip.AddrPort{}, fmt.Errorf("%w: %s resolves to no address the token lists", handshake.ErrWrongServer, addr)
}

// handler receives events inside session.Client.Receive (mu held).
type handler Session

func (h *handler) Event(e event.Event) {
	s := (*Session)(h)
	if len(s.queue) >= MaxPendingEvents {
		copy(s.queue, s.queue[1:])
		s.queue = s.queue[:len(s.queue)-1]
		s.drops++
	}
	s.queue = append(s.queue, Event{Class: e.Class, Lane: e.Lane, Payload: bytes.Clone(e.Payload)})
}

// now is the session's clock: time since Dial, monotonic.
func (s *Session) now() time.Duration { return time.Since(s.start) }

// wake interrupts the goroutine's read so it polls at once.
func (s *Session) wake() {
	s.woken.Store(true)
	s.conn.SetReadDeadline(time.Unix(1, 0))
}

// run is the session goroutine: it polls the protocol, writes what is due,
// waits for a datagram or the next deadline, and feeds what it read.
func (s *Session) run() {
	defer close(s.done)
	defer close(s.events)
	defer s.conn.Close()
	for {
		wait, ok := s.turn()
		if !ok {
			return
		}
		s.conn.SetReadDeadline(time.Now().Add(wait))
		if s.woken.Swap(false) {
			continue
		}
		n, from, err := s.conn.ReadFrom(s.rbuf)
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				continue
			}
			if errors.Is(err, net.ErrClosed) {
				s.mu.Lock()
				if s.err == nil {
					s.err = ErrClosed
				}
				s.c.Close(s.now()) // no socket: nothing more will be sent
				s.mu.Unlock()
				return
			}
			s.mu.Lock()
			s.sockEr++ // e.g. ICMP port unreachable surfacing on some systems
			s.mu.Unlock()
			continue
		}
		if ua, ok := from.(*net.UDPAddr); !ok || !sameAddr(ua.AddrPort(), s.server) || n > session.MaxPacketSize {
			continue // not our server: ignore (the socket is ours alone)
		}
		s.mu.Lock()
		s.c.Receive(s.now(), s.rbuf[:n])
		s.mu.Unlock()
	}
}

func sameAddr(a, b netip.AddrPort) bool {
	return a.Port() == b.Port() && a.Addr().Unmap() == b.Addr().Unmap()
}

// turn runs the protocol at now: samples input, sends what is due, hands
// events to the channel. It returns how long to wait for the next datagram,
// or false when the session has ended.
func (s *Session) turn() (time.Duration, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if r, ok := s.c.Redirect(); ok && !s.closed && s.err == nil {
		s.follow(now, r)
	}
	s.pollOld(now)
	connected := s.c.State() == handshake.StateConnected
	if connected && !s.opts.manual && !s.closed {
		for s.c.InputDue(now) {
			s.c.Input(s.input)
		}
	}
	for {
		out, err := s.c.Poll(now, s.sbuf[:0])
		if err != nil || len(out) == 0 {
			break
		}
		if _, err := s.conn.WriteTo(out, s.udp); err != nil {
			s.sockEr++
			if errors.Is(err, net.ErrClosed) {
				break
			}
		}
	}
	if s.c.State() == handshake.StateConnected {
		s.upOnce.Do(func() { close(s.up) })
	}
	blocked := s.deliver()
	if s.c.State() == handshake.StateConnected {
		s.tries, s.tried = 0, s.tried[:0]
	}
	if s.c.State() == handshake.StateClosed && s.canFailover() {
		if !s.failing {
			s.failing, s.tries = true, s.tries+1
			go s.failover(s.server, s.c.Control())
		}
		return 20 * time.Millisecond, true
	}
	if s.c.State() == handshake.StateClosed {
		if s.err == nil {
			s.err = s.c.Err()
			if s.err == nil {
				s.err = ErrClosed
			}
		}
		s.flushQueue()
		s.opts.log.Info("ghostwire disconnected", "server", s.server, "err", s.err)
		return 0, false
	}
	wait := s.c.NextDeadline(now) - now
	if s.old != nil {
		wait = min(wait, s.old.NextDeadline(now)-now)
	}
	if connected && !s.opts.manual {
		wait = min(wait, s.inputIv)
	}
	if blocked {
		wait = min(wait, 10*time.Millisecond) // the reader is behind: retry soon
	}
	return max(min(wait, maxWait), 0), true
}

// canFailover: the server went silent (or the connect to a failover
// target failed) and WithFailover may try another gateway.
func (s *Session) canFailover() bool {
	if s.opts.failover == nil || s.closed || s.err != nil || s.tries >= MaxFailovers && !s.failing {
		return false
	}
	err := s.c.Err()
	return s.failing || errors.Is(err, session.ErrTimeout) || errors.Is(err, session.ErrConnectTimeout)
}

// failover fetches a fresh token (without the lock) and switches to the
// first gateway it lists other than dead, predicting on from control.
func (s *Session) failover(dead netip.AddrPort, control move.ControlState) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	tok, err := s.opts.failover(ctx)
	cancel()
	s.mu.Lock()
	defer s.wake()
	defer s.mu.Unlock()
	s.failing = false
	if s.closed {
		return
	}
	s.tried = append(s.tried, dead)
	var target netip.AddrPort
	if err == nil {
		var t handshake.Token
		if t, err = handshake.ParseToken(tok); err == nil {
			for _, a := range t.Servers[:t.NumServers] {
				if !slices.ContainsFunc(s.tried, func(b netip.AddrPort) bool { return sameAddr(a, b) }) {
					target = a
					break
				}
			}
			if !target.IsValid() && t.NumServers > 0 {
				target = t.Servers[0] // every listed one failed already: try again
			}
		}
	}
	var nc *session.Client
	if err == nil {
		cfg := s.opts.cfg
		cfg.InitialControl = control
		nc, err = session.NewClient(tok, target, cfg, (*handler)(s), time.Now(), s.now())
	}
	if err == nil {
		// The ordered events the dead server's zone had not reported
		// applied go again; the zone that restored the player drops the
		// ones its record's fence covers (docs/protocol.md §7.20).
		nc.ContinueEvents(s.c)
	}
	if err != nil {
		s.opts.log.Warn("ghostwire failover: no new server", "try", s.tries, "err", err)
		if s.tries >= MaxFailovers {
			s.err = fmt.Errorf("client: failover after losing %v: %w", dead, err)
		}
		return
	}
	s.c, s.server, s.udp = nc, target, net.UDPAddrFromAddrPort(target)
	s.failovers++
	s.opts.log.Info("ghostwire failed over", "from", dead, "to", target)
}

// follow switches to the server a Redirect names (docs/protocol.md §7.19):
// a new protocol client with the Redirect's token on the same socket,
// predicting on from the old one's state; the old one keeps sending its
// Disconnect copies to its server. The application's calls go to the new
// one from here on. The new one continues the old one's move stream: the
// moves the old server did not acknowledge go again, under the same
// numbers, and the player's zone drops those it already applied (it keeps
// the player's move sequence across the switch), so none is lost or
// applied twice. Its ordered events continue likewise
// (session.Client.ContinueEvents): those the zone had not reported applied
// go again under their per-player numbers, and the zone drops the ones it
// applied already.
func (s *Session) follow(now time.Duration, r *session.RedirectError) {
	cfg := s.opts.cfg
	cfg.InitialControl = s.c.Control()
	nc, err := session.NewClient(r.Token, r.Server, cfg, (*handler)(s), time.Now(), now)
	if err == nil {
		nc.ContinueMoves(s.c)
		nc.ContinueEvents(s.c)
	}
	if err != nil {
		// A token that does not parse was refused by OpenRedirect already;
		// this is an expired one (a clock far off): end as redirected.
		s.err = fmt.Errorf("client: following a redirect to %v: %w", r.Server, err)
		return
	}
	from := s.server
	s.old, s.oldUDP = s.c, s.udp
	s.c, s.server, s.udp = nc, r.Server, net.UDPAddrFromAddrPort(r.Server)
	s.redirects++
	s.bridgeEnd, s.newSeen = now+bridgeMax, 0
	s.carried = map[uint64]bool{}
	s.opts.log.Info("ghostwire redirected", "from", from, "to", r.Server)
	if f := s.opts.onRedirect; f != nil {
		f(Redirected{From: from, To: r.Server, At: time.Now()})
	}
}

// bridgeMax bounds how long View draws the previous connection's ghosts
// after a Redirect; bridgeHold is how long after the new connection's first
// ghosts it still fills in (they come over a few packets: the interest
// scope is sent in priority order, and the mirror draws 100 ms behind).
const (
	bridgeMax  = 2 * time.Second
	bridgeHold = 300 * time.Millisecond
)

// pollOld sends the previous connection's Disconnect copies, and ends the
// ghost bridge when it is due.
func (s *Session) pollOld(now time.Duration) {
	if s.old == nil {
		return
	}
	for s.old.State() != handshake.StateClosed {
		out, err := s.old.Poll(now, s.sbuf[:0])
		if err != nil || len(out) == 0 {
			break
		}
		if _, err := s.conn.WriteTo(out, s.oldUDP); err != nil {
			s.sockEr++
			break
		}
	}
	if s.newSeen == 0 && s.c.Mirror().Len() > 0 {
		s.newSeen = now
		s.bridgeEnd = min(s.bridgeEnd, now+bridgeHold)
	}
	if now >= s.bridgeEnd && s.old.State() == handshake.StateClosed {
		s.carriedN += uint64(len(s.carried))
		s.old, s.oldUDP, s.carried = nil, nil, nil
	}
}

// deliver moves queued events into the channel without blocking; it reports
// whether some are still waiting.
func (s *Session) deliver() bool {
	i := 0
	for ; i < len(s.queue); i++ {
		select {
		case s.events <- s.queue[i]:
			continue
		default:
		}
		break
	}
	n := copy(s.queue, s.queue[i:])
	clear(s.queue[n:])
	s.queue = s.queue[:n]
	return n > 0
}

// flushQueue hands what fits to the channel before it closes; the rest is
// dropped and counted.
func (s *Session) flushQueue() {
	s.deliver()
	s.drops += uint64(len(s.queue))
	s.queue = s.queue[:0]
}

// Events delivers what the server sent, in the order the session received
// it (ordered lanes in order). The channel is closed when the session ends.
// Read it every frame: if it stays full, the oldest undelivered events are
// eventually dropped (Stats.EventsDropped).
func (s *Session) Events() <-chan Event { return s.events }

// SetInput holds m as the player's current input; the session samples it at
// the input rate (30 Hz by default) into moves. m.Seq and m.Dt are filled in
// per sample. Ignored with WithManualInput.
func (s *Session) SetInput(m move.Move) error {
	if err := m.Validate(); err != nil {
		return err
	}
	s.mu.Lock()
	s.input = m
	s.mu.Unlock()
	return nil
}

// SendMove adds one move now (WithManualInput: call it once per tick of a
// fixed-rate game loop; m.Dt is the tick in 1/960 s, 0 meaning the input
// rate's) and returns the predicted control state after it.
func (s *Session) SendMove(m move.Move) (move.ControlState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c.State() >= handshake.StateDraining {
		if s.canFailover() {
			// Switching servers (WithFailover): the move is not sent (as
			// on a link that went silent); prediction waits for the new
			// server's state.
			return s.c.Control(), nil
		}
		return s.c.Control(), ErrClosed
	}
	return s.c.Input(m)
}

// SendEvent sends payload (copied; up to 64 KiB) on an ordered lane (0..7):
// delivered exactly once, in order with the lane's other events.
func (s *Session) SendEvent(lane int, payload []byte) error {
	return s.send(func(c *session.Client) error { return c.SendEvent(lane, payload) })
}

// SendUnordered sends payload, delivered exactly once, in arrival order.
func (s *Session) SendUnordered(payload []byte) error {
	return s.send(func(c *session.Client) error { return c.SendUnordered(payload) })
}

// SendUnguaranteed sends payload in the next packet if it fits, never again
// (up to 1 KiB).
func (s *Session) SendUnguaranteed(payload []byte) error {
	return s.send(func(c *session.Client) error { return c.SendUnguaranteed(payload) })
}

func (s *Session) send(f func(*session.Client) error) error {
	s.mu.Lock()
	err := f(s.c)
	failing := err != nil && s.canFailover()
	s.mu.Unlock()
	if err != nil {
		if failing {
			return ErrFailingOver
		}
		if errors.Is(err, session.ErrClosed) {
			return ErrClosed
		}
		return err
	}
	s.wake() // out with the next send slot, not after the current sleep
	return nil
}

// Control is the predicted state of the object the player controls.
func (s *Session) Control() move.ControlState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.c.Control()
}

// ControlOffset is how far the last server correction moved the predicted
// position (old − new); blend it out over a few frames to hide the jump.
func (s *Session) ControlOffset() [3]float32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.c.ControlOffset()
}

// View appends every remote entity, drawn at (now − interpolation delay),
// and returns the slice. Reuse the slice between frames.
//
// After a Redirect the new connection's view starts empty; until it has
// caught up (300 ms after its first ghosts, at most 2 s) View adds the
// entities only the previous connection still shows, drawn from its last
// states (ghost ids are per connection: match entities by GhostView.Entity),
// so nothing blinks out and back in (Stats.GhostsCarried).
func (s *Session) View(dst []GhostView) []GhostView {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	n := len(dst)
	dst = s.c.View(now, dst)
	if s.old == nil || now >= s.bridgeEnd {
		return dst
	}
	have := make(map[uint64]bool, len(dst)-n)
	for _, g := range dst[n:] {
		have[g.Entity] = true
	}
	for _, g := range s.old.View(now, nil) {
		if !have[g.Entity] {
			dst = append(dst, g)
			s.carried[g.Entity] = true
		}
	}
	return dst
}

// RTT is the smoothed round-trip time to the server.
func (s *Session) RTT() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.c.RTT()
}

// Stats returns a snapshot of the counters.
func (s *Session) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Stats{ClientStats: s.c.Stats(), EventsDropped: s.drops, SocketErrors: s.sockEr,
		Redirects: s.redirects, GhostsCarried: s.carriedN + uint64(len(s.carried)), Failovers: s.failovers}
}

// ID is the connection id the server assigned (a new one after a
// Redirect).
func (s *Session) ID() handshake.ConnID {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.c.ID()
}

// Server is the server's address (another one after a Redirect).
func (s *Session) Server() netip.AddrPort {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.server
}

// LocalAddr is the socket's local address.
func (s *Session) LocalAddr() net.Addr { return s.conn.LocalAddr() }

// Done is closed when the session has ended and its goroutine exited.
func (s *Session) Done() <-chan struct{} { return s.done }

// Err is why the session ended: ErrClosed after Close, a
// *session.DisconnectError (the server's reason: kicked, shutting down...),
// session.ErrTimeout (or session.ErrForgotten, an ErrTimeout come early:
// the server answered NoConnection naming the session), session.ErrProtocol;
// nil while it runs.
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Close ends the session gracefully: it tells the server (ClientQuit, sent
// several times so one arrives) and waits for the goroutine to finish, about
// 100 ms. If ctx ends first, the socket is closed at once and Close returns
// ctx.Err() once the goroutine is gone. Close is idempotent.
func (s *Session) Close(ctx context.Context) error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		s.c.Close(s.now())
		if s.err == nil {
			s.err = ErrClosed
		}
	}
	s.mu.Unlock()
	s.wake()
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		s.conn.Close()
		<-s.done
		return ctx.Err()
	}
}
