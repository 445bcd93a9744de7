package conn

import (
	"net/netip"
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
// ack of moves it never sent, and the older's echoes). Nor does it join
// on a Rejoin: it would take the player and never leave.
func TestSupersededConnectionJoinsNotAndLeavesAtOnce(t *testing.T) {
	for _, joined := range []bool{false, true} {
		name := map[bool]string{false: "during the lookup", true: "after the join"}[joined]
		t.Run(name, func(t *testing.T) {
			var answer func(*actor.PID, *handoff.Checkpoint)
			x, s, c, z, zone := supersedeFixture(t, func(_ uint64, done func(*actor.PID, *handoff.Checkpoint)) { answer = done })
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
			// The player's zone restarts elsewhere and its Rejoin comes
			// here (the bridge's newest Join through it was this one's):
			// no Join either, and none without its Leave.
			s.handle(c, &msg.Rejoin{Player: c.player, Restore: &handoff.Checkpoint{Entity: c.player}}, now)
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

// A connection whose client it redirected (a drain) lingers until the
// client follows; should that client come back to this gateway — the node
// it went to drains too, and sends it back here — its new connection
// supersedes this one (Shutdown, Duplicate). The older told its zone with
// its Leave(Redirected) already: it sends no Leave(Duplicate) (the zone
// holds the player for the client's next connection, which may be the
// newer one here, and would take a second Leave as that one's, or as a
// stale login's and give the player back to the connection the client
// left), nor a Join on a Rejoin after it. Both while the Redirect waits
// for the zone's hold and after the client was sent it.
func TestRedirectedConnectionSupersededByItsClientsReturnLeavesNoMore(t *testing.T) {
	for _, followed := range []bool{false, true} {
		name := map[bool]string{false: "redirect waiting", true: "redirect sent"}[followed]
		t.Run(name, func(t *testing.T) {
			_, s, c, z, zone := supersedeFixture(t, func(_ uint64, done func(*actor.PID, *handoff.Checkpoint)) {})
			now := 6 * benchStep
			s.handle(c, &resumed{zone: zone}, now)
			s.sendInputs()
			s.handle(c, &Redirect{To: netip.MustParseAddrPort("10.0.0.3:7777"), Token: make([]byte, handshake.TokenSize)}, now)
			s.pumpOne(c, now)
			if followed {
				s.handle(c, msg.NewOutput(), now) // the zone holds the player's events
				s.pumpOne(c, now)
				if !c.is(redirect) {
					t.Fatal("the Redirect was not sent to the client")
				}
			} else if !c.redirWaiting() {
				t.Fatal("no Redirect waiting for the zone's hold")
			}
			now += benchStep
			s.handle(c, &Shutdown{Reason: handshake.ReasonDuplicate}, now)
			s.pumpOne(c, now)
			// The player's zone restarts elsewhere and asks its connections
			// back (Rejoin): not this one.
			s.handle(c, &msg.Rejoin{Player: c.player, Restore: &handoff.Checkpoint{Entity: c.player}}, now)
			s.pumpOne(c, now)
			s.sendInputs()
			var joins, leaves int
			for _, m := range z.got {
				switch m := m.(type) {
				case *msg.Join:
					joins++
				case *msg.Leave:
					leaves++
					if m.Reason != handshake.ReasonRedirected {
						t.Errorf("Leave with reason %v, want only the Redirected one", m.Reason)
					}
				}
			}
			if joins != 1 || leaves != 1 {
				t.Fatalf("the zone got %d Joins and %d Leaves, want 1 and 1 (the join, the Redirect's leave)", joins, leaves)
			}
		})
	}
}

// supersedeFixture is one connection on a shard with a recording zone
// (named "zone" in a fresh actor system, stopped with the test) and the
// record lookup resume, after the first five steps of a recorded client's
// datagrams.
func supersedeFixture(t *testing.T, resume func(uint64, func(*actor.PID, *handoff.Checkpoint))) (*recording, *shard, *Conn, *zoneRec, *actor.PID) {
	t.Helper()
	sys := actor.NewActorSystem()
	t.Cleanup(sys.Shutdown)
	x := record(t, 10)
	s, cs := benchShard(t, x, 1)
	c := cs[0]
	s.pool.sys = sys
	z := &zoneRec{}
	zone, _ := sys.ProcessRegistry.Add(z, "zone")
	c.zone = zone
	s.pool.cfg.Resume = resume
	for i := range 5 {
		now := time.Duration(i+1) * benchStep
		for _, p := range x.steps[i] {
			feed(s, c, p, now)
		}
		s.pumpOne(c, now)
	}
	return x, s, c, z, zone
}
