package gateway

import (
	"net/netip"
	"runtime"
	"testing"
	"unsafe"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ghostwire/ghostwire/actors/conn"
	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/replication/handshake"
)

// A connection with MaxInbound datagrams queued gets no more: the newest is
// dropped and counted, so a flood aimed at one connection cannot grow its
// queue; only its client's goodbye has a little room beyond.
func TestInboundQueueIsBounded(t *testing.T) {
	out := new(discard)
	r := newBenchRouter(t, out, seeded(1))
	r.cfg.Conn.MaxInbound = 3
	rt := &route{id: handshake.ConnID{1}}
	r.byID.set(rt.id, rt)
	r.byAddr.set(benchClient, rt)
	held := 0
	ctx := &stubCtx{deliver: func(d *msg.Datagram) { held++; d.Release() }} // the actor never catches up
	for range 10 {
		d := msg.NewDatagram()
		d.N = copy(d.Buf[:], make([]byte, 40)) // first byte 0: a short-form data packet
		d.Addr = benchClient
		if !r.handle(ctx, d) {
			d.Release()
		}
	}
	if held != 3 || r.st.inboundDropped.Load() != 7 || rt.inflight.Load() != 3 {
		t.Fatalf("delivered %d, dropped %d, in flight %d; want 3, 7, 3", held, r.st.inboundDropped.Load(), rt.inflight.Load())
	}
	// The client's goodbye still gets through the full queue (its
	// Disconnect copies have disconnectRoom more), and no more than that.
	for range disconnectRoom + 2 {
		d := msg.NewDatagram()
		bye := make([]byte, handshake.DisconnectSize)
		bye[0] = handshake.KindDisconnect.ControlByte()
		copy(bye[1:], rt.id[:])
		d.N = copy(d.Buf[:], bye)
		d.Addr = benchClient
		if !r.handle(ctx, d) {
			d.Release()
		}
	}
	if held != 3+disconnectRoom || r.st.inboundDropped.Load() != 9 {
		t.Fatalf("Disconnects on a full queue: delivered %d, dropped %d; want %d, 9", held-3, r.st.inboundDropped.Load()-7, disconnectRoom)
	}
}

// The handshake path follows the gateway's state: one round trip when
// quiet, cookies from ChallengeAt connections or when the reader backs up,
// refusal at MaxConns and while draining.
func TestLoadFollowsState(t *testing.T) {
	r := newBenchRouter(t, new(discard), seeded(1))
	r.cfg.MaxConns, r.cfg.ChallengeAt, r.cfg.ReadQueue = 4, 2, 8
	free := 8
	r.queueFree = func() int { return free }
	add := func(i byte) { r.byID.set(handshake.ConnID{i}, &route{}) }
	for _, tc := range []struct {
		name  string
		setup func()
		want  handshake.Load
	}{
		{"empty", func() {}, handshake.LoadNormal},
		{"one conn", func() { add(1) }, handshake.LoadNormal},
		{"at ChallengeAt", func() { add(2) }, handshake.LoadHigh},
		{"at MaxConns", func() { add(3); add(4) }, handshake.LoadFull},
		{"reader backed up", func() { r.byID = newIDTable(); free = 3 }, handshake.LoadHigh},
		{"draining", func() { free = 8; r.draining = true }, handshake.LoadFull},
	} {
		tc.setup()
		if got := r.load(); got != tc.want {
			t.Errorf("%s: load %v, want %v", tc.name, got, tc.want)
		}
	}
}

// NoConnection replies are rate limited per source; every datagram is still
// counted as UnknownConn.
func TestNoConnectionIsRateLimited(t *testing.T) {
	out := new(discard)
	r := newBenchRouter(t, out, seeded(1))
	ctx := new(stubCtx)
	const n = 1000
	for range n {
		d := msg.NewDatagram()
		d.N = copy(d.Buf[:], make([]byte, 40))
		d.Addr = benchClient
		r.handle(ctx, d)
		d.Release()
	}
	burst := uint64(r.cfg.RateLimit.Burst)
	if r.st.unknownConn.Load() != n || r.st.noConnSent.Load() > burst+1 || r.st.noConnSent.Load() == 0 ||
		r.st.noConnSent.Load()+r.st.noConnSuppressed.Load() != n {
		t.Fatalf("unknown %d, replies %d, suppressed %d (burst %d)", r.st.unknownConn.Load(), r.st.noConnSent.Load(), r.st.noConnSuppressed.Load(), burst)
	}
	if out.n != int(r.st.noConnSent.Load()) || out.bytes != out.n*handshake.NoConnectionSize {
		t.Fatalf("wrote %d replies of %d bytes", out.n, out.bytes)
	}
}

