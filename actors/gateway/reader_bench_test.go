package gateway

import (
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ghostwire/ghostwire/actors/conn"
	"github.com/ghostwire/ghostwire/replication/handshake"
)

// BenchmarkReaderRouteCold: the reader's part of a read batch
// (readerRoute: classify, the address table, the route, staging on the
// connection's shard, one post a shard) for 2,048 connections on four
// shards, each route's and connection's lines long out of the caches when
// its next datagram comes, as on a server with a thousand players and
// more. A batch is 32 short-form datagrams of 32 connections, the next
// batch the next 32 (a stride through the table); the shards reject them
// (garbage after the first byte), and the loop waits for them to, so no
// connection's MaxInbound drops one. An op is one datagram. For the
// reader alone read callgrind's inclusive count (and cachegrind's misses)
// of gateway.(*router).readerRoute.
func BenchmarkReaderRouteCold(b *testing.B) { benchReaderRoute(b, false, false) }

// BenchmarkReaderRouteColdRouted is BenchmarkReaderRouteCold with every
// datagram in the long (routed) form, found by its connection id: a
// client behind a shared NAT or a proxy, or botswarm's bots, which share
// sockets.
func BenchmarkReaderRouteColdRouted(b *testing.B) { benchReaderRoute(b, false, true) }

// BenchmarkReaderRouteFlow is BenchmarkReaderRouteCold with the reader
// and the shards at work together, as on a server: the loop lets the
// shards fall up to flowLag datagrams behind (a connection's next
// datagram is 2,048 later: never two queued) and then waits for them by
// their reject counter (one line), asleep, not by each route's queued
// count — the reader of a server never looks at a route again after
// routing to it, and ReaderRouteCold's wait read every route's count,
// the line its shard had just written, once a datagram, and spun. For
// the cost of the hand-off between the reader's core and the shards'
// (the route's lines, the copies' buffers), read perf's task-clock at
// GOMAXPROCS 2 over a fixed count: the process's CPU is the work alone.
func BenchmarkReaderRouteFlow(b *testing.B) { benchReaderRoute(b, true, false) }

// flowLag is how far behind the reader BenchmarkReaderRouteFlow lets the
// shards fall, in datagrams.
const flowLag = 512

// benchReaderRoute runs the reader's batches as BenchmarkReaderRouteCold
// says, waiting after each for the shards by the routes' counts or (flow)
// by the pool's reject counter; routed sends the long form.
func benchReaderRoute(b *testing.B, flow, routed bool) {
	const conns, per = 2048, 32
	x := recordExchange(b, 1)
	r := newBenchRouter(b, new(discard), seeded(1))
	sys := actor.NewActorSystem()
	pool, err := conn.NewPool(conn.PoolConfig{
		Config: r.cfg.Conn, Shards: 4, Sys: sys,
		Now:       func() time.Duration { return benchStep },
		NewWriter: func() conn.Writer { return nowhere{} },
	})
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	r.setPool(pool)
	_, grant, _ := handshakeServer(b, x.req)
	rts := make([]*route, conns)
	addrs := make([]netip.AddrPort, conns)
	for i := range rts {
		g := *grant // a Grant gives one Session: a copy each
		sess, err := g.Session()
		if err != nil {
			b.Fatal(err)
		}
		id := grant.ID
		id[0], id[1] = byte(i), byte(i>>8) // distinct ids, as the server's random ones
		rt := &route{id: id}
		addrs[i] = netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 2, byte(i >> 8), byte(i)}), uint16(30000+i))
		c, err := pool.Open(conn.Params{Handshake: sess, Player: uint64(i + 1), Inflight: takenOf(rt)})
		if err != nil {
			b.Fatal(err)
		}
		rt.attach(c)
		r.byID.set(rt.id, rt)
		r.byAddr.set(addrs[i], rt)
		rts[i] = rt
	}
	free := make(chan *batch, 1)
	bt := newBatch(per, free)
	pkt := make([]byte, 40) // first byte 0: short-form data; the session rejects it
	long := make([][]byte, conns)
	for i, rt := range rts {
		long[i] = append(handshake.AppendRouted(nil, rt.id), pkt...)
	}
	k, sent := 0, uint64(0)
	// drain waits, asleep, until the shards are at most lag datagrams
	// behind (flow).
	drain := func(lag uint64) {
		for deadline := time.Now().Add(10 * time.Second); pool.Counters().Rejected()+lag < sent; {
			if time.Now().After(deadline) {
				b.Fatal("the shards never took the batch")
			}
			time.Sleep(20 * time.Microsecond)
		}
	}
	round := func() {
		for i := range per {
			d, c := bt.ds[i], (k+i)%conns
			if d.N = copy(d.Buf, pkt); routed {
				d.N = copy(d.Buf, long[c])
			}
			d.Addr = addrs[c]
		}
		bt.n = per
		if r.readerRoute(bt) {
			b.Fatal("readerRoute left datagrams for the actor")
		}
		sent += per
		// Wait for the shards to take them (bounded): a connection's
		// datagrams must not pile up to MaxInbound and be dropped.
		if flow {
			drain(flowLag)
		}
		for deadline, i := time.Now().Add(10*time.Second), 0; !flow && i < per; {
			if rts[(k+i)%conns].queued() == 0 {
				i++
				continue
			}
			if time.Now().After(deadline) {
				b.Fatal("the shards never took the batch")
			}
			runtime.Gosched()
		}
		k = (k + per) % conns
	}
	for range conns / per { // every route and connection touched once before the timer
		round()
	}
	drain(0)
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	for b.Loop() {
		if n%per == 0 {
			round()
		}
		n++
	}
	drain(0) // the shards' work is the op's too
	b.StopTimer()
	if d := r.st.inboundDropped.Load(); d != 0 {
		b.Fatalf("%d datagrams dropped at MaxInbound", d)
	}
}
