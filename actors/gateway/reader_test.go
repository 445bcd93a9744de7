package gateway

import (
	"net/netip"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ghostwire/ghostwire/actors/conn"
	"github.com/ghostwire/ghostwire/actors/udp"
	"github.com/ghostwire/ghostwire/replication/handshake"
)

var benchStranger = netip.MustParseAddrPort("198.51.100.9:999")

// nowhere is a shard writer that sends nothing.
type nowhere struct{}

func (nowhere) WriteBatch(ms []udp.Message) (int, error) { return len(ms), nil }

// TestReaderRoutesKnownConnections: the reader hands a known connection's
// datagrams to its shard itself and leaves only the rest — garbage, a
// stranger's data, a handshake — for the gateway actor; between the two,
// every datagram is counted once with one fate, and the connection's
// datagram reaches its session.
func TestReaderRoutesKnownConnections(t *testing.T) {
	x, r, rt := readerWithOneConn(t)
	r.byID.set(rt.id, rt)
	r.byAddr.set(benchClient, rt)

	free := make(chan *batch, 1)
	b := newBatch(8, free)
	put := func(i int, p []byte, from bool) {
		d := b.ds[i]
		d.N = copy(d.Buf, p)
		d.Addr = benchClient
		if !from {
			d.Addr = benchStranger
		}
	}
	put(0, x.steps[0][0], true)      // the client's first data packet
	put(1, []byte{0xFF, 1, 2}, true) // garbage
	put(2, make([]byte, 40), false)  // short-form data from a stranger: no connection
	put(3, x.req, true)              // a connect request
	b.n = 4

	if !r.readerRoute(b) {
		t.Fatal("readerRoute left nothing for the actor")
	}
	if got := b.rest; len(got) != 3 || got[0] != 1 || got[1] != 2 || got[2] != 3 {
		t.Fatalf("left for the actor: %v, want [1 2 3]", got)
	}
	if in, routed := r.st.datagramsIn.Load(), r.st.routed.Load(); in != 1 || routed != 1 {
		t.Fatalf("reader counted %d in, %d routed; want 1, 1", in, routed)
	}
	// The shard takes it: the connection lets go of its in-flight count
	// once its session has read the datagram.
	for deadline := time.Now().Add(10 * time.Second); rt.inflight.Load() != 0; {
		if time.Now().After(deadline) {
			t.Fatal("the connection never took its datagram")
		}
		time.Sleep(time.Millisecond)
	}

	r.handleBatch(&stubCtx{}, b)
	st := r.st
	if in := st.datagramsIn.Load(); in != 4 {
		t.Fatalf("%d datagrams counted in, want 4", in)
	}
	fates := st.routed.Load() + st.garbage.Load() + st.unknownConn.Load() + st.handshakes.Load() + st.handshakeLimited.Load()
	if fates != 4 || st.routed.Load() != 1 || st.garbage.Load() != 1 || st.unknownConn.Load() != 1 {
		t.Fatalf("fates: %d (routed %d, garbage %d, no connection %d, handshakes %d); want 4 with 1 each",
			fates, st.routed.Load(), st.garbage.Load(), st.unknownConn.Load(), st.handshakes.Load())
	}
	if got := <-free; got != b || len(b.rest) != 0 || b.n != 0 {
		t.Fatal("the actor did not hand the batch back empty")
	}
}

