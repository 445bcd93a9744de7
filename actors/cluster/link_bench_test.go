package cluster

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/actors/zone"
	pb "github.com/ghostwire/ghostwire/proto/ghostwire/v1"
	"github.com/ghostwire/ghostwire/proto/pbconv"
	"github.com/ghostwire/ghostwire/replication/ghost"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/zones/sim"
)

// actorCtx is the little of actor.Context a proxy or link actor uses
// for one message: the benchmarks call Receive directly, with no
// mailbox or goroutine between (an instruction count of the actor's own
// work). Any other method panics (the nil embedded Context).
type actorCtx struct {
	actor.Context
	m    any
	self *actor.PID
	sent int // messages sent to self (the flush)
}

func (c *actorCtx) Message() any                    { return c.m }
func (c *actorCtx) Self() *actor.PID                { return c.self }
func (c *actorCtx) Send(_ *actor.PID, _ any)        { c.sent++ }
func (c *actorCtx) Sender() *actor.PID              { return nil }
func (c *actorCtx) Respond(any)                     {}
func (c *actorCtx) receive(a actor.Actor, m any)    { c.m = m; a.Receive(c) }
func (c *actorCtx) reset(self *actor.PID) *actorCtx { c.self, c.sent = self, 0; return c }

// captured is an actor.Process that keeps what it is sent, in order, on
// the sender's goroutine: the benchmarks hand it on to the actor.
type captured struct {
	mu sync.Mutex
	ms []any
}

func (c *captured) SendUserMessage(_ *actor.PID, m any) {
	c.mu.Lock()
	c.ms = append(c.ms, m)
	c.mu.Unlock()
}
func (c *captured) SendSystemMessage(*actor.PID, any) {}
func (c *captured) Stop(*actor.PID)                   {}

// take empties c.
func (c *captured) take(into []any) []any {
	c.mu.Lock()
	defer c.mu.Unlock()
	into = append(into[:0], c.ms...)
	clear(c.ms)
	c.ms = c.ms[:0]
	return into
}

// benchBridge is a bridge with no NATS connection (batches are encoded
// and held for resends, not published), owner of zone "y" at epoch 1
// and of served zone "z".
func benchBridge(b testing.TB) *Bridge {
	reg, _ := ghost.NewRegistry(ghost.DefaultBounds())
	_ = reg.Register(ghost.PlayerClass(nil), ghost.NPCClass(nil))
	sys := quietSystem()
	b.Cleanup(sys.Shutdown)
	l := &Leases{held: map[string]*held{"z": {epoch: 1}}, owners: map[string]Owner{"y": {Zone: "y", Node: "n2", Epoch: 1}},
		changed: make(chan struct{})}
	return &Bridge{cfg: Config{World: "w", Node: "n1", Sys: sys, Leases: l, Registry: reg, MaxBatch: 512,
		Now: func() time.Duration { return 0 }}, m: new(Metrics), log: discard(), served: map[string]*nats.Subscription{},
		links: map[string]*link{}, locals: map[uint64]*msg.Join{}, warned: map[string]bool{}, bases: map[uint64]*viewBase{},
		outs: map[uint64]*actor.PID{}, ins: map[uint64]*arqIn{}}
}

// BenchmarkLinkTaggedControls: a zone tick's Controls for 256 players
// whose connections another node holds, each sent to its connection's
// tagged PID (linkProcess) and taken by the link actor, then the batch
// encoded (publish). Per op: one tick's 256; allocs/op counts the
// wrappers and the protobuf messages a Control.
func BenchmarkLinkTaggedControls(b *testing.B) {
	const players = 256
	br := benchBridge(b)
	sys := br.cfg.Sys
	cap := &captured{}
	capPID, ok := sys.ProcessRegistry.Add(cap, "cap")
	if !ok {
		b.Fatal("cap")
	}
	lp := &linkProcess{sys: sys, actor: capPID}
	lpid, ok := sys.ProcessRegistry.Add(lp, linkPrefix+"n2")
	if !ok {
		b.Fatal("link name")
	}
	l := &link{pid: lpid, actor: capPID, node: "n2", slots: map[uint64]*slotRec{}, streams: &br.streams}
	a := &linkActor{b: br, l: l}
	pids := make([]*actor.PID, players)
	for i := range pids {
		pids[i] = l.connPID(uint32(i + 1))
	}
	ctx := (&actorCtx{}).reset(capPID)
	var ms []any
	st := move.ControlState{Pos: [3]float32{1, 2, 3}, Vel: [3]float32{0.5, 0, 0}, Yaw: 1}
	round := func(tick uint64) {
		for i, pid := range pids {
			c := msg.NewControl()
			c.Player, c.Tick, c.LastApplied, c.State, c.Epoch = uint64(i+1), tick, tick, st, 2
			sys.Root.Send(pid, c)
		}
		ms = cap.take(ms)
		for _, m := range ms {
			ctx.receive(a, m)
		}
		clear(ms)
		ctx.receive(a, flushMsg)
		a.arq.ack(a.arq.next, 0) // the other node's ack: nothing held
	}
	round(0) // warm the pools and the batch's room
	b.ReportAllocs()
	b.ResetTimer()
	tick := uint64(1)
	for b.Loop() {
		round(tick)
		tick++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*players), "ns/control")
}

