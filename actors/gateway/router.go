package gateway

import (
	"errors"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ghostwire/ghostwire/actors/conn"
	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/replication/prefetch"
)

// route is one connection as the gateway knows it.
type route struct {
	// conn, inflight and shard are all the reader reads and writes of a
	// route for a datagram (readerRoute, deliver): first, in the route's
	// first 16 bytes, so one cache line (two before: conn at 8, inflight
	// at 72), and shard is the connection's (conn.Conn.Shard, fixed for its
	// life), so the reader stages the datagram without reading a line of
	// the Conn, which its shard's core owns.
	conn     *conn.Conn   // nil in router tests and benchmarks (no pool)
	inflight atomic.Int32 // datagrams queued to the connection, shared with it (Params.Inflight)
	shard    int32
	id       handshake.ConnID
	// The address short-form packets come from is not kept here: byAddr
	// files the route under it, and the connection names it when it
	// changes (conn.Moved's From) and when it closes (conn.Closed's
	// Addr). A copy here was 32 bytes of every connection for its life,
	// the 96-byte size class, not 64 (TestRouteLayout).
	//
	// token is the connect token's id until the connection is verified,
	// when it is consumed (onVerified; forget consumes it for a
	// connection gone before): nil after. Only a pending connection needs
	// it: in the route itself it was 24 bytes of every connection for its
	// life (136 → 128 → 112 B; 96 now, TestRouteLayout).
	token  *handshake.TokenID
	player uint64
	// timeoutMS (milliseconds, the token's unit: ≤ handshake.MaxTimeout,
	// an hour) is the token's, for the token a Redirect carries
	// (RedirectAll), with the user data the connection holds
	// (conn.Conn.UserData): the player continues with the same claims.
	// verified is since ≠ 0: a bool and a time.Duration of their own put
	// the route at 136 bytes. The PID and the user data are the Conn's
	// (pidOf, userData): their copies here were 24 bytes of every
	// connection, the 112-byte size class, not 96.
	timeoutMS uint32
	since     int64 // verified at, Unix nanoseconds (wall clock; admin session age); 0 until verified
}

// routeHotBytes is the route's fields the reader reads and writes for a
// datagram (conn, inflight, shard: its first line).
const routeHotBytes = unsafe.Offsetof(route{}.shard) + unsafe.Sizeof(route{}.shard)

// attach makes c the route's connection.
func (rt *route) attach(c *conn.Conn) {
	rt.conn, rt.shard = c, int32(c.Shard())
}

// userData is the connect token's user data, for a Redirect's token: the
// connection's (none without one: router tests).
func (rt *route) userData() []byte {
	if rt.conn == nil {
		return nil
	}
	return []byte(rt.conn.UserData())
}

// pidOf is rt's connection's address: its Conn's, or for a router without
// a pool (router tests and benchmarks: no connection runs) one made once
// for rt's id and kept in r.loose.
func (r *router) pidOf(rt *route) *actor.PID {
	if rt.conn != nil {
		return rt.conn.PID()
	}
	if pid := r.loose[rt.id]; pid != nil {
		return pid
	}
	if r.loose == nil {
		r.loose = make(map[handshake.ConnID]*actor.PID)
	}
	pid := actor.NewPID("local", "conn-"+rt.id.String())
	r.loose[rt.id] = pid
	return pid
}

// verified: the connection authenticated a packet (onVerified).
func (rt *route) verified() bool { return rt.since != 0 }

// timeout is the token's connection timeout.
func (rt *route) timeout() time.Duration { return time.Duration(rt.timeoutMS) * time.Millisecond }

// sender is what the router needs of an actor context. actor.Context
// satisfies it; benchmarks pass a stub.
type sender interface {
	Send(pid *actor.PID, message any)
	Stop(pid *actor.PID)
}

// outbox is the writer as the router sees it.
type outbox interface {
	Send(d *msg.Datagram) bool
}

