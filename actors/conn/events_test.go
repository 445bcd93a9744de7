package conn

import (
	"testing"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/replication/event"
	"github.com/ghostwire/ghostwire/zones/handoff"
)

// TestKeptEventsGoWithTheirFence: a numbered event the client sent is kept
// (a copy of its payload) until its zone's fence covers it; a fence of
// another numbering says nothing; once every kept event is applied the
// connection keeps no room for them.
func TestKeptEventsGoWithTheirFence(t *testing.T) {
	c, gen := numberingConn(t)
	payload := []byte("hello")
	for seq := uint64(1); seq <= 3; seq++ {
		c.Event(event.Event{Class: event.Ordered, Lane: 0, Seq: seq, Payload: payload})
	}
	c.Event(event.Event{Class: event.Ordered, Lane: 1, Seq: 1, Payload: payload})
	payload[0] = 'j' // the kept copies are the connection's
	if len(c.keptEvents()) != 4 || string(c.keptEvents()[0].payload) != "hello" {
		t.Fatalf("kept %d events, the first %q; want 4, \"hello\"", len(c.keptEvents()), c.keptEvents()[0].payload)
	}
	fence := func(g uint64, last ...uint64) *handoff.EventFence {
		f := &handoff.EventFence{Gen: g}
		copy(f.Last[:], last)
		return f
	}
	c.ackEvents(fence(gen+1, 3, 1)) // another numbering
	if len(c.keptEvents()) != 4 {
		t.Fatalf("a fence of another numbering forgot %d events", 4-len(c.keptEvents()))
	}
	c.ackEvents(fence(gen, 2))
	if len(c.keptEvents()) != 2 || c.keptEvents()[0].seq != 3 || c.keptEvents()[1].lane != 1 {
		t.Fatalf("after lane 0's fence at 2: %+v, want lane 0's 3 and lane 1's 1", c.keptEvents())
	}
	c.ackEvents(fence(gen, 3, 1))
	if len(c.keptEvents()) != 0 || c.side != nil {
		t.Fatalf("after every event applied: %d kept, room for %d; want none", len(c.keptEvents()), cap(c.keptEvents()))
	}
	if c.sh.in != nil {
		c.sh.in.Release()
		c.sh.in = nil
	}
}

// TestOutputReportsItsEventsApplied: the zone's Output that answers
// events carries its fence (msg.Output.Applied), and the connection takes
// it as it takes a Control's: the client hears those events applied in
// the packet that brings their echoes, and the connection forgets them.
// Left to the next tick's Control, a node stopped in between had the
// echo delivered and the events sent again to the zone's next owner.
func TestOutputReportsItsEventsApplied(t *testing.T) {
	c, gen := numberingConn(t)
	for seq := uint64(1); seq <= 2; seq++ {
		c.Event(event.Event{Class: event.Ordered, Lane: 0, Seq: seq, Payload: []byte("e")})
	}
	o := msg.NewOutput()
	o.Player = c.player
	o.Applied = handoff.EventFence{Gen: gen}
	o.Applied.Last[0] = 1
	o.Add(event.Ordered, 0, 0, []byte("echo of e1"))
	c.handle(o, benchStep)
	if k := c.keptEvents(); len(k) != 1 || k[0].seq != 2 {
		t.Fatalf("after an Output applying e1, kept %+v; want e2 alone", k)
	}
	if c.sh.in != nil {
		c.sh.in.Release()
		c.sh.in = nil
	}
}

// numberingConn is a connection whose client's first data packet has fixed
// its event numbering, and that numbering's generation.
func numberingConn(t *testing.T) (*Conn, uint64) {
	t.Helper()
	x := record(t, 1)
	s, cs := benchShard(t, x, 1)
	c := cs[0]
	for _, p := range x.steps[0] {
		feed(s, c, p, benchStep)
	}
	gen := c.srv.EventGen()
	if gen == 0 {
		t.Fatal("the session numbers no events")
	}
	return c, gen
}
