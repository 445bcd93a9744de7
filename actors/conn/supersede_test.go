package conn

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/zones/handoff"
)

// A connection superseded by a newer login of its player (Shutdown,
// Duplicate) while its record lookup is out never joins the player: its
// Join would reach the zone after the newer connection's and take the
// player from it until this one's Leave (the newer session's first
// echoes went here: 3 to 5 of them in two logins at once). One
// superseded after it joined tells its zone at once (Leave, Duplicate),
// not after its Disconnect copies: the zone gives the player back to the
// newer connection should this one's Join have come second. Neither
// sends the zone input after that: it would act on the player the newer
// connection plays (under -race the newer session's client was sent an
// ack of moves it never sent, and the older's echoes).
func TestSupersededConnectionJoinsNotAndLeavesAtOnce(t *testing.T) {
	for _, joined := range []bool{false, true} {
		name := map[bool]string{false: "during the lookup", true: "after the join"}[joined]
		t.Run(name, func(t *testing.T) {
			sys := actor.NewActorSystem()
			defer sys.Shutdown()
			x := record(t, 10)
			s, cs := benchShard(t, x, 1)
			c := cs[0]
			s.pool.sys = sys
			z := &zoneRec{}
			zone, _ := sys.ProcessRegistry.Add(z, "zone")
			c.zone = zone
			var answer func(*actor.PID, *handoff.Checkpoint)
			s.pool.cfg.Resume = func(_ uint64, done func(*actor.PID, *handoff.Checkpoint)) { answer = done }
			for i := range 5 {
				now := time.Duration(i+1) * benchStep
				for _, p := range x.steps[i] {
					feed(s, c, p, now)
				}
				s.pumpOne(c, now)
			}
			if answer == nil || !c.resuming {
				t.Fatalf("no lookup out (resuming %v)", c.resuming)
			}
			now := 6 * benchStep
			if joined {
				s.handle(c, &resumed{zone: zone}, now)
				s.sendInputs()
			}
			s.handle(c, &Shutdown{Reason: handshake.ReasonDuplicate}, now)
			if !joined {
				s.handle(c, &resumed{zone: zone}, now)
			}
			// The client's datagrams still come while the Disconnect
			// copies go: their moves must not reach the zone.
			for i := 5; i < 10; i++ {
				now := time.Duration(i+2) * benchStep
				for _, p := range x.steps[i] {
					feed(s, c, p, now)
				}
				s.pumpOne(c, now)
			}
			s.sendInputs()
			var joins, leaves, after int
			for _, m := range z.got {
				switch m := m.(type) {
				case *msg.Join:
					joins++
				case *msg.Leave:
					leaves++
					if m.Reason != handshake.ReasonDuplicate {
						t.Errorf("Leave with reason %v, want Duplicate", m.Reason)
					}
				case *msg.Input, *msg.Inputs:
					if leaves > 0 || !joined {
						after++
					}
				}
			}
			if after != 0 {
				t.Errorf("%d inputs went to the zone after the connection was superseded", after)
			}
			if want := map[bool]int{false: 0, true: 1}[joined]; joins != want || leaves != want {
				t.Fatalf("the zone got %d Joins and %d Leaves before the Disconnect copies, want %d and %d", joins, leaves, want, want)
			}
		})
	}
}
