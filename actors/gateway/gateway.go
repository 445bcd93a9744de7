package gateway

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ghostwire/ghostwire/actors/conn"
	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/actors/tokenkey"
	"github.com/ghostwire/ghostwire/actors/udp"
	"github.com/ghostwire/ghostwire/replication/handshake"
)

// Gateway is a running gateway: the socket, the reader and writer
// goroutines, the gateway actor, and the connections (actors/conn shards).
// Create it with New and stop it with Close. Its methods are safe for
// concurrent use.
type Gateway struct {
	cfg    Config
	sys    *actor.ActorSystem
	sock   *udp.Socket
	pid    *actor.PID
	core   *router
	w      *writer    // handshake replies and NoConnection
	pool   *conn.Pool // the connections (they send their own datagrams)
	disp   *pinned    // the gateway actor's mailbox goroutine
	st     *counters
	cc     *conn.Counters
	public netip.AddrPort

	free    chan *batch
	readWG  sync.WaitGroup
	closing chan struct{}
	once    sync.Once
	drained chan struct{}
	start   time.Time
	log     *slog.Logger
}

// batch is one recvmmsg worth of datagrams. The reader routes what it can
// (router.readerRoute); a batch with datagrams left for the gateway actor
// (rest: their indices) moves to it and comes back through Gateway.free.
type batch struct {
	n    int
	ms   []udp.Message
	ds   []*msg.Datagram
	rest []uint16
	// rts and kinds are readerRoute's lookups of the batch's datagrams,
	// made in a first pass over the batch (see there).
	rts   []*route
	kinds []handshake.Kind
	back  chan *batch // where the gateway actor returns it
}

func newBatch(size int, back chan *batch) *batch {
	b := &batch{
		ms: make([]udp.Message, size), ds: make([]*msg.Datagram, size), rest: make([]uint16, 0, size),
		rts: make([]*route, size), kinds: make([]handshake.Kind, size), back: back,
	}
	for i := range b.ds {
		b.ds[i] = msg.NewDatagram()
		b.ms[i].Buf = b.ds[i].Buf[:]
	}
	return b
}