// router is the gateway actor's state and its per-datagram logic. It is
// owned by the gateway actor, with one exception: the reader goroutine
// routes the datagrams of known connections itself (readerRoute), reading
// byID and byAddr under mu. Only the actor writes those two tables,
// under mu; it reads them without it. Everything else is the actor's alone.
type router struct {
	cfg  Config
	srv  *handshake.Server
	lim  *handshake.RateLimiter
	out  outbox
	pool *conn.Pool // nil in router tests and benchmarks
	// loose: the PIDs of a pool-less router's routes (pidOf), by id.
	loose map[handshake.ConnID]*actor.PID
	st    *counters
	cc    *conn.Counters
	now   func() time.Duration // node monotonic clock
	log   *slog.Logger

	// mu orders the actor's writes of byID and byAddr against the
	// reader's lookups (one read lock per read batch).
	mu   sync.RWMutex
	byID idTable // every connection: the one list of them
	// byAddr routes short-form packets; a pending connection is entered too,
	// so a client whose first packets are short form still reaches it.
	byAddr   addrTable
	byPlayer map[uint64]*route

	// stage is the actor's Stager, reader the reader goroutine's (both
	// nil without a pool).
	stage, reader *conn.Stager

	queueFree func() int // free reader batches (queue depth signal); nil: unknown
	draining  bool
	// redirectTo: the gateways this one redirects its clients to
	// (redirectAll), newcomers included; redirected counts the Redirects
	// sent, for the round robin.
	redirectTo []netip.AddrPort
	redirected int
	drained    chan struct{}
	drainDone  bool
}

func newRouter(cfg Config, srv *handshake.Server, lim *handshake.RateLimiter, out outbox, st *counters,
	cc *conn.Counters, now func() time.Duration, log *slog.Logger) *router {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &router{
		cfg: cfg, srv: srv, lim: lim, out: out, st: st, cc: cc, now: now, log: log,
		byID:     newIDTable(),
		byAddr:   newAddrTable(),
		byPlayer: make(map[uint64]*route),
	}
}

// setPool connects the router to its connections (before the reader
// starts).
func (r *router) setPool(p *conn.Pool) {
	r.pool, r.stage, r.reader = p, p.NewStager(), p.NewStager()
}

// readerRoute is the reader goroutine's part of a read batch: every
// datagram of a connection it finds in byID or byAddr goes to that
// connection's shard from here, one post per shard for the batch, without
// a hop through the gateway actor. The rest (handshakes, garbage,
// unknown connections: what needs the handshake server, the rate limiter
// or a reply) is left in b.rest for the actor; readerRoute reports whether
// there is any.
//
// A datagram of a connection the actor is opening or re-addressing may
// miss here and be routed by the actor a moment later than a datagram
// after it that hit: the protocol takes that as reordering (the actor
// enters a new connection before it sends the handshake reply, so a
// client's first data packets already hit).
func (r *router) readerRoute(b *batch) bool {
	b.rest = b.rest[:0]
	if r.pool == nil {
		for i := range b.n {
			b.rest = append(b.rest, uint16(i))
		}
		return b.n > 0
	}
	// Added once per batch: the counters are shared with the actor.
	var in, bytes, routed uint64
	r.mu.RLock()
	// Two passes. The first looks every datagram's route up (a table's
	// slot is 16 bytes a connection, which the reader keeps in its
	// caches) and asks for each route's first line; the second reads
	// those lines and delivers. A route is its own allocation, in no order the batch follows, so
	// read in one pass each was a miss the datagram waited for (the
	// route's test, 1.9 % of a 2,000-player node's samples); asked for a
	// batch ahead, the misses overlap one another.
	rts, kinds := b.rts[:b.n], b.kinds[:b.n]
	for i := range rts {
		d := b.ds[i]
		rt, kind := r.lookup(d.Bytes(), d.Addr)
		rts[i], kinds[i] = rt, kind
		if rt != nil {
			prefetch.Lines(unsafe.Pointer(rt), routeHotBytes)
		}
	}
	for i, rt := range rts {
		rts[i] = nil // the batch outlives the route; a pointer kept here would keep it
		d, kind := b.ds[i], kinds[i]
		if rt == nil || rt.conn == nil { // a route without a connection goes through the actor (deliver's ctx)
			b.rest = append(b.rest, uint16(i))
			continue
		}
		in++
		bytes += uint64(d.N)
		if r.deliver(nil, rt, d, r.reader, kind == handshake.KindDisconnect, &routed) {
			// Handed to a connection: the slot takes a fresh buffer.
			d := msg.NewDatagram()
			b.ds[i] = d
			b.ms[i].Buf = d.Buf[:]
		}
	}
	r.mu.RUnlock()
	if in > 0 {
		r.st.datagramsIn.Add(in)
		r.st.bytesIn.Add(bytes)
	}
	if routed > 0 {
		r.st.routed.Add(routed)
	}
	r.reader.Flush() // one post per connection shard for the whole batch
	return len(b.rest) > 0
}

