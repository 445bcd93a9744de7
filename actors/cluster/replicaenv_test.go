package cluster

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/nats-io/nats.go"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/actors/zone"
	"github.com/ghostwire/ghostwire/zones/sim"
)

// TestProxyHandsBackEncodedReplicaEnvelopes: a zone's border replicas
// for a zone in another process go through that zone's proxy here, which
// encodes each batch and marks its envelope handled (MarkHandled), so the
// sending zone fills the same envelope next tick instead of allocating
// one a neighbour a tick.
func TestProxyHandsBackEncodedReplicaEnvelopes(t *testing.T) {
	sys := quietSystem()
	t.Cleanup(sys.Shutdown)
	l := &Leases{held: map[string]*held{}, owners: map[string]Owner{}, changed: make(chan struct{})}
	b := &Bridge{cfg: Config{World: "w", Node: "n2", Sys: sys, Leases: l, MaxBatch: 512,
		Now: func() time.Duration { return 0 }}, m: new(Metrics), log: discard(), served: map[string]*nats.Subscription{},
		links: map[string]*link{}, locals: map[uint64]*msg.Join{}, warned: map[string]bool{}, bases: map[uint64]*viewBase{},
		outs: map[uint64]*actor.PID{}, ins: map[uint64]*arqIn{}}
	proxy, err := sys.Root.SpawnNamed(b.ProxyProps("r"), zone.ActorName("r"))
	if err != nil {
		t.Fatal(err)
	}
	var envs []*zone.ReplicaEnvelope
	for tick := range 3 {
		e := &zone.ReplicaEnvelope{Batch: sim.ReplicaBatch{From: "q", To: "r", Tick: uint64(tick + 1),
			Entities: []sim.Replica{{ID: 5, Kind: 1, Epoch: 1}}}}
		envs = append(envs, e)
		sys.Root.Send(proxy, e)
	}
	// The proxy answers a Pause once it took everything before it; the
	// second, once it also ran the flush it sent itself meanwhile.
	for range 2 {
		if _, err := sys.Root.RequestFuture(proxy, &zone.Pause{}, 2*time.Second).Result(); err != nil {
			t.Fatal(err)
		}
	}
	for i, e := range envs {
		if !e.Handled() {
			t.Fatalf("envelope %d not marked handled by the proxy: its zone allocates a new one every tick", i)
		}
		if e.Batch.Entities != nil {
			t.Fatalf("envelope %d handed back with its batch unreleased", i)
		}
	}
	// Encoded, then flushed: this node knows no owner of "r", so counted
	// as dropped for that, one a batch.
	if got := b.m.NoOwner.Load(); got != uint64(len(envs)) {
		t.Fatalf("%d items dropped for no owner, want the %d batches encoded", got, len(envs))
	}
}
