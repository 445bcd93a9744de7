package cluster

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/actors/zone"
	"github.com/ghostwire/ghostwire/replication/ghost"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/zones/sim"
	"github.com/ghostwire/ghostwire/zones/world"
)

// benchNode is one "process" of the benchmark: its own actor system, NATS
// connection, leases and bridge, running one zone.
type benchNode struct {
	sys    *actor.ActorSystem
	zones  *zone.World
	bridge *Bridge
	leases *Leases
	m      *zone.Metrics
}

// benchConns plays the connections of every player, all held by node 1:
// it sends moves and teleports through each player's route and records
// when each Redirect comes back.
type benchConns struct {
	mu      sync.Mutex
	route   map[uint64]*actor.PID
	epoch   map[uint64]uint64
	sent    map[uint64]uint64
	applied map[uint64]uint64
	tpAt    map[uint64]time.Time
	lat     []time.Duration
	events  chan uint64
}

type benchRound struct {
	x float32
}

func (c *benchConns) Receive(ctx actor.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch m := ctx.Message().(type) {
	case *benchRound:
		for id, route := range c.route {
			c.sent[id]++
			in := msg.NewInput()
			in.Player = id
			in.Moves = append(in.Moves[:0], move.Move{Seq: c.sent[id], Dt: 1, Forward: 127})
			ctx.Send(route, in)
			c.tpAt[id] = time.Now()
			ctx.Send(route, &zone.Teleport{Entity: id, Pos: [3]float32{m.x, 0, float32(id%800) - 400}})
		}
	case *msg.Redirect:
		if m.Epoch > c.epoch[m.Player] {
			c.epoch[m.Player], c.route[m.Player] = m.Epoch, m.Zone
			c.lat = append(c.lat, time.Since(c.tpAt[m.Player]))
			c.events <- m.Player
		}
	case *msg.Control:
		if m.LastApplied > c.applied[m.Player] {
			c.applied[m.Player] = m.LastApplied
		}
		m.Release()
	}
}

