package conn

import (
	"fmt"
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/replication/event"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/zones/handoff"
)

// TestRedirectResendsTheEventsTheOldOwnerHasNotApplied: event 1 went to
// the old owner, which had not applied it when the handoff's Redirect
// came; event 2 goes to the new owner. The old owner passes event 1 on,
// but the new owner may take event 2 first, and its fence then refuses
// event 1 (a load test lost one echo so, the next one echoed). So the new
// owner gets event 1 again, with its move, ahead of event 2. A stale
// Redirect, or one after the fence covered every event, resends nothing.
func TestRedirectResendsTheEventsTheOldOwnerHasNotApplied(t *testing.T) {
	sys := actor.NewActorSystem()
	defer sys.Shutdown()
	x := record(t, 1)
	s, cs := benchShard(t, x, 1)
	s.pool.sys = sys
	c := cs[0]
	for _, p := range x.steps[0] { // the first data packet fixes the numbering
		feed(s, c, p, benchStep)
	}
	if c.sh.in != nil {
		c.sh.in.Release()
		c.sh.in = nil
	}
	gen := c.srv.EventGen()
	if gen == 0 {
		t.Fatal("the session numbers no events")
	}
	zones := map[string]*zoneRec{}
	pid := func(name string) *actor.PID {
		z := &zoneRec{}
		zones[name] = z
		p, _ := sys.ProcessRegistry.Add(z, name)
		return p
	}
	old, owner, third := pid("zone-old"), pid("zone-owner"), pid("zone-third")
	c.zone, c.rareState().zoneEpoch, c.joined = old, 1, true
	base := c.lastMove // the recording's moves, applied
	c.unacked, c.applied = nil, base

	// What a client's datagram hands the connection: a move and an event.
	send := func(seq uint64) {
		c.Move(move.Move{Seq: base + seq, Dt: 32})
		c.Event(event.Event{Class: event.Ordered, Lane: 0, Seq: seq, Payload: []byte{byte(seq)}})
		c.flushInput(benchStep)
		s.sendInputs()
	}
	got := func(name string) string {
		var out []string
		z := zones[name]
		z.mu.Lock()
		defer z.mu.Unlock()
		for _, m := range z.got {
			var ins []*msg.Input
			switch m := m.(type) {
			case *msg.Input:
				ins = append(ins, m)
			case *msg.Inputs:
				ins = m.List
			}
			for _, in := range ins {
				var mv, ev []uint64
				for _, m := range in.Moves {
					mv = append(mv, m.Seq-base)
				}
				for _, e := range in.Events {
					if in.EventGen != gen {
						t.Errorf("%s: an event of numbering %d, want %d", name, in.EventGen, gen)
					}
					ev = append(ev, e.Seq)
				}
				out = append(out, fmt.Sprintf("moves %v events %v", mv, ev))
			}
		}
		z.got = nil
		return fmt.Sprint(out)
	}

	send(1)
	if g := got("zone-old"); g != "[moves [1] events [1]]" {
		t.Fatalf("the old owner got %s", g)
	}
	s.handle(c, &msg.Redirect{Player: c.player, Zone: owner, Epoch: 2}, benchStep)
	send(2)
	if g, want := got("zone-owner"), "[moves [1] events [1] moves [2] events [2]]"; g != want {
		t.Fatalf("the new owner got %s\nwant %s (event 1 again, ahead of event 2)", g, want)
	}
	s.handle(c, &msg.Redirect{Player: c.player, Zone: third, Epoch: 2}, benchStep)
	if g := got("zone-third"); g != "[]" {
		t.Fatalf("a Redirect of an epoch taken already sent %s", g)
	}
	c.ackEvents(&handoff.EventFence{Gen: gen, Last: [handoff.EventLanes]uint64{2}})
	s.handle(c, &msg.Redirect{Player: c.player, Zone: third, Epoch: 3}, benchStep)
	s.sendInputs()
	if g := got("zone-third"); g != "[]" {
		t.Fatalf("a Redirect with every event applied sent %s", g)
	}
}