// lookup is the connection a data packet or Disconnect is for (nil for
// every other kind, and for a connection not in the tables), and the
// packet's kind.
func (r *router) lookup(pkt []byte, from netip.AddrPort) (*route, handshake.Kind) {
	kind, err := handshake.Classify(pkt)
	if err != nil {
		return nil, kind
	}
	switch kind {
	case handshake.KindData:
		return r.byAddr.get(from), kind
	case handshake.KindRouted:
		if id, _, err := handshake.SplitRouted(pkt); err == nil {
			return r.byID.get(id), kind
		}
	case handshake.KindDisconnect:
		if id, err := handshake.ParseDisconnectID(pkt); err == nil {
			return r.byID.get(id), kind
		}
	}
	return nil, kind
}

// handleBatch is the gateway actor's part of a read batch: the datagrams
// the reader left (b.rest).
func (r *router) handleBatch(ctx sender, b *batch) {
	for _, i := range b.rest {
		if r.handle(ctx, b.ds[i]) {
			// Handed to a connection: the slot takes a fresh buffer.
			d := msg.NewDatagram()
			b.ds[i] = d
			b.ms[i].Buf = d.Buf[:]
		}
	}
	if r.stage != nil {
		r.stage.Flush() // one post per connection shard for the whole batch
	}
	b.n, b.rest = 0, b.rest[:0]
	b.back <- b // never blocks: the channel holds every batch
}

// handle decides the fate of one datagram and reports whether it was handed
// to a connection (true: d now belongs to it; false: the caller keeps d,
// also when a small copy of it went to a connection, see deliver). Every
// path counts exactly once; the rejection paths allocate nothing.
func (r *router) handle(ctx sender, d *msg.Datagram) bool {
	r.st.datagramsIn.Add(1)
	r.st.bytesIn.Add(uint64(d.N))
	pkt := d.Bytes()
	kind, err := handshake.Classify(pkt)
	if err != nil {
		r.st.garbage.Add(1)
		return false
	}
	switch kind {
	case handshake.KindData:
		if rt := r.byAddr.get(d.Addr); rt != nil {
			return r.deliver(ctx, rt, d, r.stage, false, nil)
		}
		r.noConnection(d)
	case handshake.KindRouted:
		id, _, err := handshake.SplitRouted(pkt)
		if err != nil {
			r.st.garbage.Add(1)
			return false
		}
		if rt := r.byID.get(id); rt != nil {
			return r.deliver(ctx, rt, d, r.stage, false, nil)
		}
		r.noConnection(d)
	case handshake.KindDisconnect:
		id, err := handshake.ParseDisconnectID(pkt)
		if err != nil {
			r.st.garbage.Add(1)
			return false
		}
		if rt := r.byID.get(id); rt != nil {
			return r.deliver(ctx, rt, d, r.stage, true, nil)
		}
		// Never answer a Disconnect: no ping-pong between two endpoints.
		r.st.unknownConn.Add(1)
	case handshake.KindConnectRequest, handshake.KindChallengeResponse:
		r.handshake(ctx, d)
	default:
		r.st.unexpected.Add(1)
	}
	return false
}

// deliver queues d to its connection (staged in st, the calling
// goroutine's Stager) unless that connection already has MaxInbound
// datagrams waiting (policy: drop the newest, count it), or, for a
// Disconnect (bye), disconnectRoom more. A datagram of up to
// msg.LargeDatagram bytes (a client's, all but a hostile one's) goes as a
// compact copy, and d stays with the caller (false): what waits in a busy
// shard's queue is 128, 160, 256, 336 or 512 bytes a datagram
// (msg.TinyDatagram: moves and acks), not a full-size buffer. A datagram queued counts as
// routed in *routed (readerRoute adds a batch's to the shared counter at
// once), or in the shared counter when routed is nil.
func (r *router) deliver(ctx sender, rt *route, d *msg.Datagram, st *conn.Stager, bye bool, routed *uint64) bool {
	limit := r.cfg.Conn.MaxInbound
	if bye {
		limit += disconnectRoom
	}
	if int(rt.inflight.Load()) >= limit {
		r.st.inboundDropped.Add(1)
		return false
	}
	rt.inflight.Add(1)
	if routed != nil {
		*routed++ // readerRoute adds a batch's at once
	} else {
		r.st.routed.Add(1)
	}
	var dc *msg.DatagramCache
	if st != nil {
		dc = st.Datagrams()
	}
	q, handed := d.CompactWith(dc), false
	if q == nil {
		q, handed = d, true
	}
	if rt.conn != nil {
		st.StageOn(int(rt.shard), rt.conn, q) // posted with the rest of the batch
	} else {
		ctx.Send(r.pidOf(rt), q)
	}
	return handed
}

// disconnectRoom is how many Disconnects may wait for a connection beyond
// its MaxInbound datagrams: a client's goodbye (a few copies) must not be
// dropped behind a backlog of its own data packets, or its connection
// stays open until the timeout (200 clients quitting at once from a
// starved race build: 24 of them, a minute's token timeout). Bounded: a
// forged Disconnect takes a place too, until the connection rejects it.
const disconnectRoom = 4

