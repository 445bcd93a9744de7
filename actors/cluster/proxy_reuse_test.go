package cluster

import (
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/actors/zone"
	pb "github.com/ghostwire/ghostwire/proto/ghostwire/v1"
	"github.com/ghostwire/ghostwire/proto/pbconv"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/zones/sim"
)

// heldBatches decodes what o sent since it last returned (its held
// batches, unacknowledged) into m's type and acknowledges them.
func heldBatches[M proto.Message](t *testing.T, o *arqOut, mk func() M) []M {
	t.Helper()
	var out []M
	for _, h := range o.held {
		m := mk()
		if err := proto.Unmarshal(h.data, m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	o.ack(o.next, 0)
	return out
}

// The proxy fills the same replica messages tick after tick: each batch
// it sends carries every zone's replicas as they were when sent — two
// zones' in one batch apart, a smaller batch after a larger one without
// the larger one's tail.
func TestProxyReusedReplicasEncodeEachBatch(t *testing.T) {
	br := benchBridge(t)
	p := &zoneProxy{b: br, zone: "y"}
	ctx := (&actorCtx{}).reset(actor.NewPID(br.cfg.Sys.Address(), "proxy"))
	batch := func(from string, tick uint64, n int) sim.ReplicaBatch {
		ents := benchReplicas(n)
		for i := range ents {
			ents[i].ID += tick * 100
			ents[i].State.Pos[1] = float32(tick)
		}
		return sim.ReplicaBatch{From: from, To: "y", Tick: tick, Entities: ents}
	}
	for _, round := range [][]sim.ReplicaBatch{
		{batch("x", 1, 10), batch("w", 1, 3)},
		{batch("x", 2, 2)},
		{batch("w", 3, 0), batch("x", 3, 12), batch("v", 3, 1)},
	} {
		var want [][]byte
		for i := range round {
			w, _ := proto.MarshalOptions{Deterministic: true}.Marshal(pbconv.ReplicaBatchToProto(&round[i]))
			want = append(want, w)
			ctx.receive(p, &zone.ReplicaEnvelope{Batch: round[i]})
		}
		ctx.receive(p, flushMsg)
		sent := heldBatches(t, &p.arq, func() *pb.ZoneBatch { return new(pb.ZoneBatch) })
		if len(sent) != 1 || len(sent[0].Items) != len(round) {
			t.Fatalf("tick %d: %d batches sent, want one of %d items", round[0].Tick, len(sent), len(round))
		}
		for i, it := range sent[0].Items {
			got, _ := proto.MarshalOptions{Deterministic: true}.Marshal(it.GetReplicas())
			if string(got) != string(want[i]) {
				t.Errorf("tick %d, item %d (from %s): sent %d bytes unlike the zone's batch (%d bytes)", round[0].Tick, i, round[i].From, len(got), len(want[i]))
			}
		}
	}
}

// The link fills the same Control messages publish after publish: each
// Control of a batch is its own, and a later batch's carry nothing of an
// earlier one's (a fence, a payload, a tag).
func TestLinkReusedControlsEncodeEachBatch(t *testing.T) {
	br := benchBridge(t)
	l := &link{node: "n2", slots: map[uint64]*slotRec{}, streams: &br.streams}
	a := &linkActor{b: br, l: l}
	ctx := (&actorCtx{}).reset(actor.NewPID(br.cfg.Sys.Address(), "link"))
	mk := func(player, tick uint64, tag uint32, fence bool) *msg.Control {
		c := msg.NewControl()
		c.Player, c.Tick, c.LastApplied, c.Epoch, c.ConnTag, c.Force = player, tick, tick*2, 3, tag, tag == 0
		c.State = move.ControlState{Pos: [3]float32{float32(player), float32(tick)}, Yaw: 1}
		if fence {
			c.Events.Gen, c.Events.Last[0] = 4, 9
			c.State.PayloadLen, c.State.Payload[0] = 1, 7
		}
		return c
	}
	for tick, round := range [][]*msg.Control{
		{mk(1, 1, 5, true), mk(2, 1, 0, false), mk(3, 1, 6, true)},
		{mk(2, 2, 0, false), mk(1, 2, 5, false)},
		{mk(4, 3, 9, false), mk(5, 3, 0, true), mk(6, 3, 1, false), mk(7, 3, 2, false)},
	} {
		var want []string
		var wantU []*pb.ControlUpdate
		for _, c := range round {
			u := &pb.ControlUpdate{Player: c.Player, Tick: c.Tick, LastApplied: c.LastApplied, State: pbconv.ControlToProto(c.State),
				Force: c.Force, ConnTag: c.ConnTag, Epoch: c.Epoch}
			if c.Events.Gen != 0 {
				u.EventGen, u.EventLast = pbconv.FenceToProto(&c.Events)
			}
			w, _ := proto.MarshalOptions{Deterministic: true}.Marshal(u)
			want, wantU = append(want, string(w)), append(wantU, u)
			ctx.receive(a, c)
		}
		ctx.receive(a, flushMsg)
		sent := heldBatches(t, &a.arq, func() *pb.ConnBatch { return new(pb.ConnBatch) })
		if len(sent) != 1 || len(sent[0].Controls) != len(round) {
			t.Fatalf("round %d: %d batches sent, want one of %d Controls", tick, len(sent), len(round))
		}
		for i, u := range sent[0].Controls {
			got, _ := proto.MarshalOptions{Deterministic: true}.Marshal(u)
			if string(got) != want[i] {
				t.Errorf("round %d, Control %d: sent {%v}, want {%v}", tick, i, u, wantU[i])
			}
		}
	}
}

// The proxy fills the same input messages round after round: each input
// of a batch is its own, as the connection sent it, and a later round's
// carry nothing of an earlier one's (moves past its own, events).
func TestProxyReusedInputsEncodeEachBatch(t *testing.T) {
	br := benchBridge(t)
	p := &zoneProxy{b: br, zone: "y"}
	ctx := (&actorCtx{}).reset(actor.NewPID(br.cfg.Sys.Address(), "proxy"))
	type in struct {
		player uint64
		moves  int
		events int
		lost   uint64
	}
	for r, round := range [][]in{
		{{1, 3, 1, 0}, {2, 1, 0, 4}, {3, 2, 2, 0}},
		{{2, 1, 0, 0}, {1, 0, 0, 0}},
		{{4, 2, 0, 0}, {5, 1, 1, 9}, {6, 0, 0, 0}, {7, 4, 0, 0}},
	} {
		var want []*pb.PlayerInput
		ins := msg.NewInputs()
		for _, x := range round {
			m := msg.NewInput()
			m.Player, m.LostBefore, m.EventGen = x.player, x.lost, uint64(r)
			w := &pb.PlayerInput{Player: x.player, LostBefore: x.lost, EventGen: uint64(r)}
			for i := range x.moves {
				mv := move.Move{Seq: uint64(10*r + i + 1), Dt: 16, Forward: int8(i), Yaw: uint16(r), CRC: uint32(i), HasCRC: i%2 == 1}
				m.Moves = append(m.Moves, mv)
				w.Moves = append(w.Moves, pbconv.MoveToProto(mv))
			}
			for i := range x.events {
				pl := []byte{byte(r), byte(i)}
				m.AddSeq(1, 2, 3, pl, uint64(i+1))
				w.Events = append(w.Events, &pb.GameEvent{Class: 1, Lane: 2, Key: 3, Payload: pl, Seq: uint64(i + 1)})
			}
			ins.List = append(ins.List, m)
			want = append(want, w)
		}
		ctx.receive(p, ins)
		ctx.receive(p, flushMsg)
		sent := heldBatches(t, &p.arq, func() *pb.ZoneBatch { return new(pb.ZoneBatch) })
		if len(sent) != 1 || len(sent[0].Items) != len(round) {
			t.Fatalf("round %d: %d batches sent, want one of %d items", r, len(sent), len(round))
		}
		for i, it := range sent[0].Items {
			got := it.GetInput()
			if got.GetReceivedNs() == 0 {
				t.Errorf("round %d, input %d: no received time", r, i)
			}
			got.ReceivedNs = 0
			if !proto.Equal(got, want[i]) {
				t.Errorf("round %d, input %d: sent {%v}, want {%v}", r, i, got, want[i])
			}
		}
	}
}
