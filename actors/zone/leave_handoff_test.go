package zone

import (
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/zones/sim"
)

// holdZone stops zone's mailbox until the returned release is called (once
// or more: defer it too, so that a failing test does not leave the zone
// held): an Inspect that waits inside the actor (messages sent to the zone
// meanwhile queue, a neighbour's handoff messages too). It fixes the order
// of a handoff and a connection's messages by hand.
func (f *fixture) holdZone(zone string) (release func()) {
	f.t.Helper()
	in, out := make(chan struct{}), make(chan struct{})
	fut := RequestInspect(f.sys.Root, f.world.PID(zone), func(*sim.Zone) { close(in); <-out }, 10*time.Second)
	select {
	case <-in:
	case <-time.After(5 * time.Second):
		f.t.Fatalf("zone %s not held", zone)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			close(out)
			if _, err := msg.Await(fut); err != nil {
				f.t.Errorf("zone %s: %v", zone, err)
			}
		})
	}
}

// syncZone returns once zone has handled every message sent to it before
// (a request's Inspect runs at the default priority, behind them).
func (f *fixture) syncZone(zone string) {
	f.t.Helper()
	fut := f.sys.Root.RequestFuture(f.world.PID(zone), &Inspect{Fn: func(*sim.Zone) {}}, 5*time.Second)
	if _, err := msg.Await(fut); err != nil {
		f.t.Fatalf("zone %s: %v", zone, err)
	}
}

// handOffWithLeave teleports player 1, joined in x0z0 through conn, into
// x1z0 and has leave reach x0z0 while the handoff is still undecided
// there: x1z0 is held until x0z0 has taken the Leave (kept, the player
// frozen). x0z0 is paused when it returns with x1z0 owning the player, so
// the Leave is retried only once the test resumes x0z0's ticks.
func (f *fixture) handOffWithLeave(leave *msg.Leave) {
	f.t.Helper()
	release := f.holdZone("x1z0")
	defer release()
	f.sys.Root.Send(f.world.PID("x0z0"), &Teleport{Entity: 1, Pos: [3]float32{500, 0, 0}})
	f.sys.Root.Send(f.world.PID("x0z0"), leave)
	f.syncZone("x0z0") // the Offer waits in x1z0's mailbox, the Leave was taken
	if n := f.world.Metrics().Leaves.Load(); n != 0 {
		f.t.Fatalf("the player left x0z0 mid-handoff (%d leaves): the test's order did not hold", n)
	}
	f.sys.Root.Send(f.world.PID("x0z0"), &Pause{Paused: true})
	f.syncZone("x0z0")
	release()
	waitFor(f.t, 3*time.Second, "x1z0 owning the player", func() bool { return f.world.Metrics().HandoffsIn.Load() == 1 })
}

// A player's connection ends while its zone is handing the player to a
// neighbour: the zone cannot take it out mid-handoff and keeps the Leave
// until the handoff settles. The handoff completes: the Leave must reach
// the new owner (as one arriving after the handoff does) and the player
// leave there. (Before, the kept Leave was deleted once the player had
// gone: it stayed in x1z0, owned, with no client, for good.)
func TestLeaveDuringAHandoffReachesTheNewOwner(t *testing.T) {
	defer verifyNoLeaks(t)()
	f := startFixture(t, pairWorld(t), sim.Config{TickRate: 50}, nil, at)
	defer f.stop()
	f.join(1, "x0z0")
	waitFor(t, 2*time.Second, "join", func() bool { return f.world.Metrics().Joins.Load() == 1 })
	f.handOffWithLeave(&msg.Leave{Player: 1, Conn: f.dpid, Reason: handshake.ReasonClientQuit})
	f.sys.Root.Send(f.world.PID("x0z0"), &Pause{Paused: false})
	waitFor(t, 3*time.Second, "the player's leave", func() bool { return f.world.Metrics().Leaves.Load() == 1 })
	if f.world.Metrics().Forwarded.Load() == 0 {
		t.Error("the kept Leave was not passed on to the new owner")
	}
	if c := f.census(); len(c.players) != 0 {
		t.Fatalf("players after their client left: %+v", c.players)
	}
}

