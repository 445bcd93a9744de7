package conn

import (
	"strconv"
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/replication/move"
)

// TestRoundPanicEndsOnlyItsConnection: a round handles its events and
// pumps its connections under one deferred recover each (handleFrom,
// pumpFrom); an event or a pump that panics ends its own connection and
// no other, and the round goes on with the events and pumps after it.
func TestRoundPanicEndsOnlyItsConnection(t *testing.T) {
	for _, where := range []string{"event", "pump"} {
		t.Run(where, func(t *testing.T) {
			sys := actor.NewActorSystem()
			defer sys.Shutdown()
			x := record(t, 1)
			s, cs := benchShard(t, x, 3)
			s.pool.sys = sys
			for i, c := range cs {
				c.pid, _ = sys.ProcessRegistry.Add(procOf(c), "conn-"+strconv.Itoa(i))
			}
			now := benchStep
			for i, c := range cs {
				d := clientDatagram(x.steps[0][0])
				if i == 1 {
					switch where {
					case "event":
						d.Release()
						d = &msg.Datagram{N: 5} // no buffer: onDatagram panics
					case "pump":
						c.gm = nil // pump panics
					}
				}
				s.post(c, d)
			}
			s.round(now)
			if !cs[1].stopped || !cs[1].closed {
				t.Fatalf("the connection whose %s panicked: stopped %v, closed %v; want it failed", where, cs[1].stopped, cs[1].closed)
			}
			for _, i := range []int{0, 2} {
				c := cs[i]
				if c.stopped || c.closed {
					t.Fatalf("connection %d ended with the one whose %s panicked", i, where)
				}
				if st := c.srv.Stats(); st.Accepted != 1 {
					t.Fatalf("connection %d accepted %d packets, want its datagram handled", i, st.Accepted)
				}
				if c.hidx < 0 {
					t.Fatalf("connection %d not pumped (no deadline filed)", i)
				}
			}
		})
	}
}

// TestPanicDropsTheDatagramsInput: the input a datagram collects is the
// shard's (shard.in) until the datagram's end hands it on; a datagram
// that panics half-way ends its connection, and what it collected goes
// with it, not into the next connection's datagram.
func TestPanicDropsTheDatagramsInput(t *testing.T) {
	sys := actor.NewActorSystem()
	defer sys.Shutdown()
	x := record(t, 1)
	s, cs := benchShard(t, x, 2)
	s.pool.sys = sys
	for i, c := range cs {
		c.pid, _ = sys.ProcessRegistry.Add(procOf(c), "conn-"+strconv.Itoa(i))
	}
	cs[0].input().Moves = append(cs[0].input().Moves, move.Move{Seq: 99}) // collected, then the datagram panics
	s.post(cs[0], &msg.Datagram{N: 5})                                    // no buffer: onDatagram panics
	s.round(benchStep)
	if !cs[0].stopped {
		t.Fatal("the connection whose datagram panicked was not ended")
	}
	if s.in != nil {
		t.Fatalf("the shard still holds the failed datagram's input (%d moves): the next datagram would collect into it", len(s.in.Moves))
	}
	postClient(s, cs[1], x.steps[0][0])
	s.round(2 * benchStep)
	if s.in != nil || cs[1].lastMove == 0 || cs[1].lastMove == 99 {
		t.Fatalf("the next connection's datagram: shard input left %v, its newest move %d", s.in != nil, cs[1].lastMove)
	}
}