// Handshake work per source prefix is rate limited before any crypto: a
// flood of connect requests from one /24 gets Burst handled, the rest
// dropped unanswered and counted.
func TestHandshakeRequestsAreRateLimited(t *testing.T) {
	r := newBenchRouter(t, new(discard), seeded(1))
	ctx := new(stubCtx)
	req := make([]byte, handshake.RequestSize)
	req[0] = handshake.KindConnectRequest.ControlByte() // right kind and size, no magic: dropped silently
	const n = 500
	for i := range n {
		d := msg.NewDatagram()
		d.N = copy(d.Buf[:], req)
		d.Addr = netip.AddrPortFrom(netip.AddrFrom4([4]byte{203, 0, 113, byte(i)}), 4000) // one /24, many hosts
		r.handle(ctx, d)
		d.Release()
	}
	burst := uint64(r.cfg.RateLimit.Burst)
	if r.st.handshakes.Load() > burst+1 || r.st.handshakes.Load()+r.st.handshakeLimited.Load() != n {
		t.Fatalf("handled %d, limited %d of %d (burst %d)", r.st.handshakes.Load(), r.st.handshakeLimited.Load(), n, burst)
	}
	if r.st.handshakeReplies.Load() != 0 {
		t.Fatalf("%d replies to requests without the protocol magic", r.st.handshakeReplies.Load())
	}
}

// TestTerminatedConnectionIsForgotten: a connection that stops without
// Closed (it failed) is found by its PID among the routes and forgotten;
// a PID the gateway does not know changes nothing.
func TestTerminatedConnectionIsForgotten(t *testing.T) {
	r := newBenchRouter(t, new(discard), seeded(1))
	a := &route{id: handshake.ConnID{1}, since: 1}
	b := &route{id: handshake.ConnID{2}, since: 1}
	aAddr, bAddr := benchClient, netip.AddrPortFrom(benchClient.Addr(), 9)
	for i, rt := range []*route{a, b} {
		r.byID.set(rt.id, rt)
		r.byPlayer[rt.player] = rt
		r.byAddr.set([]netip.AddrPort{aAddr, bAddr}[i], rt)
		r.st.conns.Add(1)
	}
	r.onTerminated(actor.NewPID("t", "conn$3"))
	if r.byID.len() != 2 {
		t.Fatalf("an unknown PID removed a route: %d left", r.byID.len())
	}
	r.onTerminated(actor.NewPID("local", r.pidOf(b).Id))
	if r.byID.get(b.id) != nil || r.byID.len() != 1 || r.byAddr.get(bAddr) != nil {
		t.Fatalf("the terminated connection is still routed: %d routes by id", r.byID.len())
	}
	if r.byID.get(a.id) != a || r.byAddr.get(aAddr) != a {
		t.Fatal("the other connection lost its route")
	}
	if got := r.st.closed[handshake.ReasonServerShutdown].Load(); got != 1 {
		t.Fatalf("closed by ServerShutdown %d, want 1", got)
	}
}

// TestRouterFollowsTheConnectionsAddress: a route keeps no address of
// its own (TestRouteLayout); the router moves it in byAddr by each
// conn.Moved's From and To, lists it there (sessions), and forgets it by
// conn.Closed's Addr — leaving alone a newer connection that took the
// address meanwhile — or, without one, by looking for it.
func TestRouterFollowsTheConnectionsAddress(t *testing.T) {
	r := newBenchRouter(t, new(discard), seeded(1))
	ctx := &stubCtx{}
	a0 := benchClient
	a1 := netip.AddrPortFrom(benchClient.Addr(), 7001)
	a2 := netip.MustParseAddrPort("[2001:db8::7]:7002")
	rt := &route{id: handshake.ConnID{1}, player: 11, since: 1}
	r.byID.set(rt.id, rt)
	r.byAddr.set(a0, rt)
	r.byPlayer[rt.player] = rt
	r.st.conns.Add(1)
	r.onMoved(&conn.Moved{ID: rt.id, From: a0, To: a1})
	r.onMoved(&conn.Moved{ID: rt.id, From: a1, To: a2})
	if r.byAddr.get(a0) != nil || r.byAddr.get(a1) != nil || r.byAddr.get(a2) != rt || r.byAddr.len() != 1 {
		t.Fatalf("after two moves: %p %p %p, %d addresses", r.byAddr.get(a0), r.byAddr.get(a1), r.byAddr.get(a2), r.byAddr.len())
	}
	if ss := r.sessions(); len(ss) != 1 || ss[0].Addr != a2 || ss[0].Player != 11 {
		t.Fatalf("sessions %+v, want player 11 at %v", ss, a2)
	}
	// Another connection from a2 (the client's new session) takes the
	// address before the old one's Closed comes.
	nw := &route{id: handshake.ConnID{2}, player: 12, since: 1}
	r.byID.set(nw.id, nw)
	r.byAddr.set(a2, nw)
	r.st.conns.Add(1)
	r.onClosed(ctx, &conn.Closed{ID: rt.id, Addr: a2, Player: 11, Reason: handshake.ReasonTimeout})
	if r.byID.get(rt.id) != nil || r.byAddr.get(a2) != nw {
		t.Fatalf("closing the old connection: it is routed (%p) or the new one lost its address (%p)", r.byID.get(rt.id), r.byAddr.get(a2))
	}
	// A Closed without an address (a connection that never started)
	// has the route looked for.
	r.onClosed(ctx, &conn.Closed{ID: nw.id, Player: 12, Reason: handshake.ReasonTimeout})
	if r.byID.len() != 0 || r.byAddr.len() != 0 {
		t.Fatalf("%d routes by id, %d by address left", r.byID.len(), r.byAddr.len())
	}
}

