package conn

import (
	"testing"

	"github.com/ghostwire/ghostwire/actors/msg"
)

// TestWarmAheadAnyRound: the prefetch steps read only what is there — a
// connection not started (no session yet), events that are not datagrams,
// a datagram without bytes, the round's end — and allocate nothing.
func TestWarmAheadAnyRound(t *testing.T) {
	x := record(t, 4)
	s, cs := benchShard(t, x, 3)
	bare := &Conn{sh: s, hidx: -1} // no session yet
	empty := &msg.Datagram{}
	s.work = []envelope{
		{c: cs[0], m: clientDatagram(x.steps[0][0])},
		{c: bare, m: clientDatagram(x.steps[0][0])},
		{c: cs[1], m: msg.NewControl()},
		{c: cs[2], m: empty},
		{c: cs[0], m: clientDatagram(x.steps[1][0])},
	}
	allocs := testing.AllocsPerRun(10, func() {
		for i := range s.work {
			s.warmStart(i)
			s.warmAhead(i)
		}
	})
	if allocs != 0 {
		t.Errorf("warming a round allocates %.1f times", allocs)
	}
}
