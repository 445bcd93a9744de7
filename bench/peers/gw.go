package main

// ghostwire: the product's server path (actors/gateway: one UDP socket with
// recvmmsg/sendmmsg, stateless handshake, one connection actor per client
// running session.Server with AEAD, notify and event lanes, its ghost manager)
// with a bench actor in the zone's place; clients are session.Client, one
// socket and goroutine each.

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ghostwire/ghostwire/actors/gateway"
	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/actors/tokenkey"
	"github.com/ghostwire/ghostwire/replication/event"
	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/replication/session"
)

// ---------------------------------------------------------------------------
// Server

type gwServer struct {
	sys    *actor.ActorSystem
	gw     *gateway.Gateway
	zone   *actor.PID
	rec    *recorder
	stop   chan struct{}
	ticker sync.WaitGroup
}

func startGhostwire(o serveOpts) (server, error) {
	key, err := tokenkey.Load(o.keyFile)
	if err != nil {
		return nil, err
	}
	quiet := slog.New(slog.DiscardHandler)
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	s := &gwServer{sys: sys, rec: new(recorder), stop: make(chan struct{})}
	s.zone = sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &benchZone{rec: s.rec, players: map[uint64]*gwPlayer{}, buf: make([]byte, o.stateSize)}
	}))
	cfg := gateway.DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.Key = key
	cfg.MaxConns = max(cfg.MaxConns, 2*o.clients)
	cfg.ChallengeAt = cfg.MaxConns / 2
	// Every bench client shares 127.0.0.1's /24 bucket of the per-prefix
	// handshake limit (100/s by default): lift it, as the gateway's own
	// loopback tests do. It only paces handshakes, which happen before the
	// measurement window.
	cfg.RateLimit.Burst = 1 << 20
	cfg.RateLimit.Interval = time.Microsecond
	cfg.RateLimit.GlobalBurst = 1 << 20
	cfg.RateLimit.GlobalInterval = time.Microsecond
	cfg.Zone = func(uint64, []byte) *actor.PID { return s.zone }
	if s.gw, err = gateway.New(context.Background(), sys, cfg); err != nil {
		return nil, err
	}
	// The zone's tick: the state of every player goes out at stateHz, from
	// one actor, as a real zone's tick sends its controls and views.
	period := time.Second / time.Duration(o.stateHz)
	s.ticker.Add(1)
	go func() {
		defer s.ticker.Done()
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
				sys.Root.Send(s.zone, zoneTick{})
			}
		}
	}()
	return s, nil
}

func (s *gwServer) addr() netip.AddrPort { return s.gw.PublicAddr() }
func (s *gwServer) setWindow(a, b int64) { s.rec.setWindow(a, b) }
func (s *gwServer) counts() (uint64, uint64) {
	return s.rec.recvWin.Load(), s.rec.sentWin.Load()
}
func (s *gwServer) report() serverReport {
	st := s.gw.Stats()
	return serverReport{Up: s.rec.summary(), DownSent: s.rec.sentWin.Load(), Extra: map[string]any{"gateway": st}}
}

func (s *gwServer) close() {
	close(s.stop)
	s.ticker.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_ = s.gw.Close(ctx)
	_ = s.sys.Root.StopFuture(s.zone).Wait()
	s.sys.Shutdown()
}

type zoneTick struct{}

type gwPlayer struct {
	conn    *actor.PID
	lastUp  uint32
	downSeq uint32
}

// benchZone stands where a zone actor stands: it takes each connection's
// Join, Input (the client's events, decoded, in lane order) and Leave, and
// on every tick sends each player one Output with the state message on the
// guaranteed-ordered lane 0. It simulates nothing.
type benchZone struct {
	rec     *recorder
	players map[uint64]*gwPlayer
	buf     []byte
}

func (z *benchZone) input(m *msg.Input) {
	if p := z.players[m.Player]; p != nil {
		at := nowNS()
		for _, e := range m.Events {
			z.rec.recv(e.Payload, &p.lastUp, at)
		}
	}
	m.Release()
}

func (z *benchZone) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *msg.Join:
		z.players[m.Player] = &gwPlayer{conn: m.Conn}
	case *msg.Leave:
		delete(z.players, m.Player)
	case *msg.Input:
		z.input(m)
	case *msg.Inputs: // a connection shard's round of inputs
		for i, in := range m.List {
			m.List[i] = nil
			z.input(in)
		}
		m.Release()
	case zoneTick:
		for id, p := range z.players {
			p.downSeq++
			ts := nowNS()
			stamp(z.buf, ts, uint32(id), p.downSeq)
			o := msg.NewOutput()
			o.Player = id
			o.Add(event.Ordered, 0, 0, z.buf)
			ctx.Send(p.conn, o)
			z.rec.sent(ts)
		}
	}
}

// ---------------------------------------------------------------------------
// Clients
//
// Each client is a session.Client — the protocol core client.Dial wraps and
// botswarm drives — owned by one goroutine with its own UDP socket, which
// also makes the client's inputs (so no lock sits between the game and the
// session). client.Session would add a mutex and a cross-goroutine wake to
// every SendEvent; at 1,000 clients on two shared cores that made the driver
// fall behind its 30 Hz schedule. The server side does not change.