// TestRouteLayout: a route (one per connection) stays in the 64-byte size
// class, one cache line (96 with a copy of the client's address, which
// byAddr files it under; 112 with copies of its Conn's PID and user data,
// 128 with the connect token's id in it for the connection's life, 144
// with a verified flag and a time.Duration timeout of its own, 160 with
// its own inflight counter allocation and a time.Time).
func TestRouteLayout(t *testing.T) {
	if n := unsafe.Sizeof(route{}); n > 64 {
		t.Errorf("route is %d bytes, over the 64-byte size class", n)
	}
}

// TestRouteReaderFieldsFirst: what the reader reads and writes of a route
// for each datagram (conn, inflight, shard) sits in its first 16 bytes, so
// in one cache line wherever the object starts (the 112- and 96-byte
// classes start objects 16- and 32-byte aligned; the 64-byte one a line
// each): one miss a datagram, not two.
func TestRouteReaderFieldsFirst(t *testing.T) {
	var rt route
	for _, f := range []struct {
		name     string
		off, end uintptr
	}{
		{"conn", unsafe.Offsetof(rt.conn), unsafe.Offsetof(rt.conn) + unsafe.Sizeof(rt.conn)},
		{"inflight", unsafe.Offsetof(rt.inflight), unsafe.Offsetof(rt.inflight) + unsafe.Sizeof(rt.inflight)},
		{"shard", unsafe.Offsetof(rt.shard), unsafe.Offsetof(rt.shard) + unsafe.Sizeof(rt.shard)},
	} {
		if f.end > 16 {
			t.Errorf("route.%s at bytes %d–%d, past the first 16", f.name, f.off, f.end)
		}
	}
}

// TestTokenConsumedWhenVerifiedOrGone: a route keeps its connect token's
// id only while its connection is pending (TestRouteLayout); the token is
// consumed when the connection is verified and, for one gone before that,
// when the gateway forgets it — either way it admits nothing more.
func TestTokenConsumedWhenVerifiedOrGone(t *testing.T) {
	for _, verified := range []bool{true, false} {
		r := newBenchRouter(t, new(discard), seeded(1))
		x := recordExchange(t, 1)
		d := msg.NewDatagram()
		d.N = copy(d.Buf, x.req)
		d.Addr = benchClient
		ctx := &stubCtx{}
		if !r.handle(ctx, d) {
			d.Release()
		}
		if r.byID.len() != 1 {
			t.Fatalf("%d routes after a connect request, want 1", r.byID.len())
		}
		var rt *route
		for v := range r.byID.all() {
			rt = v
		}
		if rt.token == nil {
			t.Fatal("a pending route keeps no token")
		}
		id := *rt.token
		if verified {
			r.onVerified(ctx, &conn.Verified{ID: rt.id, Player: rt.player})
			if rt.token != nil {
				t.Fatal("a verified route still keeps its token")
			}
		} else {
			r.onClosed(ctx, &conn.Closed{ID: rt.id, Player: rt.player, Reason: handshake.ReasonTimeout})
		}
		if st := r.srv.Guard().Lookup(id, benchWall).State; st != handshake.GuardConsumed {
			t.Fatalf("verified %v: the token's guard entry is %v, want consumed", verified, st)
		}
	}
}

// maxRouteBytes bounds what the gateway keeps for one verified connection:
// its route and its entries in the tables by id, by address and by player.
// Measured over 2,000 IPv4 connections: 166.5 B with the 64-byte route
// (its address only in byAddr: conn.Moved's From and conn.Closed's Addr
// name it); 198.5–201.3 B with the 96-byte one that copied it (the Conn's
// PID and user data read through it: pidOf, userData); 214.5–217.3 B
// with the 112-byte one that copied those too. A size check, not a
// timing one.
const maxRouteBytes = 176

func TestRouteFootprint(t *testing.T) {
	const n = 2000
	before := liveHeap()
	byID, byAddr, byPlayer := newIDTable(), newAddrTable(), make(map[uint64]*route)
	for i := range n {
		// As spawn makes it and onVerified leaves it: no token.
		rt := &route{id: handshake.ConnID{byte(i), byte(i >> 8), 1},
			player: uint64(i + 1), timeoutMS: 30000, since: 1}
		byID.set(rt.id, rt)
		byAddr.set(netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 3, byte(i >> 8), byte(i)}), uint16(40000+i)), rt)
		byPlayer[rt.player] = rt
	}
	per := float64(liveHeap()-before) / n
	runtime.KeepAlive(byID)
	runtime.KeepAlive(byAddr)
	runtime.KeepAlive(byPlayer)
	t.Logf("a verified connection in the gateway: %.1f B (its route %d)", per, unsafe.Sizeof(route{}))
	if per > maxRouteBytes {
		t.Fatalf("the gateway keeps %.1f B a connection, want ≤ %d", per, maxRouteBytes)
	}
}