// TestReaderStagesOnTheConnectionsShard: a route keeps its connection's
// shard (attach), and the reader stages each datagram on that shard from
// the route alone (Stager.StageOn, no read of the Conn): connections
// opened round the shards each take their own datagram.
func TestReaderStagesOnTheConnectionsShard(t *testing.T) {
	x := recordExchange(t, 4)
	r := newBenchRouter(t, new(discard), seeded(1))
	pool := readerPool(t, r)
	_, grant, _ := handshakeServer(t, x.req)
	free := make(chan *batch, 1)
	b := newBatch(8, free)
	var rts []*route
	for i := range 3 {
		g := *grant // a Grant gives one Session: a copy each
		sess, err := g.Session()
		if err != nil {
			t.Fatal(err)
		}
		rt := &route{id: grant.ID}
		addr := netip.AddrPortFrom(benchClient.Addr(), uint16(20000+i))
		c, err := pool.Open(conn.Params{Handshake: sess, Player: uint64(i + 1), Inflight: &rt.inflight})
		if err != nil {
			t.Fatal(err)
		}
		rt.attach(c)
		r.byAddr.set(addr, rt)
		rts = append(rts, rt)
		d := b.ds[i]
		clear(d.Buf[:40])
		d.N = 40 // short-form data (first byte 0), which the session rejects
		d.Addr = addr
	}
	b.n = len(rts)
	for i, rt := range rts {
		if want := i % 2; rt.conn.Shard() != want || int(rt.shard) != want {
			t.Fatalf("connection %d: route's shard %d, connection's %d; want %d", i, rt.shard, rt.conn.Shard(), want)
		}
	}
	if r.readerRoute(b) {
		t.Fatalf("readerRoute left %v for the actor", b.rest)
	}
	for i, rt := range rts {
		for deadline := time.Now().Add(10 * time.Second); rt.inflight.Load() != 0; {
			if time.Now().After(deadline) {
				t.Fatalf("connection %d (shard %d) never took its datagram", i, rt.shard)
			}
			time.Sleep(time.Millisecond)
		}
	}
	if got := pool.Counters().Rejected(); got != 3 {
		t.Fatalf("%d datagrams rejected by the sessions, want 3", got)
	}
}

// readerWithOneConn is a router with a pool of two shards and one open
// connection (player 7) behind the route it returns, in no table yet; x
// is the exchange whose handshake made it.
func readerWithOneConn(t *testing.T) (*exchange, *router, *route) {
	t.Helper()
	x := recordExchange(t, 4)
	r := newBenchRouter(t, new(discard), seeded(1))
	pool := readerPool(t, r)
	_, grant, _ := handshakeServer(t, x.req)
	sess, err := grant.Session()
	if err != nil {
		t.Fatal(err)
	}
	rt := &route{id: grant.ID}
	c, err := pool.Open(conn.Params{Handshake: sess, Player: 7, Inflight: &rt.inflight})
	if err != nil {
		t.Fatal(err)
	}
	rt.attach(c)
	return x, r, rt
}

// The reader's second pass gives each datagram its own kind from the
// first: on a connection whose queue is full, its client's Disconnects
// still get through (they have disconnectRoom more) and its data packets
// are dropped, wherever they sit in a batch among strangers and garbage.
func TestReaderRouteDisconnectOnFullQueue(t *testing.T) {
	_, r, known := readerWithOneConn(t)
	knownAddr := netip.AddrPortFrom(benchClient.Addr(), 30000)
	r.byAddr.set(knownAddr, known)
	r.byID.set(known.id, known)
	limit := int32(r.cfg.Conn.MaxInbound)
	known.inflight.Store(limit) // the connection's queue is full

	const (
		data = iota
		bye
		stranger
		garbage
	)
	pattern := []int{data, bye, bye, data, stranger, bye, garbage, data, data} // no shift of the kinds routes as many
	free := make(chan *batch, 1)
	b := newBatch(16, free)
	var rest []uint16
	byes, datas := 0, 0
	for i, p := range pattern {
		d := b.ds[i]
		clear(d.Buf[:40])
		d.N, d.Addr = 40, knownAddr // short-form data (first byte 0)
		switch p {
		case data:
			datas++
		case bye:
			byes++
			d.Buf[0] = handshake.KindDisconnect.ControlByte()
			copy(d.Buf[1:], known.id[:])
			d.N = handshake.DisconnectSize
		case stranger:
			d.Addr = benchStranger
			rest = append(rest, uint16(i))
		case garbage:
			d.Buf[0], d.N = 0xFF, 3
			rest = append(rest, uint16(i))
		}
	}
	b.n = len(pattern)
	r.readerRoute(b)
	if !slices.Equal(b.rest, rest) {
		t.Fatalf("left for the actor %v, want %v", b.rest, rest)
	}
	if got, dropped := r.st.routed.Load(), r.st.inboundDropped.Load(); got != uint64(byes) || dropped != uint64(datas) {
		t.Fatalf("on a full queue %d routed and %d dropped, want the %d Disconnects routed and the %d data packets dropped", got, dropped, byes, datas)
	}
	// The connection takes the Disconnects (and refuses them: they are
	// not sealed), which gives their places back.
	for deadline := time.Now().Add(10 * time.Second); known.inflight.Load() != limit; {
		if time.Now().After(deadline) {
			t.Fatalf("in flight %d, want %d once the connection took the Disconnects", known.inflight.Load(), limit)
		}
		time.Sleep(time.Millisecond)
	}
}

