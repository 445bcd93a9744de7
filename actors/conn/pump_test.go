package conn

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/actors/udp"
	"github.com/ghostwire/ghostwire/replication/move"
)

// TestPumpLeavesNothingDue: a pump seals every datagram its session has
// due, including when it skips the Poll because session.Server.Due said
// there is nothing (most pumps after a datagram): a Poll right after it,
// at the same instant, finds nothing. Rounds come at uneven times, a
// datagram and a Control each in their own, as on a busy shard; the
// packets the pumps send are counted so the check is not vacuous.
func TestPumpLeavesNothingDue(t *testing.T) {
	const steps = 120
	x := record(t, steps)
	s, cs := benchShard(t, x, 1)
	c := cs[0]
	rng := rand.New(rand.NewPCG(3, 3))
	buf := make([]byte, 0, udp.MaxDatagram)
	var ctl move.ControlState
	now, pumps, sent := time.Duration(0), 0, uint64(0)
	check := func(what string, i int) {
		t.Helper()
		s.pumpOne(c, now)
		pumps++
		sent += uint64(len(s.ms))
		s.flush()
		if pkt, err := c.srv.Poll(now, buf[:0], c.gm); err != nil || len(pkt) != 0 {
			t.Fatalf("step %d, after a %s: the pump left a %d-byte datagram due (err %v)", i, what, len(pkt), err)
		}
	}
	for i := range steps {
		now = time.Duration(i+1)*benchStep + time.Duration(rng.IntN(int(benchStep/time.Microsecond)))*time.Microsecond/2
		for _, p := range x.steps[i] {
			d := msg.NewDatagram()
			d.N = copy(d.Buf, p)
			d.Addr = benchClient
			s.handle(c, d, now)
			check("datagram", i)
			now += time.Duration(rng.IntN(5)) * time.Millisecond
		}
		ctl.Pos[0] += 0.2
		m := msg.NewControl()
		m.LastApplied, m.State = c.srv.LastApplied(), ctl
		s.handle(c, m, now)
		check("control", i)
	}
	if sent < steps/2 {
		t.Fatalf("%d pumps sent %d datagrams in %d steps: the replay did not run", pumps, sent, steps)
	}
}