// The same with a Leave that names no connection (a sender that cannot
// tell its connections apart), and a newer login of the player that has
// taken it over at the new owner before the kept Leave comes: that Leave
// is the older login's, and the player plays on through the newer one.
// The old owner passes it on naming the connection it was kept for, so
// the new owner can tell it is not the newer login's.
func TestKeptLeaveSparesANewerLoginAtTheNewOwner(t *testing.T) {
	for _, tc := range []struct {
		name string
		conn bool
	}{
		{name: "leave names its connection", conn: true},
		{name: "leave names no connection", conn: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer verifyNoLeaks(t)()
			f := startFixture(t, pairWorld(t), sim.Config{TickRate: 50}, nil, at)
			defer f.stop()
			f.join(1, "x0z0")
			waitFor(t, 2*time.Second, "join", func() bool { return f.world.Metrics().Joins.Load() == 1 })
			l := &msg.Leave{Player: 1, Reason: handshake.ReasonClientQuit}
			if tc.conn {
				l.Conn = f.dpid
			}
			f.handOffWithLeave(l)

			newer := newDriver(nil)
			np := newer.add(1, f.world.PID("x1z0"))
			newerPID := f.sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return newer }))
			defer func() { f.sys.Root.StopFuture(newerPID).Wait() }()
			f.sys.Root.Send(f.world.PID("x1z0"), &msg.Join{Player: 1, Conn: newerPID, Ghosts: newerPID, Views: &np.views})
			f.syncZone("x1z0")
			fwd := f.world.Metrics().Forwarded.Load()
			f.sys.Root.Send(f.world.PID("x0z0"), &Pause{Paused: false})
			waitFor(t, 3*time.Second, "the kept Leave passed on", func() bool { return f.world.Metrics().Forwarded.Load() > fwd })
			f.syncZone("x1z0")
			before := controlsOf(newer, 1)
			waitFor(t, 2*time.Second, "the newer login's Controls", func() bool { return controlsOf(newer, 1) > before })
			if n := f.world.Metrics().Leaves.Load(); n != 0 {
				t.Errorf("%d leaves: the older login's Leave took the newer login's player out", n)
			}
			if c := f.census(); len(c.players) != 1 || c.owners[1][0] != "x1z0" {
				t.Fatalf("players: %+v, owners %v", c.players, c.owners)
			}
		})
	}
}

// A Leave kept while the handoff is undecided, and the handoff fails (the
// neighbour does not answer within OfferTimeout): the player is owned here
// again and leaves here, counted as a leave.
func TestLeaveDuringAFailedHandoffLeavesHere(t *testing.T) {
	defer verifyNoLeaks(t)()
	f := startFixture(t, pairWorld(t), sim.Config{TickRate: 50}, nil, at)
	defer f.stop()
	f.join(1, "x0z0")
	waitFor(t, 2*time.Second, "join", func() bool { return f.world.Metrics().Joins.Load() == 1 })
	release := f.holdZone("x1z0")
	defer release()
	f.sys.Root.Send(f.world.PID("x0z0"), &Teleport{Entity: 1, Pos: [3]float32{500, 0, 0}})
	f.sys.Root.Send(f.world.PID("x0z0"), &msg.Leave{Player: 1, Conn: f.dpid, Reason: handshake.ReasonTimeout})
	f.syncZone("x0z0")
	if n := f.world.Metrics().Leaves.Load(); n != 0 {
		t.Fatalf("the player left x0z0 mid-handoff (%d leaves): the test's order did not hold", n)
	}
	waitFor(t, 3*time.Second, "the leave once the offer timed out", func() bool { return f.world.Metrics().Leaves.Load() == 1 })
	release()
	if c := f.census(); len(c.players) != 0 {
		t.Fatalf("players after their client left: %+v", c.players)
	}
	if n := f.world.Metrics().HandoffsIn.Load(); n != 0 {
		t.Fatalf("%d handoffs in: the offer was to time out", n)
	}
}
