package conn

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/zones/handoff"
)

// TestInputHeldDuringTheLookup: while Config.Resume looks the player's
// record up, the moves that arrive are held and go to the zone after the
// Join, in order, and the connection keeps no room for them afterwards; a
// Join that brings no Control is looked up again once a second, at most
// maxLookups times.
func TestInputHeldDuringTheLookup(t *testing.T) {
	sys := actor.NewActorSystem()
	defer sys.Shutdown()
	const steps = 500 // 16.5 s of 30 Hz datagrams: time for more than maxLookups lookups
	x := record(t, steps)
	s, cs := benchShard(t, x, 1)
	c := cs[0]
	s.pool.sys = sys
	z := &zoneRec{}
	zone, _ := sys.ProcessRegistry.Add(z, "zone")
	c.zone = zone
	lookups := 0
	var answer func(*actor.PID, *handoff.Checkpoint)
	s.pool.cfg.Resume = func(player uint64, done func(*actor.PID, *handoff.Checkpoint)) {
		lookups++
		answer = done
	}
	var held int
	// A step: the client's datagrams, then the pump (the recording's
	// client acks the server's packets: they must have gone).
	at := func(i int) {
		now := time.Duration(i+1) * benchStep
		for _, p := range x.steps[i] {
			feed(s, c, p, now)
		}
		s.pumpOne(c, now)
	}
	for i := range 10 { // the lookup takes ten datagrams' time
		at(i)
	}
	if lookups != 1 || !c.resuming || c.side == nil || len(c.side.held) == 0 {
		t.Fatalf("after the first datagrams: %d lookups, resuming %v, held %v", lookups, c.resuming, c.side != nil)
	}
	if held = len(c.side.held); held < 5 {
		t.Fatalf("%d inputs held during the lookup, want the datagrams' (≥ 5)", held)
	}
	answer = nil
	s.handle(c, &resumed{zone: zone}, 10*benchStep) // the record's answer
	s.sendInputs()
	if c.side != nil {
		t.Fatalf("%d inputs' room kept after the Join", cap(c.side.held))
	}
	if len(z.got) < 2 {
		t.Fatalf("the zone got %d messages, want the Join and the held inputs", len(z.got))
	}
	if _, ok := z.got[0].(*msg.Join); !ok {
		t.Fatalf("the zone's first message is a %T, want the Join", z.got[0])
	}
	var seqs []uint64
	for _, m := range z.got[1:] {
		var list []*msg.Input
		switch m := m.(type) {
		case *msg.Inputs:
			list = m.List
		case *msg.Input:
			list = []*msg.Input{m}
		default:
			t.Fatalf("after the Join: a %T", m)
		}
		for _, in := range list {
			for _, mv := range in.Moves {
				seqs = append(seqs, mv.Seq)
			}
		}
	}
	if len(z.got)-1 > held || len(seqs) == 0 {
		t.Fatalf("%d messages of inputs after the Join for %d held, %d moves", len(z.got)-1, held, len(seqs))
	}
	for i := 1; i < len(seqs); i++ {
		if seqs[i] != seqs[i-1]+1 {
			t.Fatalf("held moves out of order: %v", seqs)
		}
	}

	// The zone never answers the Join: looked up again a second after
	// each Join, at most maxLookups times.
	for i := 10; i < steps; i++ {
		at(i)
		if answer != nil {
			answer = nil
			s.handle(c, &resumed{zone: zone}, time.Duration(i+1)*benchStep)
		}
		s.sendInputs()
	}
	if lookups != 1+maxLookups {
		t.Fatalf("%d lookups in %v without a Control, want 1 + %d", lookups, steps*benchStep, maxLookups)
	}
}