type gwClients struct {
	goSide
	key   tokenkey.Key
	opts  clientOpts
	done  chan struct{}
	wg    sync.WaitGroup
	mu    sync.Mutex
	socks []*net.UDPConn
}

func newGhostwireClients(o clientOpts) (clientSet, error) {
	key, err := tokenkey.Load(o.keyFile)
	if err != nil {
		return nil, err
	}
	return &gwClients{goSide: newGoSide(), key: key, opts: o, done: make(chan struct{})}, nil
}

// gwHandler delivers the server's events into the recorder.
type gwHandler struct {
	rec  *recorder
	last uint32
}

func (h *gwHandler) Event(e event.Event) { h.rec.recv(e.Payload, &h.last, nowNS()) }

func (c *gwClients) dial(ctx context.Context, n int, server, via netip.AddrPort) error {
	connected := make(chan error, n)
	period := time.Second / time.Duration(c.opts.inputHz)
	for i := range n {
		tok, err := handshake.IssueToken(c.key, handshake.TokenParams{
			PlayerID: uint64(i + 1), ProtocolID: tokenkey.DefaultProtocolID, Expiry: 10 * time.Minute,
			Timeout: 10 * time.Second, ServerAddrs: []netip.AddrPort{server},
		}, time.Now(), crand.Reader)
		if err != nil {
			return err
		}
		sock, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:0")))
		if err != nil {
			return err
		}
		_ = sock.SetReadBuffer(1 << 20)
		c.mu.Lock()
		c.socks = append(c.socks, sock)
		c.mu.Unlock()
		start := time.Now()
		h := &gwHandler{rec: c.rec}
		// The session is told the server's address (its keys are bound to
		// it); the datagrams go to via, the relay or the server itself.
		sc, err := session.NewClient(tok, server, session.DefaultClientConfig(), h, time.Now(), 0)
		if err != nil {
			return err
		}
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.run(i, sc, sock, via, start, period*time.Duration(i)/time.Duration(n), period, connected)
		}()
		// Pace the connects a little: n handshakes at once would be a burst
		// no real server sees (and the load window starts later anyway).
		if i%64 == 63 {
			time.Sleep(5 * time.Millisecond)
		}
	}
	for range n {
		select {
		case err := <-connected:
			if err != nil {
				return err
			}
		case <-ctx.Done():
			return fmt.Errorf("ghostwire: clients connecting: %w", ctx.Err())
		}
	}
	return nil
}

// run is one client's goroutine: inputs at their time, Poll and send what
// is due, wait for a datagram or the next deadline, feed what arrived.
func (c *gwClients) run(i int, sc *session.Client, sock *net.UDPConn, via netip.AddrPort, start time.Time,
	phase, period time.Duration, connected chan<- error) {
	sbuf := make([]byte, 0, session.MaxPacketSize)
	rbuf := make([]byte, session.MaxPacketSize+1)
	in := make([]byte, c.opts.inputSize)
	var seq uint32
	up := false
	var nextInput time.Duration
	for {
		select {
		case <-c.done:
			return
		default:
		}
		now := time.Since(start)
		if sc.State() == handshake.StateConnected {
			if !up {
				up = true
				nextInput = now + phase
				connected <- nil
			}
			if now >= nextInput {
				seq++
				ts := nowNS()
				stamp(in, ts, uint32(i), seq)
				if sc.SendEvent(0, in) == nil { // guaranteed-ordered lane 0; copies in
					c.rec.sent(ts)
				}
				nextInput += period
				if nextInput <= now {
					nextInput = now + period
				}
			}
		}
		for {
			out, err := sc.Poll(now, sbuf[:0])
			if err != nil || len(out) == 0 {
				break
			}
			if n, err := sock.WriteToUDPAddrPort(out, via); err == nil {
				c.tr.upB.Add(uint64(n))
				c.tr.upP.Add(1)
			}
		}
		if sc.State() == handshake.StateClosed {
			if !up {
				connected <- fmt.Errorf("ghostwire client %d: %v", i, sc.Err())
			}
			return
		}
		wake := min(sc.NextDeadline(now), now+100*time.Millisecond)
		if up {
			wake = min(wake, nextInput)
		}
		if wake <= now {
			wake = now + 100*time.Microsecond
		}
		_ = sock.SetReadDeadline(start.Add(wake))
		for {
			n, from, err := sock.ReadFromUDPAddrPort(rbuf)
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				break // the deadline
			}
			if from.Port() != via.Port() || from.Addr().Unmap() != via.Addr().Unmap() || n > session.MaxPacketSize {
				continue
			}
			c.tr.downB.Add(uint64(n))
			c.tr.downP.Add(1)
			_ = sc.Receive(time.Since(start), rbuf[:n])
			_ = sock.SetReadDeadline(time.Now()) // take what else is queued, then go round
		}
	}
}

func (c *gwClients) close() {
	close(c.done)
	c.mu.Lock()
	for _, s := range c.socks {
		s.Close()
	}
	c.mu.Unlock()
	c.wg.Wait()
}
