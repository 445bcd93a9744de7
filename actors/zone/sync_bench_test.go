package zone

import (
	"strconv"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/zones/sim"
	"github.com/ghostwire/ghostwire/zones/world"
)

// syncCtx is the one part of an actor.Context the zone's tick and input
// paths use, Send, delivered at once on the caller's goroutine (to the
// benchConns' processes).
type syncCtx struct {
	actor.Context
	sys *actor.ActorSystem
}

func (c syncCtx) Send(pid *actor.PID, m any) { c.sys.Root.Send(pid, m) }

// BenchmarkZoneTickSync (informative): BenchmarkZoneActor's load — 250
// players walking in circles with inputs at 30 Hz, 50 NPCs, views as
// references, connections on two shards that take what they are sent
// (their Controls a batch a shard a tick, msg.ControlBatch) — with the zone
// actor driven on one goroutine and a clock of its own: one iteration is
// one 50 ms period (three inputs a player every two periods, one tick).
// Deterministic: run it under callgrind or count instructions to compare
// the actor layer's cost (sends, views, snapshots) between builds.
func BenchmarkZoneTickSync(b *testing.B) { runZoneTickSync(b, nil) }

// BenchmarkZoneTickSyncProxied (informative): BenchmarkZoneTickSync with
// the zone's neighbours in another process: each one's name taken by a
// stand-in for the cluster's proxy (proxyStub), which releases the border
// replica batch as the proxy does once it encoded it, and marks the
// envelope handled (marked, as the proxy now does) or not (unmarked, as
// before: the zone then allocated a new envelope a neighbour a tick).
// Compare the two's allocs/op.
func BenchmarkZoneTickSyncProxied(b *testing.B) {
	for _, mark := range []bool{false, true} {
		name := "unmarked"
		if mark {
			name = "marked"
		}
		b.Run(name, func(b *testing.B) {
			runZoneTickSync(b, func(sys *actor.ActorSystem, a *zoneActor) {
				a.addr = sys.Address()
				for _, zn := range a.p.Sim.World.Zones() {
					if zn.ID != a.p.Sim.Zone {
						sys.ProcessRegistry.Add(&proxyStub{mark: mark}, ActorName(zn.ID))
					}
				}
			})
		})
	}
}

// proxyStub stands for the cluster's proxy of a zone in another process,
// as far as border replicas go: it takes a batch (released: encoded) and,
// if mark, hands its envelope back (MarkHandled).
type proxyStub struct {
	mark    bool
	batches int
}

func (p *proxyStub) SendUserMessage(_ *actor.PID, m any) {
	if e, ok := m.(*ReplicaEnvelope); ok {
		p.batches++
		e.Batch.Release()
		if p.mark {
			e.MarkHandled()
		}
	}
}
func (*proxyStub) SendSystemMessage(*actor.PID, any) {}
func (*proxyStub) Stop(*actor.PID)                   {}

// runZoneTickSync runs BenchmarkZoneTickSync's load; neighbours, if set,
// sets up the zone's neighbours once the actor is made.
func runZoneTickSync(b *testing.B, neighbours func(sys *actor.ActorSystem, a *zoneActor)) {
	const players = 250
	sys := quietSystem()
	defer sys.Shutdown()
	var now time.Duration
	a, z := syncActorWith(b, sys, &now, sim.Config{Zone: "x0z0", World: world.Default(), NPCs: 50, Classes: ghostClasses(b),
		// Never degraded: the tick costs the zone measures (wall time,
		// inflated under callgrind) must not change what it does.
		Overload: sim.OverloadConfig{High: 1e9, Low: 1e8, Raise: 1 << 30, Lower: 1}})
	if neighbours != nil {
		neighbours(sys, a)
	}
	for i := range players {
		c := &benchConn{}
		c.views.AcceptRefs()
		pid, _ := sys.ProcessRegistry.Add(c, "sconn$"+strconv.Itoa(i))
		j := benchJoin(uint64(i+1), pid, &c.views)
		j.Port = msg.ControlPort{Queue: benchQueues[i%2], Conn: c} // Controls by shard, as actors/conn's
		a.onJoin(j)
	}
	seq := uint64(0)
	input := func() {
		seq++
		inputAll(a, players, seq)
	}
	period := z.Period()
	k := 0
	run := func() {
		input()
		if k%2 == 1 {
			now += 17 * time.Millisecond
			input()
			now += 33 * time.Millisecond
		} else {
			now += period
		}
		a.onTick()
		k++
	}
	for range 40 { // interest sets, queues, pools at their steady size
		run()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		run()
	}
}

// inputAll hands the zone an Input of one move, sequence seq, from each of
// players 1…players, as a shard's datagrams would.
func inputAll(a *zoneActor, players int, seq uint64) {
	for i := range players {
		in := msg.NewInput()
		in.Player = uint64(i + 1)
		in.Moves = append(in.Moves[:0], move.Move{Seq: seq, Dt: 32, Forward: 127, Yaw: uint16(seq * 500)})
		a.onInput(in)
	}
}