// noConnection answers data for no connection with a NoConnection packet
// (9 bytes, smaller than any data packet, never sent in answer to a
// handshake packet or a Disconnect), rate limited per source prefix, so it
// can neither amplify nor be used to flood a spoofed victim.
func (r *router) noConnection(d *msg.Datagram) {
	r.st.unknownConn.Add(1)
	if !r.lim.Allow(d.Addr.Addr(), r.now()) {
		r.st.noConnSuppressed.Add(1)
		return
	}
	reply := msg.NewDatagram()
	out, err := handshake.AppendNoConnection(reply.Buf[:0], d.Bytes())
	if err != nil {
		reply.Release()
		return
	}
	reply.N, reply.Addr = len(out), d.Addr
	r.st.noConnSent.Add(1)
	r.out.Send(reply)
}

// load is the handshake path for the next request, from the gateway's real
// state (package doc § Load).
func (r *router) load() handshake.Load {
	n := r.byID.len()
	switch {
	case n >= r.cfg.MaxConns || r.draining && len(r.redirectTo) == 0:
		return handshake.LoadFull
	case r.draining:
		// Redirecting: a newcomer is taken only to be passed on
		// (passOn), under a cookie: nothing held for an unproven source.
		return handshake.LoadHigh
	case n >= r.cfg.ChallengeAt:
		return handshake.LoadHigh
	case r.queueFree != nil && r.queueFree() < r.cfg.ReadQueue/2:
		return handshake.LoadHigh
	}
	return handshake.LoadNormal
}

func (r *router) handshake(ctx sender, d *msg.Datagram) {
	if !r.lim.Allow(d.Addr.Addr(), r.now()) {
		r.st.handshakeLimited.Add(1)
		return
	}
	// handshakes is counted last, after the outcome (reply, denial or
	// drop): Stats reads it first, so a snapshot that counts a request
	// also counts what became of it.
	defer r.st.handshakes.Add(1)
	reply := msg.NewDatagram()
	out, grant, err := r.srv.Handle(reply.Buf[:0], d.Bytes(), d.Addr, r.cfg.Wall(), r.load())
	if err != nil {
		var reason handshake.Reason
		for _, rs := range deniable {
			if errors.Is(err, rs.Err()) {
				reason = rs
				break
			}
		}
		if reason != handshake.ReasonNone && len(out) > 0 {
			r.st.denied[reason].Add(1)
		} else if len(out) == 0 {
			r.st.handshakeDropped.Add(1)
		}
	}
	if grant != nil {
		// Before the reply: the client's first data packets answer it, and
		// the reader routes them only once the connection is in the tables.
		r.spawn(ctx, grant)
	}
	if len(out) > 0 {
		reply.N, reply.Addr = len(out), d.Addr
		r.st.handshakeReplies.Add(1)
		r.out.Send(reply)
	} else {
		reply.Release()
	}
}

// deniable are the reasons a Denied reply carries, for counting.
var deniable = []handshake.Reason{
	handshake.ReasonServerFull, handshake.ReasonWrongVersion, handshake.ReasonWrongProtocol,
	handshake.ReasonBadToken, handshake.ReasonTokenExpired, handshake.ReasonWrongServer,
	handshake.ReasonTokenTooOld, handshake.ReasonTokenInUse, handshake.ReasonTokenUsed, handshake.ReasonBusy,
}

func (r *router) spawn(ctx sender, g *handshake.Grant) {
	sess, err := g.Session()
	if err != nil {
		r.st.spawnFailed.Add(1)
		r.srv.Consume(g.Claims.ID)
		r.log.Error("grant without session", "err", err)
		return
	}
	ud := slices.Clone(g.Claims.UserData[:g.Claims.UserDataLen])
	tok := g.Claims.ID
	rt := &route{id: g.ID, token: &tok, player: g.Claims.PlayerID,
		timeoutMS: uint32(g.Claims.Timeout / time.Millisecond)}
	var zone *actor.PID
	if r.cfg.Zone != nil {
		zone = r.cfg.Zone(g.Claims.PlayerID, ud)
	}
	p := conn.Params{
		Handshake: sess, Player: g.Claims.PlayerID, Timeout: g.Claims.Timeout,
		UserData: unsafe.String(unsafe.SliceData(ud), len(ud)), // ud is never written after (ZoneFunc: read only)
		Zone:     zone, Inflight: &rt.inflight,
	}
	if r.pool != nil {
		c, err := r.pool.Open(p)
		if err != nil {
			r.st.spawnFailed.Add(1)
			r.srv.Consume(g.Claims.ID)
			r.log.Error("connection not opened", "err", err)
			return
		}
		rt.attach(c)
	}
	r.mu.Lock()
	r.byID.set(rt.id, rt)
	r.byAddr.set(g.Addr, rt)
	r.mu.Unlock()
	r.st.granted.Add(1)
	r.st.keys.granted(g.Key)
	r.st.conns.Add(1)
	r.st.pending.Add(1)
	r.log.Debug("conn granted", "conn", rt.id, "player", rt.player, "addr", g.Addr)
}

