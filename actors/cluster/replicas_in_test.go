package cluster

import (
	"reflect"
	"sync"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	"github.com/ghostwire/ghostwire/actors/zone"
	pb "github.com/ghostwire/ghostwire/proto/ghostwire/v1"
	"github.com/ghostwire/ghostwire/proto/pbconv"
	"github.com/ghostwire/ghostwire/zones/sim"
)

// envelopes is an actor.Process under a zone's name that keeps the
// ReplicaEnvelopes it is sent, unhandled, on the sender's goroutine.
type envelopes struct {
	mu   sync.Mutex
	envs []*zone.ReplicaEnvelope
}

func (e *envelopes) SendUserMessage(_ *actor.PID, m any) {
	if env, ok := m.(*zone.ReplicaEnvelope); ok {
		e.mu.Lock()
		e.envs = append(e.envs, env)
		e.mu.Unlock()
	}
}
func (e *envelopes) SendSystemMessage(*actor.PID, any) {}
func (e *envelopes) Stop(*actor.PID)                   {}

func (e *envelopes) last() *zone.ReplicaEnvelope {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.envs[len(e.envs)-1]
}

// A served zone's subscription decodes each replica batch into an array
// its zone is done with (the envelope marked handled), never into one the
// zone may still read: a batch the zone has not handled keeps its
// entities whatever comes after it.
func TestReplicasInReuseOnlyHandledArrays(t *testing.T) {
	br := benchBridge(t)
	z := &envelopes{}
	if _, ok := br.cfg.Sys.ProcessRegistry.Add(z, zone.ActorName("z")); !ok {
		t.Fatal("zone name")
	}
	onBatch := br.zoneHandler("z")
	batch := func(tick uint64, n int) sim.ReplicaBatch {
		ents := benchReplicas(n)
		for i := range ents {
			ents[i].ID += tick * 1000
		}
		return sim.ReplicaBatch{From: "y", To: "z", Tick: tick, Entities: ents}
	}
	send := func(b sim.ReplicaBatch) *zone.ReplicaEnvelope {
		t.Helper()
		data, err := proto.Marshal(&pb.ZoneBatch{Zone: "z", ZoneEpoch: 1, FromNode: "n2", Items: []*pb.ZoneItem{
			{Item: &pb.ZoneItem_Replicas{Replicas: pbconv.ReplicaBatchToProto(&b)}}}})
		if err != nil {
			t.Fatal(err)
		}
		onBatch(&nats.Msg{Subject: zoneSubject("w", "z"), Data: data})
		env := z.last()
		if !reflect.DeepEqual(env.Batch, b) {
			t.Fatalf("tick %d: the zone got %+v, want %+v", b.Tick, env.Batch, b)
		}
		return env
	}
	handle := func(env *zone.ReplicaEnvelope) { // as the zone does
		env.Batch.Release()
		env.MarkHandled()
	}
	a, b := batch(1, 5), batch(2, 4)
	envA := send(a)
	arrA := &envA.Batch.Entities[0]
	envB := send(b)
	if &envB.Batch.Entities[0] == arrA {
		t.Fatal("batch 2 was decoded into batch 1's array, which the zone had not handled")
	}
	if !reflect.DeepEqual(envA.Batch, a) {
		t.Fatalf("batch 1, unhandled, changed under the zone: %+v", envA.Batch.Entities)
	}
	handle(envA)
	envC := send(batch(3, 3))
	if &envC.Batch.Entities[0] != arrA {
		t.Error("batch 3 was not decoded into batch 1's array, handled by then")
	}
	if !reflect.DeepEqual(envB.Batch, b) {
		t.Fatalf("batch 2, unhandled, changed under the zone: %+v", envB.Batch.Entities)
	}
	// Larger than any kept array: a new one.
	handle(envB)
	handle(envC)
	send(batch(4, 40))
}

// FuzzZoneBatchIn: arbitrary bytes on a served zone's subject, through a
// subscription's handler (zoneHandler: its replicas decoded into kept
// arrays), are a batch or dropped and counted, never a panic.
func FuzzZoneBatchIn(f *testing.F) {
	f.Add(validBatch("z", 1))
	b := sim.ReplicaBatch{From: "y", To: "z", Tick: 3, Entities: benchReplicas(3)}
	ok, _ := proto.Marshal(&pb.ZoneBatch{Zone: "z", ZoneEpoch: 1, FromNode: "n2", Items: []*pb.ZoneItem{
		{Item: &pb.ZoneItem_Replicas{Replicas: pbconv.ReplicaBatchToProto(&b)}},
		{Item: &pb.ZoneItem_Replicas{Replicas: &pb.ReplicaBatch{From: "y", To: "z", Entities: []*pb.Replica{{Id: 1, Kind: 300}}}}},
		{Item: &pb.ZoneItem_Replicas{}},
	}})
	f.Add(ok)
	var once sync.Once
	var onBatch nats.MsgHandler
	f.Fuzz(func(t *testing.T, data []byte) {
		br, _ := fuzzBridge(t)
		once.Do(func() { onBatch = br.zoneHandler("z") })
		onBatch(&nats.Msg{Subject: zoneSubject("w", "z"), Data: data})
	})
}