// BenchmarkHandoffCrossProcess (tracked): two nodes — two actor systems,
// two NATS connections, one real nats-server on loopback — each run one
// zone of a 2×1 world; every connection is held by node 1. Each iteration,
// 256 players each send a move and are teleported across the border at
// once, so half the handoffs go node 1 → node 2 and half come back, every
// message between the zones crossing NATS (offer, accept, commit, ack,
// forwarded moves, the Redirect). p50-ms and p99-ms: from the teleport to
// the connection's Redirect (the whole handoff as the connection sees it;
// target p99 ≤ 20 ms); handoffs/s: sustained (target ≥ 2,000). Afterwards
// every move must have been applied exactly once, or it fails.
func BenchmarkHandoffCrossProcess(b *testing.B) {
	const players = 256
	nc1 := natsServer(b)
	nc2c, err := nats.Connect(nc1.ConnectedUrl())
	if err != nil {
		b.Fatal(err)
	}
	defer nc2c.Close()
	// The leases' TTL is lineNodes' (see lineLeaseTTL): this measures
	// handoffs, and a lease lost to one slow renewal would stall it.
	kv1, kv2 := zonesBucket(b, nc1, lineLeaseTTL), zonesBucket(b, nc2c, lineLeaseTTL)
	w, err := world.Grid("pair", 2, 1, 1000, [2]float64{-1000, -500})
	if err != nil {
		b.Fatal(err)
	}
	reg, _ := ghost.NewRegistry(ghost.DefaultBounds())
	_ = reg.Register(ghost.PlayerClass(nil), ghost.NPCClass(nil))
	start := time.Now()
	now := func() time.Duration { return time.Since(start) }
	spawn := func(id uint64, r world.Rect) [3]float32 {
		return [3]float32{float32(r.Min[0] + 500), 0, float32(id%800) - 400}
	}
	mk := func(name, zoneID string, nc *nats.Conn, kv jetstream.KeyValue) *benchNode {
		n := &benchNode{sys: quietSystem(), m: new(zone.Metrics)}
		l, err := NewLeases(context.Background(), kv, name, lineLeaseTTL, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := l.Claim(context.Background(), zoneID); err != nil {
			b.Fatal(err)
		}
		n.leases = l
		n.zones, err = zone.StartZones(n.sys, w, sim.Config{}, zone.Params{Now: now, Metrics: n.m, Spawn: spawn}, []string{zoneID})
		if err != nil {
			b.Fatal(err)
		}
		n.bridge, err = NewBridge(Config{World: "bench", Node: name, NC: nc, Sys: n.sys, Leases: l, Registry: reg, Now: now})
		if err != nil {
			b.Fatal(err)
		}
		if err := n.bridge.Serve(zoneID); err != nil {
			b.Fatal(err)
		}
		other := "x1z0"
		if zoneID == "x1z0" {
			other = "x0z0"
		}
		if _, err := n.sys.Root.SpawnNamed(n.bridge.ProxyProps(other), zone.ActorName(other)); err != nil {
			b.Fatal(err)
		}
		return n
	}
	n1, n2 := mk("n1", "x0z0", nc1, kv1), mk("n2", "x1z0", nc2c, kv2)
	defer func() {
		for _, n := range []*benchNode{n1, n2} {
			n.bridge.Close()
			n.zones.Stop()
			n.sys.Shutdown()
			n.leases.Close(context.Background())
		}
	}()
	waitFor(b, 5*time.Second, "both nodes to see both owners", func() bool {
		_, a := n1.leases.Owner("x1z0")
		_, c := n2.leases.Owner("x0z0")
		return a && c
	})
	conns := &benchConns{route: map[uint64]*actor.PID{}, epoch: map[uint64]uint64{}, sent: map[uint64]uint64{},
		applied: map[uint64]uint64{}, tpAt: map[uint64]time.Time{}, events: make(chan uint64, players)}
	cpid := n1.sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return conns }))
	z1 := n1.zones.PID("x0z0")
	for i := range players {
		id := uint64(i + 1)
		conns.route[id] = z1
		n1.sys.Root.Send(z1, &msg.Join{Player: id, Conn: cpid, Ghosts: cpid})
	}
	waitFor(b, 5*time.Second, "joins", func() bool { return n1.m.Joins.Load() == players })

	b.ReportAllocs()
	b.ResetTimer()
	began := time.Now()
	round := 0
	for b.Loop() {
		x := float32(500)
		if round%2 == 1 {
			x = -500
		}
		n1.sys.Root.Send(cpid, &benchRound{x: x})
		round++
		deadline := time.After(10 * time.Second)
		for range players {
			select {
			case <-conns.events:
			case <-deadline:
				b.Fatalf("round %d: redirects missing after 10 s (in: n1 %d, n2 %d; unknown n1 %d n2 %d; redirects n1 %d n2 %d; conn msgs in n1 %d)", round,
					n1.m.HandoffsIn.Load(), n2.m.HandoffsIn.Load(), n1.bridge.m.Unknown.Load(), n2.bridge.m.Unknown.Load(),
					n1.m.Redirects.Load(), n2.m.Redirects.Load(), n1.bridge.m.Msgs[KindConn][dirIn].Load())
			}
		}
	}
	elapsed := time.Since(began)
	b.StopTimer()
	conns.mu.Lock()
	lat := slices.Clone(conns.lat)
	conns.mu.Unlock()
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	}
	b.ReportMetric(float64(players*round)/elapsed.Seconds(), "handoffs/s")

	waitFor(b, 10*time.Second, "every move applied", func() bool {
		conns.mu.Lock()
		defer conns.mu.Unlock()
		for id, s := range conns.sent {
			if conns.applied[id] != s {
				return false
			}
		}
		return true
	})
	var applied, lost, sent uint64
	for _, n := range []*benchNode{n1, n2} {
		if err := n.zones.Inspect(5*time.Second, func(z *sim.Zone) {
			st := z.Stats()
			if testing.Verbose() {
				b.Logf("%s: %+v", z.ID(), z.Handoffs().Stats())
			}
			applied += st.MovesApplied
			lost += st.MovesDropped + st.MovesLost
		}); err != nil {
			b.Fatal(err)
		}
	}
	for _, s := range conns.sent {
		sent += s
	}
	if lost != 0 || applied != sent {
		b.Fatalf("zones applied %d moves (%d dropped or lost), players sent %d: want each exactly once", applied, lost, sent)
	}
	if got := n1.m.HandoffsIn.Load() + n2.m.HandoffsIn.Load(); got != uint64(players*round) {
		b.Fatalf("%d handoffs completed, want %d", got, players*round)
	}
}