func (r *router) onVerified(ctx sender, m *conn.Verified) {
	rt := r.byID.get(m.ID)
	if rt == nil || rt.verified() {
		return
	}
	rt.since = max(time.Now().UnixNano(), 1) // ≠ 0: verified
	r.srv.Consume(*rt.token)                 // the token has opened its one session
	rt.token = nil
	r.st.verified.Add(1)
	r.st.pending.Add(-1)
	if old := r.byPlayer[rt.player]; old != nil && old != rt {
		// The player connected again (a new token): the newer session wins.
		r.st.superseded.Add(1)
		ctx.Send(r.pidOf(old), &conn.Shutdown{Reason: handshake.ReasonDuplicate})
	}
	r.byPlayer[rt.player] = rt
	r.log.Debug("conn verified", "conn", rt.id, "player", rt.player)
	if r.draining && len(r.redirectTo) > 0 {
		r.passOn(ctx, rt)
	}
}

func (r *router) onMoved(m *conn.Moved) {
	rt := r.byID.get(m.ID)
	if rt == nil {
		return
	}
	// m.From is where the gateway filed the route: its address at spawn
	// (the Grant's, canonical as the session's), then each Moved's To,
	// which the connection reports in order.
	r.mu.Lock()
	if r.byAddr.get(m.From) == rt {
		r.byAddr.del(m.From)
	}
	r.byAddr.set(m.To, rt)
	r.mu.Unlock()
	r.st.moved.Add(1)
}

func (r *router) onClosed(ctx sender, m *conn.Closed) {
	rt := r.byID.get(m.ID)
	if rt == nil {
		return
	}
	r.st.closed[m.Reason].Add(1)
	r.forget(rt, m.Addr)
	ctx.Stop(r.pidOf(rt))
	r.log.Debug("conn closed", "conn", rt.id, "player", rt.player, "reason", m.Reason)
}

// onTerminated cleans up after a connection that stopped without Closed (it
// failed; the supervisor stopped it). That is rare enough to look for it
// among all the connections: a map by PID was ≈ 50 B a connection, kept
// for this alone.
func (r *router) onTerminated(who *actor.PID) {
	if who == nil {
		return
	}
	for rt := range r.byID.all() {
		if r.pidOf(rt).Id == who.Id {
			r.st.closed[handshake.ReasonServerShutdown].Add(1)
			r.forget(rt, netip.AddrPort{}) // its address looked for: it sent no Closed
			return
		}
	}
}

// forget drops rt from the tables. at is its address as its connection
// last reported it (conn.Closed's Addr: where the route is filed, unless
// another connection took the address since); the zero AddrPort when it
// is not known (a connection that failed), which has the address table
// searched for rt (rare: as onTerminated's search of the routes).
func (r *router) forget(rt *route, at netip.AddrPort) {
	r.mu.Lock()
	r.byID.del(rt.id)
	if !at.IsValid() {
		r.byAddr.delRoute(rt)
	} else if r.byAddr.get(at) == rt {
		r.byAddr.del(at)
	}
	r.mu.Unlock()
	delete(r.loose, rt.id)
	if r.byPlayer[rt.player] == rt {
		delete(r.byPlayer, rt.player)
	}
	if !rt.verified() {
		r.srv.Consume(*rt.token) // gone before verification: the token stays spent
		r.st.pending.Add(-1)
	}
	r.st.conns.Add(-1)
	r.checkDrained()
}

// drain closes every connection with reason and refuses new ones; drained is
// closed once none is left.
func (r *router) drain(ctx sender, reason handshake.Reason) {
	r.draining = true
	for rt := range r.byID.all() {
		ctx.Send(r.pidOf(rt), &conn.Shutdown{Reason: reason})
	}
	r.checkDrained()
}

func (r *router) checkDrained() {
	if r.draining && r.byID.len() == 0 && !r.drainDone && r.drained != nil {
		r.drainDone = true
		close(r.drained)
	}
}

func (r *router) stopping() {
	r.draining = true
}
