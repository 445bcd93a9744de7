package zone

import (
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ghostwire/ghostwire/zones/sim"
	"github.com/ghostwire/ghostwire/zones/world"
)

// msgCtx is the part of an actor.Context a zone's Receive reads for a
// neighbour's message: the message.
type msgCtx struct {
	actor.Context
	m any
}

func (c msgCtx) Message() any { return c.m }

// TestReplicaEnvelopeBackOnlyWhenDone: a zone's replica envelope is
// handed out again only after the zone it went to handled it (Receive
// marks it done), never while a receiver may still hold it; envelopes
// nobody marks (a dead letter's) are replaced, never reused,
// and the kept ones stay bounded.
func TestReplicaEnvelopeBackOnlyWhenDone(t *testing.T) {
	var now time.Duration
	p := Params{Now: func() time.Duration { return now }, Metrics: new(Metrics),
		Sim: sim.Config{Zone: "x0z0", World: world.Default(), Classes: ghostClasses(t)}}
	z, err := sim.New(p.Sim, 0)
	if err != nil {
		t.Fatal(err)
	}
	recv := &zoneActor{p: p, m: p.Metrics}
	recv.init(z)
	recv.log = slog.New(slog.DiscardHandler)

	var r replicaEnvelopes
	e1, e2 := r.get(), r.get()
	if e1 == e2 {
		t.Fatal("one envelope handed out twice")
	}
	e1.Batch = sim.ReplicaBatch{From: "x1z0", To: "x0z0", Tick: 1}
	recv.Receive(msgCtx{m: e1})
	if got := r.get(); got != e1 {
		t.Fatal("a handled envelope did not come back")
	}
	if got := r.get(); got == e1 || got == e2 {
		t.Fatal("an envelope handed out again before its receiver was done with it")
	}
	seen := map[*ReplicaEnvelope]bool{e1: true, e2: true}
	for range 3 * maxReplicaEnvelopes { // none marked done: each one new
		e := r.get()
		if seen[e] {
			t.Fatal("an envelope no receiver marked done handed out again")
		}
		seen[e] = true
	}
	if len(r.sent) > maxReplicaEnvelopes {
		t.Fatalf("%d envelopes kept, bound %d", len(r.sent), maxReplicaEnvelopes)
	}
}