// readerPool gives r a pool of two shards that write nowhere, on a new
// actor system; closed with t.
func readerPool(t *testing.T, r *router) *conn.Pool {
	t.Helper()
	sys := actor.NewActorSystem()
	pool, err := conn.NewPool(conn.PoolConfig{
		Config: r.cfg.Conn, Shards: 2, Sys: sys,
		Now:       func() time.Duration { return benchStep },
		NewWriter: func() conn.Writer { return nowhere{} },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	r.setPool(pool)
	return pool
}

// takenOf is the counter rt's connection lets go of what it took in
// (conn.Params.Inflight).
func takenOf(rt *route) *atomic.Int32 { return &rt.inflight }

// queued is how many datagrams rt's connection has not taken yet.
func (rt *route) queued() int { return int(rt.inflight.Load()) }

// TestReaderRouteMixedBatch: across a batch that mixes them, every
// datagram goes where its own address says: a connection's to its
// connection, and a pending route's (no connection yet), a stranger's and
// garbage to the actor, in the batch's order.
func TestReaderRouteMixedBatch(t *testing.T) {
	_, r, known := readerWithOneConn(t)
	knownAddr := netip.AddrPortFrom(benchClient.Addr(), 30000)
	r.byAddr.set(knownAddr, known)
	pendAddr := netip.AddrPortFrom(benchClient.Addr(), 30001)
	r.byAddr.set(pendAddr, &route{id: handshake.ConnID{9, 9, 9}}) // its id differs from known's

	const (
		toConn = iota
		stranger
		garbage
		pending
	)
	pattern := []int{toConn, stranger, pending, toConn, toConn, garbage, toConn, pending, stranger, toConn, garbage, toConn}
	free := make(chan *batch, 1)
	b := newBatch(16, free)
	var want []uint16
	delivered := 0
	for i, p := range pattern {
		d := b.ds[i]
		clear(d.Buf[:40])
		d.N = 40 // short-form data (first byte 0), which the session rejects
		switch p {
		case toConn:
			d.Addr = knownAddr
			delivered++
			continue
		case stranger:
			d.Addr = benchStranger
		case garbage:
			d.Addr, d.Buf[0], d.N = knownAddr, 0xFF, 3
		case pending:
			d.Addr = pendAddr
		}
		want = append(want, uint16(i))
	}
	b.n = len(pattern)
	if !r.readerRoute(b) {
		t.Fatal("readerRoute left nothing for the actor")
	}
	if !slices.Equal(b.rest, want) {
		t.Fatalf("left for the actor %v, want %v", b.rest, want)
	}
	if got := r.st.routed.Load(); got != uint64(delivered) {
		t.Fatalf("%d datagrams routed to the connection, want %d", got, delivered)
	}
	// The batch is reused for the reader's next reads: the routes its
	// first pass looked up must not stay in it (they would keep a closed
	// connection's route alive until the slot's next lookup).
	if i := slices.IndexFunc(b.rts, func(rt *route) bool { return rt != nil }); i >= 0 {
		t.Fatalf("the batch still holds the route of datagram %d after routing", i)
	}
	for deadline := time.Now().Add(10 * time.Second); known.inflight.Load() != 0; {
		if time.Now().After(deadline) {
			t.Fatal("the connection never took its datagrams")
		}
		time.Sleep(time.Millisecond)
	}
}