// New binds the socket, spawns the gateway actor in sys and starts reading.
// ctx bounds the bind only.
func New(ctx context.Context, sys *actor.ActorSystem, cfg Config) (*Gateway, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Rand == nil {
		cfg.Rand = crand.Reader
	}
	if cfg.Wall == nil {
		cfg.Wall = time.Now
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	sock, err := udp.Listen(ctx, cfg.Listen, cfg.ReadBatch)
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	if cfg.SocketBuffer > 0 {
		if err := sock.SetBuffers(cfg.SocketBuffer, cfg.SocketBuffer); err != nil {
			log.Warn("socket buffers not resized", "err", err)
		}
	}
	public := cfg.PublicAddr
	if !public.IsValid() {
		public = sock.LocalAddr()
		if public.Addr().IsUnspecified() {
			sock.Close()
			return nil, fmt.Errorf("%w: PublicAddr must be set when listening on wildcard %s", ErrConfig, public)
		}
	}
	hs := cfg.Handshake
	hs.Addr, hs.ProtocolID, hs.OtherKeys = public, cfg.ProtocolID, cfg.OtherKeys
	start := cfg.Wall()
	srv, err := handshake.NewServer(hs, cfg.Key, start, cfg.Rand)
	if err != nil {
		sock.Close()
		return nil, fmt.Errorf("gateway: %w", err)
	}
	lim, err := handshake.NewRateLimiter(cfg.RateLimit, cfg.Rand)
	if err != nil {
		sock.Close()
		return nil, fmt.Errorf("gateway: %w", err)
	}
	g := &Gateway{
		cfg: cfg, sys: sys, sock: sock, st: new(counters), cc: new(conn.Counters), public: public,
		free: make(chan *batch, cfg.ReadQueue), closing: make(chan struct{}), drained: make(chan struct{}),
		start: start, log: log,
	}
	g.st.keys.hold(append([]tokenkey.Key{cfg.Key}, cfg.OtherKeys...))
	g.w = newWriter(sock, cfg.WriteQueue, cfg.WriteBatch)
	for range cfg.ReadQueue {
		g.free <- newBatch(cfg.ReadBatch, g.free)
	}
	mono := time.Now()
	core := newRouter(cfg, srv, lim, g.w, g.st, g.cc, func() time.Duration { return time.Since(mono) }, log)
	core.queueFree = func() int { return len(g.free) }
	core.drained = g.drained
	disp := newPinned()
	props := actor.PropsFromProducer(func() actor.Actor { return &gatewayActor{r: core} }, actor.WithDispatcher(disp))
	pid, err := sys.Root.SpawnNamed(props, "gateway-"+public.String())
	if err != nil {
		disp.close()
		sock.Close()
		return nil, fmt.Errorf("gateway: spawn: %w", err)
	}
	g.pid, g.disp = pid, disp
	pool, err := conn.NewPool(conn.PoolConfig{
		Config: cfg.Conn, Shards: cfg.Shards, Quantum: cfg.Quantum, WriteBatch: cfg.WriteBatch,
		Sys: sys, Gateway: pid, Now: core.now,
		NewWriter: func() conn.Writer { return sock.NewWriter(cfg.WriteBatch) },
		Counters:  g.cc, Log: log,
	})
	if err != nil {
		_ = sys.Root.StopFuture(pid).Wait()
		disp.close()
		sock.Close()
		return nil, fmt.Errorf("gateway: %w", err)
	}
	g.pool, g.core = pool, core
	core.setPool(pool) // before the reader starts: nothing has reached the actor yet
	if cfg.Registerer != nil {
		if err := g.registerMetrics(cfg.Registerer); err != nil {
			_ = sys.Root.StopFuture(pid).Wait()
			disp.close()
			pool.Close()
			sock.Close()
			return nil, err
		}
	}
	g.w.start()
	g.readWG.Add(1)
	go g.readLoop()
	log.Info("gateway listening", "addr", sock.LocalAddr(), "public", public, "max_conns", cfg.MaxConns)
	return g, nil
}

// Addr is the bound socket address.
func (g *Gateway) Addr() netip.AddrPort { return g.sock.LocalAddr() }

// PublicAddr is the address tokens must list to connect here.
func (g *Gateway) PublicAddr() netip.AddrPort { return g.public }

// PID is the gateway actor.
func (g *Gateway) PID() *actor.PID { return g.pid }

// Start is the wall-clock time the gateway started: tokens created before it
// are refused (handshake.ErrTokenTooOld).
func (g *Gateway) Start() time.Time { return g.start }

func (g *Gateway) readLoop() {
	defer g.readWG.Done()
	mono := time.Now()
	for {
		var b *batch
		select {
		case b = <-g.free:
		default:
			g.st.readBackpressure.Add(1)
			select {
			case b = <-g.free:
			case <-g.closing:
				return
			}
		}
		n, err := g.sock.ReadBatch(b.ms)
		if err != nil {
			g.free <- b
			if errors.Is(err, udp.ErrClosed) {
				return
			}
			// Transient (ICMP-induced ECONNREFUSED and the like): count, go on,
			// but never spin on an error that persists.
			g.st.readErrors.Add(1)
			select {
			case <-g.closing:
				return
			case <-time.After(time.Millisecond):
			}
			continue
		}
		if n > 0 {
			g.st.readBatches.Add(1)
		}
		at := time.Since(mono)
		for i := range n {
			d := b.ds[i]
			d.N, d.Addr, d.At = b.ms[i].N, b.ms[i].Addr, at
		}
		b.n = n
		if g.core.readerRoute(b) {
			g.sys.Root.Send(g.pid, b) // handshakes, unknown connections, garbage
		} else {
			b.n = 0
			g.free <- b // never blocks: the channel holds every batch
		}
	}
}

// drainRequest asks the gateway actor to close every connection with reason.
type drainRequest struct{ reason handshake.Reason }

// Close stops the gateway: every connection sends its Disconnect copies
// (ReasonServerShutdown) within DrainTimeout or ctx, whichever ends first;
// then the writer flushes, the socket closes and the actors stop. Close
// returns when every goroutine the gateway started has ended.
func (g *Gateway) Close(ctx context.Context) error {
	var err error
	g.once.Do(func() {
		g.sys.Root.Send(g.pid, &drainRequest{reason: handshake.ReasonServerShutdown})
		t := time.NewTimer(g.cfg.DrainTimeout)
		select {
		case <-g.drained:
		case <-t.C:
			err = errors.New("gateway: drain timed out; connections dropped")
		case <-ctx.Done():
			err = fmt.Errorf("gateway: drain: %w", ctx.Err())
		}
		t.Stop()
		g.pool.Close()
		g.w.close()
		close(g.closing)
		g.sock.Close()
		g.readWG.Wait()
		if e := g.sys.Root.StopFuture(g.pid).Wait(); e != nil && err == nil {
			err = fmt.Errorf("gateway: stop: %w", e)
		}
		g.disp.close()
	})
	return err
}

// RTT returns the connections' round-trip-time histogram (sampled once a
// second per connection; see conn.RTTHistogram).
func (g *Gateway) RTT() *conn.RTTHistogram { return &g.cc.RTT }

// Stats returns a snapshot of the counters. Handshakes is read before the
// handshake outcomes (Replies, HandshakeDrop, Denied), which the router
// counts first (Stats.Handshakes).
func (g *Gateway) Stats() Stats {
	c := g.st
	s := Stats{
		DatagramsIn: c.datagramsIn.Load(), BytesIn: c.bytesIn.Load(),
		DatagramsOut: g.w.sent.Load() + g.pool.Sent(), BytesOut: g.w.bytes.Load() + g.pool.Bytes(),
		Garbage: c.garbage.Load(), Unexpected: c.unexpected.Load(), UnknownConn: c.unknownConn.Load(),
		HandshakeLimited: c.handshakeLimited.Load(), NoConnSuppressed: c.noConnSuppressed.Load(), InboundDropped: c.inboundDropped.Load(),
		Routed: c.routed.Load(), Handshakes: c.handshakes.Load(), Replies: c.handshakeReplies.Load(),
		NoConnSent: c.noConnSent.Load(), Granted: c.granted.Load(), HandshakeDrop: c.handshakeDropped.Load(),
		SpawnFailed: c.spawnFailed.Load(),
		Conns:       c.conns.Load(), Pending: c.pending.Load(), Verified: c.verified.Load(),
		Moved: c.moved.Load(), Superseded: c.superseded.Load(), Redirects: c.redirects.Load(), PassedOn: c.passedOn.Load(),
		Denied: map[handshake.Reason]uint64{}, Closed: map[handshake.Reason]uint64{},
		AuthFailed: g.cc.AuthFailed.Load(), Replayed: g.cc.Replayed.Load(), WrongConn: g.cc.WrongConn.Load(),
		BadHeader: g.cc.BadHeader.Load(), AfterClose: g.cc.AfterClose.Load(), ConnGarbage: g.cc.Garbage.Load(),
		ConnUnexpected: g.cc.Unexpected.Load(), ProtocolErrors: g.cc.ProtocolErrors.Load(),
		EventsDropped: g.cc.EventsDropped.Load(), InputsDropped: g.cc.InputsDropped.Load(), MovesResent: g.cc.MovesResent.Load(), EventsResent: g.cc.EventsResent.Load(), EventsStale: g.cc.EventsStale.Load(), Relooks: g.cc.Relooks.Load(),
		PacketsDelivered: g.cc.PacketsDelivered.Load(), PacketsLost: g.cc.PacketsLost.Load(), ControlsSuperseded: g.cc.ControlsSuperseded.Load(),
		FarAccepted: g.cc.FarAccepted.Load(), WindowEvicted: g.cc.WindowEvicted.Load(),
		WriteDropped: g.w.dropped.Load() + g.pool.Dropped(), WriteErrors: g.w.errors.Load() + g.pool.Errors(),
		ReadErrors: c.readErrors.Load(), ReadBackpressure: c.readBackpressure.Load(),
		ReadBatches: c.readBatches.Load(), WriteBatches: g.w.batches.Load() + g.pool.Batches(), ReadWaits: g.sock.ReadWaits(),
	}
	s.ShardRounds = g.pool.Rounds()
	s.KeysHeld, s.TokenKeys = c.keys.snapshot()
	for r := range c.denied {
		if n := c.denied[r].Load(); n > 0 {
			s.Denied[handshake.Reason(r)] = n
		}
		if n := c.closed[r].Load(); n > 0 {
			s.Closed[handshake.Reason(r)] = n
		}
	}
	return s
}

// gatewayActor is the actor around the router: it only dispatches.
type gatewayActor struct{ r *router }

func (a *gatewayActor) Receive(ctx actor.Context) {
	r := a.r
	switch m := ctx.Message().(type) {
	case *batch:
		r.handleBatch(ctx, m)
	case *conn.Verified:
		r.onVerified(ctx, m)
	case *conn.Moved:
		r.onMoved(m)
	case *conn.Closed:
		r.onClosed(ctx, m)
	case *actor.Terminated:
		r.onTerminated(m.Who)
	case *drainRequest:
		r.drain(ctx, m.reason)
	case *redirectRequest:
		ctx.Respond(r.redirectAll(ctx, m.targets))
	case *sessionsRequest:
		ctx.Respond(r.sessions())
	case *setKeysRequest:
		ctx.Respond(r.setKeys(m))
	case *msg.Rejoin:
		// The player's zone restarted on another node: its connection
		// joins again (the cluster bridge cannot tell which connection
		// holds a player whose zone was local).
		if rt := r.byPlayer[m.Player]; rt != nil {
			ctx.Send(r.pidOf(rt), m)
		}
	case *actor.Stopping:
		r.stopping()
	}
}