// benchReplicas is a ReplicaBatch of n entities as a zone's tick makes
// one for a neighbour in another process.
func benchReplicas(n int) []sim.Replica {
	rs := make([]sim.Replica, n)
	for i := range rs {
		rs[i] = sim.Replica{ID: uint64(i + 1), Kind: 1, Epoch: 3, Health: 100, Flags: 1,
			State: move.ControlState{Pos: [3]float32{float32(i), 0, 5}, Vel: [3]float32{1, 0, 0}, Yaw: 0.5},
			Name:  ghost.MustName(fmt.Sprintf("p%d", i)), Extra: [4]uint32{1, 2, 3, 4}}
	}
	return rs
}

// BenchmarkProxyReplicas: a zone's border replicas (64 entities) for a
// zone another node owns, taken by the zone's proxy and encoded (flush):
// one tick's per op.
func BenchmarkProxyReplicas(b *testing.B) {
	br := benchBridge(b)
	p := &zoneProxy{b: br, zone: "y"}
	self := actor.NewPID(br.cfg.Sys.Address(), "proxy")
	ctx := (&actorCtx{}).reset(self)
	ents := benchReplicas(64)
	env := &zone.ReplicaEnvelope{}
	round := func(tick uint64) {
		env.Batch = sim.ReplicaBatch{From: "x", To: "y", Tick: tick, Sent: time.Duration(tick), Entities: ents}
		ctx.receive(p, env)
		ctx.receive(p, flushMsg)
		p.arq.ack(p.arq.next, 0)
	}
	round(0)
	b.ReportAllocs()
	b.ResetTimer()
	tick := uint64(1)
	for b.Loop() {
		round(tick)
		tick++
	}
}

// zoneTaker stands for a zone actor in the benchmarks: it takes a
// ReplicaEnvelope as the zone does (copies, releases, marks it handled)
// on the sender's goroutine.
type zoneTaker struct {
	n      int
	copied []sim.Replica
}

func (z *zoneTaker) SendUserMessage(_ *actor.PID, m any) {
	z.n++
	if e, ok := m.(*zone.ReplicaEnvelope); ok {
		z.copied = append(z.copied[:0], e.Batch.Entities...)
		e.Batch.Release()
		e.MarkHandled()
	}
}
func (z *zoneTaker) SendSystemMessage(*actor.PID, any) {}
func (z *zoneTaker) Stop(*actor.PID)                   {}

// BenchmarkBridgeReplicasIn: the receiving node's side of
// BenchmarkProxyReplicas: one ZoneBatch of one ReplicaBatch (64
// entities) decoded and handed to the zone (onZoneBatch), per op.
func BenchmarkBridgeReplicasIn(b *testing.B) {
	br := benchBridge(b)
	zt := &zoneTaker{}
	if _, ok := br.cfg.Sys.ProcessRegistry.Add(zt, zone.ActorName("z")); !ok {
		b.Fatal("zone name")
	}
	sb := &sim.ReplicaBatch{From: "y", To: "z", Tick: 9, Entities: benchReplicas(64)}
	data, err := proto.Marshal(&pb.ZoneBatch{Zone: "z", ZoneEpoch: 1, FromNode: "n2", Items: []*pb.ZoneItem{
		{Item: &pb.ZoneItem_Replicas{Replicas: pbconv.ReplicaBatchToProto(sb)}}}})
	if err != nil {
		b.Fatal(err)
	}
	nm := &nats.Msg{Subject: zoneSubject("w", "z"), Data: data}
	onBatch := br.zoneHandler("z")
	onBatch(nm)
	if zt.n != 1 || len(zt.copied) != 64 {
		b.Fatalf("the zone took %d messages, %d replicas", zt.n, len(zt.copied))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		onBatch(nm)
	}
	b.StopTimer()
	if zt.n != b.N+1 {
		b.Fatalf("the zone took %d batches, want %d", zt.n, b.N+1)
	}
}

// BenchmarkProxyInputs: a connection shard's round of inputs (256
// players', two moves each) for a zone another node owns, taken by the
// zone's proxy and encoded (flush): one round per op.
func BenchmarkProxyInputs(b *testing.B) {
	const players = 256
	br := benchBridge(b)
	p := &zoneProxy{b: br, zone: "y"}
	ctx := (&actorCtx{}).reset(actor.NewPID(br.cfg.Sys.Address(), "proxy"))
	round := func(seq uint64) {
		ins := msg.NewInputs()
		for i := range players {
			in := msg.NewInput()
			in.Player = uint64(i + 1)
			in.Moves = append(in.Moves[:0], move.Move{Seq: seq, Dt: 16, Forward: 127, Yaw: 300},
				move.Move{Seq: seq + 1, Dt: 16, Forward: 127, Yaw: 310, CRC: 7, HasCRC: true})
			ins.List = append(ins.List, in)
		}
		ctx.receive(p, ins)
		ctx.receive(p, flushMsg)
		p.arq.ack(p.arq.next, 0)
	}
	round(1)
	b.ReportAllocs()
	b.ResetTimer()
	seq := uint64(3)
	for b.Loop() {
		round(seq)
		seq += 2
	}
}
