package zone

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/replication/event"
	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/zones/sim"
)

// echoesOf returns the payloads of the events d's player id was sent.
func echoesOf(d *driver, id uint64) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var s []string
	for _, e := range d.players[id].echoes {
		s = append(s, string(e.Payload))
	}
	return s
}

func controlsOf(d *driver, id uint64) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.players[id].controls
}

// Two fresh logins of one player at once (a second device, a client
// relaunched within the idle timeout): the gateway lets the newer
// session win and ends the older with Disconnect(Duplicate). Each
// connection joins after its record lookup, so the loser's Join can reach
// the zone after the winner's: the zone takes the player over for the
// loser's connection, and the loser's Leave(Duplicate) follows at once.
// The player must then go back to the winner's connection — not leave —
// and the winner's events keep being applied and echoed to it: none
// dropped, none applied twice. (Before, the Leave took the player out:
// the winner's inputs were dropped and its events applied with their
// echoes lost until its connection looked the record up again — 49 of 75
// echoes in 1.5 s in two swarms at once with the same ids.)
func TestStaleJoinOfASupersededLoginGivesThePlayerBack(t *testing.T) {
	defer verifyNoLeaks(t)()
	f := startFixture(t, pairWorld(t), sim.Config{TickRate: 50}, nil, at)
	defer f.stop()
	const genWin, genLose = 0xb0b, 0xa11ce
	f.join(1, "x0z0") // the winner's connection: f.dpid
	waitFor(t, 2*time.Second, "join", func() bool { return f.world.Metrics().Joins.Load() == 1 })
	f.sendNumbered("x0z0", 1, genWin, 1, 3)
	waitFor(t, 2*time.Second, "echoes e1..e3", func() bool { return len(echoesOf(f.drv, 1)) == 3 })

	// The loser's connection: a driver of its own.
	lose := newDriver(nil)
	lp := lose.add(1, f.world.PID("x0z0"))
	losePID := f.sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return lose }))
	defer func() { f.sys.Root.StopFuture(losePID).Wait() }()
	f.sys.Root.Send(f.world.PID("x0z0"), &msg.Join{Player: 1, Conn: losePID, Ghosts: losePID, Views: &lp.views})
	f.sendNumbered("x0z0", 1, genLose, 1, 1) // the loser's held input, right behind its Join
	f.sys.Root.Send(f.world.PID("x0z0"), &msg.Leave{Player: 1, Conn: losePID, Reason: handshake.ReasonDuplicate})
	// The winner goes on, resending what it has not heard applied (2, 3)
	// with new events: 4.. are applied and echoed to it, 2 and 3 dropped
	// (its fence is back, not the loser's numbering), its moves
	// acknowledged again.
	f.sendNumbered("x0z0", 1, genWin, 2, 6)
	before := controlsOf(f.drv, 1)
	f.sys.Root.Send(f.dpid, &driverStep{dt: 32})
	waitFor(t, 2*time.Second, "echoes e4..e6", func() bool { return len(echoesOf(f.drv, 1)) >= 6 })
	waitFor(t, 2*time.Second, "the winner's Controls", func() bool { return controlsOf(f.drv, 1) > before })
	if c := f.census(); len(c.players) != 1 {
		t.Fatalf("players after the superseded connection's Leave: %+v", c.players)
	}
	if got, want := echoesOf(f.drv, 1), []string{"e1", "e2", "e3", "e4", "e5", "e6"}; !slices.Equal(got, want) {
		t.Fatalf("the winner's echoes %q, want %q", got, want)
	}
	waitFor(t, 2*time.Second, "e2, e3 dropped", func() bool { return f.world.Metrics().EventsDuplicate.Load() >= 2 })
	if d := f.world.Metrics().EventsDuplicate.Load(); d != 2 {
		t.Fatalf("%d events dropped as duplicates, want 2 (e2, e3 resent)", d)
	}
	if n := f.world.Metrics().EventsOutDropped.Load(); n != 0 {
		t.Fatalf("%d events out dropped", n)
	}
	lose.mu.Lock()
	defer lose.mu.Unlock()
	if len(lp.echoes) != 1 {
		t.Fatalf("the loser's connection got %d echoes, want its own one", len(lp.echoes))
	}
}

// A fresh login that supersedes a live session (a client relaunched
// within the idle timeout, a second device) numbers its events from 1 in
// a numbering of its own: the zone takes the player over from the live
// state and its fence, and the new numbering starts the fence again
// (docs/protocol.md §7.20) — none of the new session's events is dropped
// as already applied, none applied twice.
func TestFreshLoginOverALiveSessionStartsItsOwnEvents(t *testing.T) {
	defer verifyNoLeaks(t)()
	f := startFixture(t, pairWorld(t), sim.Config{TickRate: 50}, nil, at)
	defer f.stop()
	f.join(1, "x0z0")
	waitFor(t, 2*time.Second, "join", func() bool { return f.world.Metrics().Joins.Load() == 1 })
	f.sendNumbered("x0z0", 1, 0x01d, 1, 6)
	waitFor(t, 2*time.Second, "the old session's echoes", func() bool { return len(echoesOf(f.drv, 1)) == 6 })

	fresh := newDriver(nil)
	fp := fresh.add(1, f.world.PID("x0z0"))
	freshPID := f.sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return fresh }))
	defer func() { f.sys.Root.StopFuture(freshPID).Wait() }()
	f.sys.Root.Send(f.world.PID("x0z0"), &msg.Join{Player: 1, Conn: freshPID, Ghosts: freshPID, Views: &fp.views})
	f.sys.Root.Send(f.world.PID("x0z0"), &msg.Leave{Player: 1, Conn: f.dpid, Reason: handshake.ReasonDuplicate})
	f.sendNumbered("x0z0", 1, 0x0f2e54, 1, 4)
	f.sendNumbered("x0z0", 1, 0x0f2e54, 3, 4) // a resend: dropped
	waitFor(t, 2*time.Second, "the new session's echoes", func() bool { return len(echoesOf(fresh, 1)) >= 4 })
	waitFor(t, 2*time.Second, "the resend", func() bool { return f.world.Metrics().EventsDuplicate.Load() >= 2 })
	if got, want := echoesOf(fresh, 1), []string{"e1", "e2", "e3", "e4"}; !slices.Equal(got, want) {
		t.Fatalf("the new session's echoes %q, want %q", got, want)
	}
	if d := f.world.Metrics().EventsDuplicate.Load(); d != 2 {
		t.Fatalf("%d events dropped as duplicates, want 2 (the resend)", d)
	}
	if c := f.census(); len(c.players) != 1 {
		t.Fatalf("players after the takeover: %+v", c.players)
	}
}

func holdsOf(d *driver, id uint64) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.players[id].holdsAt)
}

// A client redirected from node 1 to node 2 and back (node 2 drains too)
// while its Leaves travel another way than its Joins (each node's own
// route to the zone): the connection on node 2 joins before the one on
// node 1 leaves (a takeover of a live player), and that one's
// Leave(Redirected) comes after. Once it came, the player's next
// Leave(Redirected) — the node-2 connection's, when the client goes back
// — is that connection's own: the zone holds the player's events for the
// client's next connection and says so (an empty Output), and that
// connection, on node 1 again, gets them. (Before, the takeover's mark
// for the older connection's Leave stayed after that Leave came: the
// node-2 connection's Leave was taken for it, the zone held nothing, and
// the events in flight were echoed to a connection whose client had
// left.)
func TestRedirectBackAfterALateLeaveHoldsTheEvents(t *testing.T) {
	defer verifyNoLeaks(t)()
	f := startFixture(t, pairWorld(t), sim.Config{TickRate: 50}, nil, at)
	defer f.stop()
	const gen = 0xc1
	zpid := f.world.PID("x0z0")
	f.join(1, "x0z0") // node 1's first connection: f.dpid
	waitFor(t, 2*time.Second, "join", func() bool { return f.world.Metrics().Joins.Load() == 1 })
	f.sendNumbered("x0z0", 1, gen, 1, 2)
	waitFor(t, 2*time.Second, "echoes e1, e2", func() bool { return len(echoesOf(f.drv, 1)) == 2 })

	spawn := func() (*driver, *actor.PID, *dplayer) {
		d := newDriver(nil)
		p := d.add(1, zpid)
		return d, f.sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return d })), p
	}
	two, twoPID, twoP := spawn()
	defer func() { f.sys.Root.StopFuture(twoPID).Wait() }()
	f.sys.Root.Send(zpid, &msg.Join{Player: 1, Conn: twoPID, Ghosts: twoPID, Views: &twoP.views})
	f.sys.Root.Send(zpid, &msg.Leave{Player: 1, Conn: f.dpid, Reason: handshake.ReasonRedirected})
	f.sendNumbered("x0z0", 1, gen, 3, 4)
	waitFor(t, 2*time.Second, "echoes e3, e4 on node 2", func() bool { return len(echoesOf(two, 1)) == 2 })

	// Node 2 drains: its connection tells the zone, its last input in flight.
	f.sys.Root.Send(zpid, &msg.Leave{Player: 1, Conn: twoPID, Reason: handshake.ReasonRedirected})
	f.sendNumbered("x0z0", 1, gen, 5, 6)
	waitFor(t, 2*time.Second, "the zone's hold answering node 2's Leave", func() bool { return holdsOf(two, 1) == 1 })

	back, backPID, backP := spawn()
	defer func() { f.sys.Root.StopFuture(backPID).Wait() }()
	f.sys.Root.Send(zpid, &msg.Join{Player: 1, Conn: backPID, Ghosts: backPID, Views: &backP.views})
	waitFor(t, 2*time.Second, "echoes e5, e6 on node 1 again", func() bool { return len(echoesOf(back, 1)) >= 2 })
	if got, want := echoesOf(back, 1), []string{"e5", "e6"}; !slices.Equal(got, want) {
		t.Fatalf("the client's connection back on node 1 got %q, want %q", got, want)
	}
	if got, want := echoesOf(two, 1), []string{"e3", "e4"}; !slices.Equal(got, want) {
		t.Fatalf("node 2's connection got %q, want %q", got, want)
	}
	if got := echoesOf(f.drv, 1); len(got) != 2 {
		t.Fatalf("node 1's first connection got %q, want e1, e2 only", got)
	}
	if c := f.census(); len(c.players) != 1 {
		t.Fatalf("players: %+v", c.players)
	}
}

// sendFrom hands zone one Input of player's in numbering gen, as a
// connection does: the moves seqs (each 32/960 s forward) and lane-0
// events numbered from..to (none when from is 0).
func (f *fixture) sendFrom(zone string, player, gen uint64, seqs []uint64, from, to uint64) {
	in := msg.NewInput()
	in.Player, in.EventGen = player, gen
	for _, s := range seqs {
		in.Moves = append(in.Moves, move.Move{Seq: s, Dt: 32, Forward: 1})
	}
	for s := from; from != 0 && s <= to; s++ {
		in.AddSeq(event.Ordered, 0, 0, fmt.Appendf(nil, "e%d", s), s)
	}
	f.sys.Root.Send(f.world.PID(zone), in)
}

func appliedOf(d *driver, id uint64) uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.players[id].applied
}

// Two logins at once, the older's Join second (as in
// TestStaleJoinOfASupersededLoginGivesThePlayerBack), and the newer
// session's inputs arriving between that Join and the older's
// Leave(Duplicate) — its client does not stop sending while the zone
// decides. They belong to the newer session: applied once the player is
// back with it, echoed to it in order, none to the older connection.
// (Before, they were applied at once for the older connection, which got
// their echoes — "b2: echo "a2/0"" in TestTwoLoginsAtOnceLoseNoEcho — and
// the newer session lost them.)
func TestNewerLoginsInputDuringAStaleJoinStaysItsOwn(t *testing.T) {
	defer verifyNoLeaks(t)()
	f := startFixture(t, pairWorld(t), sim.Config{TickRate: 50}, nil, at)
	defer f.stop()
	const genWin, genLose = 0xb0b, 0xa11ce
	zpid := f.world.PID("x0z0")
	p := f.drv.add(1, zpid)
	f.sys.Root.Send(zpid, &msg.Join{Player: 1, Conn: f.dpid, Ghosts: f.dpid, Views: &p.views, EventGen: genWin})
	f.sendFrom("x0z0", 1, genWin, []uint64{1}, 1, 2)
	waitFor(t, 2*time.Second, "echoes e1, e2", func() bool { return len(echoesOf(f.drv, 1)) == 2 })
	waitFor(t, 2*time.Second, "move 1 applied", func() bool { return appliedOf(f.drv, 1) == 1 })

	lose := newDriver(nil)
	lp := lose.add(1, zpid)
	losePID := f.sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return lose }))
	defer func() { f.sys.Root.StopFuture(losePID).Wait() }()
	f.sys.Root.Send(zpid, &msg.Join{Player: 1, Conn: losePID, Ghosts: losePID, Views: &lp.views, EventGen: genLose})
	f.sendFrom("x0z0", 1, genWin, []uint64{2}, 3, 4)  // the winner's, while the zone decides
	f.sendFrom("x0z0", 1, genLose, []uint64{1}, 1, 1) // the loser's held input
	f.sendFrom("x0z0", 1, genWin, []uint64{3}, 5, 5)
	f.sys.Root.Send(zpid, &msg.Leave{Player: 1, Conn: losePID, Reason: handshake.ReasonDuplicate})
	f.sendFrom("x0z0", 1, genWin, []uint64{4}, 6, 6)
	waitFor(t, 2*time.Second, "the winner's echoes to e6", func() bool {
		e := echoesOf(f.drv, 1)
		return len(e) > 0 && e[len(e)-1] == "e6"
	})
	waitFor(t, 2*time.Second, "the winner's moves acknowledged", func() bool { return appliedOf(f.drv, 1) == 4 })
	if got, want := echoesOf(f.drv, 1), names(1, 6); !slices.Equal(got, want) {
		t.Errorf("the winner's echoes %q, want %q", got, want)
	}
	if got, want := echoesOf(lose, 1), []string{"e1"}; !slices.Equal(got, want) {
		t.Errorf("the loser's connection got %q, want only its own %q", got, want)
	}
	if n := f.world.Metrics().EventsDuplicate.Load(); n != 0 {
		t.Errorf("%d events dropped as duplicates", n)
	}
	if c := f.census(); len(c.players) != 1 {
		t.Fatalf("players: %+v", c.players)
	}
}

// A fresh login takes over a live session whose connection has not yet
// heard it was superseded (its Shutdown is on the way): that connection's
// inputs still come, until its Leave(Duplicate). They must not act on
// the player the new session plays: not echoed to the new connection, and
// their moves (numbered in the old session) not acknowledged to it — its
// client would end the session ("move: ack of an unsent move").
func TestSupersededSessionsLateInputActsNotOnTheNewOne(t *testing.T) {
	defer verifyNoLeaks(t)()
	f := startFixture(t, pairWorld(t), sim.Config{TickRate: 50}, nil, at)
	defer f.stop()
	const genOld, genNew = 0x01d, 0x0f2e54
	zpid := f.world.PID("x0z0")
	p := f.drv.add(1, zpid)
	f.sys.Root.Send(zpid, &msg.Join{Player: 1, Conn: f.dpid, Ghosts: f.dpid, Views: &p.views, EventGen: genOld})
	f.sendFrom("x0z0", 1, genOld, []uint64{1, 2}, 1, 2)
	waitFor(t, 2*time.Second, "the old session's echoes", func() bool { return len(echoesOf(f.drv, 1)) == 2 })
	waitFor(t, 2*time.Second, "the old session's moves", func() bool { return appliedOf(f.drv, 1) == 2 })

	fresh := newDriver(nil)
	fp := fresh.add(1, zpid)
	freshPID := f.sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return fresh }))
	defer func() { f.sys.Root.StopFuture(freshPID).Wait() }()
	f.sys.Root.Send(zpid, &msg.Join{Player: 1, Conn: freshPID, Ghosts: freshPID, Views: &fp.views, EventGen: genNew})
	f.sendFrom("x0z0", 1, genOld, []uint64{3}, 3, 3) // the old connection's, before its Shutdown
	f.sendFrom("x0z0", 1, genNew, []uint64{1}, 1, 1)
	f.sendFrom("x0z0", 1, genOld, []uint64{4}, 4, 4)
	f.sys.Root.Send(zpid, &msg.Leave{Player: 1, Conn: f.dpid, Reason: handshake.ReasonDuplicate})
	f.sendFrom("x0z0", 1, genNew, []uint64{2}, 2, 2)
	waitFor(t, 2*time.Second, "the new session's echoes", func() bool {
		e := echoesOf(fresh, 1)
		return len(e) > 0 && e[len(e)-1] == "e2"
	})
	waitFor(t, 2*time.Second, "a Control after the new session's moves", func() bool { return appliedOf(fresh, 1) >= 2 })
	if got, want := echoesOf(fresh, 1), names(1, 2); !slices.Equal(got, want) {
		t.Errorf("the new session's echoes %q, want %q", got, want)
	}
	if a := appliedOf(fresh, 1); a != 2 {
		t.Errorf("the new session was told move %d applied, it sent 2", a)
	}
	if got, want := echoesOf(f.drv, 1), names(1, 2); !slices.Equal(got, want) {
		t.Errorf("the old connection got %q, want %q (its late events not applied)", got, want)
	}
	if c := f.census(); len(c.players) != 1 {
		t.Fatalf("players: %+v", c.players)
	}
}

// The inputs a zone keeps for a displaced login are bounded (maxParked):
// a winner that goes on sending while the stale Join's Leave is late
// gets the first maxParked back in order, the rest are dropped and
// counted (its connection resends the moves; those events are lost).
func TestParkedInputsAreBounded(t *testing.T) {
	defer verifyNoLeaks(t)()
	f := startFixture(t, pairWorld(t), sim.Config{TickRate: 50}, nil, at)
	defer f.stop()
	const genWin, genLose = 0xb0b, 0xa11ce
	zpid := f.world.PID("x0z0")
	p := f.drv.add(1, zpid)
	f.sys.Root.Send(zpid, &msg.Join{Player: 1, Conn: f.dpid, Ghosts: f.dpid, Views: &p.views, EventGen: genWin})
	f.sendFrom("x0z0", 1, genWin, nil, 1, 1)
	waitFor(t, 2*time.Second, "echo e1", func() bool { return len(echoesOf(f.drv, 1)) == 1 })

	lose := newDriver(nil)
	lp := lose.add(1, zpid)
	losePID := f.sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return lose }))
	defer func() { f.sys.Root.StopFuture(losePID).Wait() }()
	f.sys.Root.Send(zpid, &msg.Join{Player: 1, Conn: losePID, Ghosts: losePID, Views: &lp.views, EventGen: genLose})
	const extra = 5
	for s := uint64(2); s < 2+maxParked+extra; s++ {
		f.sendFrom("x0z0", 1, genWin, nil, s, s)
	}
	f.sys.Root.Send(zpid, &msg.Leave{Player: 1, Conn: losePID, Reason: handshake.ReasonDuplicate})
	f.sync()
	waitFor(t, 2*time.Second, "the parked inputs' echoes", func() bool { return len(echoesOf(f.drv, 1)) >= 1+maxParked })
	f.sys.Root.RequestFuture(f.dpid, &driverSync{}, 2*time.Second).Wait() // anything after them
	if got, want := echoesOf(f.drv, 1), names(1, 1+maxParked); !slices.Equal(got, want) {
		t.Errorf("the winner's echoes %q, want %q", got, want)
	}
	if n := f.world.Metrics().InputsDropped.Load(); n != extra {
		t.Errorf("%d inputs dropped, want %d", n, extra)
	}
	if n := len(echoesOf(lose, 1)); n != 0 {
		t.Errorf("the loser's connection got %d echoes", n)
	}
}

// takeOverWithParked joins player 1 in x0z0 through the fixture's driver
// (numbering genOld), has a fresh login's connection (numbering genNew)
// take it over, and sends three inputs of the displaced connection that
// the zone parks while the takeover is undecided (events e3..e5). It
// returns the new connection.
func (f *fixture) takeOverWithParked(genOld, genNew uint64) (*driver, *actor.PID) {
	f.t.Helper()
	zpid := f.world.PID("x0z0")
	p := f.drv.add(1, zpid)
	f.sys.Root.Send(zpid, &msg.Join{Player: 1, Conn: f.dpid, Ghosts: f.dpid, Views: &p.views, EventGen: genOld})
	f.sendFrom("x0z0", 1, genOld, []uint64{1}, 1, 2)
	waitFor(f.t, 2*time.Second, "echoes e1, e2", func() bool { return len(echoesOf(f.drv, 1)) == 2 })
	fresh := newDriver(nil)
	fp := fresh.add(1, zpid)
	freshPID := f.sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return fresh }))
	f.sys.Root.Send(zpid, &msg.Join{Player: 1, Conn: freshPID, Ghosts: freshPID, Views: &fp.views, EventGen: genNew})
	for s := uint64(3); s <= 5; s++ {
		f.sendFrom("x0z0", 1, genOld, []uint64{s - 1}, s, s)
	}
	f.sync()
	if n := f.world.Metrics().InputsDropped.Load(); n != 0 {
		f.t.Fatalf("%d inputs dropped before the takeover was decided", n)
	}
	return fresh, freshPID
}

// The takeover is decided by a Leave(Redirected) that names no connection
// (a sender that cannot tell connections apart): the superseded
// connection's, whose client follows a Redirect. The displaced
// connection's Join and parked inputs go with it, as when its Leave names
// it: the inputs are dropped (counted), and a later Leave(Duplicate) of
// the new connection takes the player out instead of giving it back to
// the connection that left. (Before, the record and its inputs stayed
// until the player left, and that Leave gave the player back to the
// connection that had left, its parked inputs applied and echoed there.)
func TestUnnamedRedirectedLeaveReleasesTheDisplacedLogin(t *testing.T) {
	defer verifyNoLeaks(t)()
	f := startFixture(t, pairWorld(t), sim.Config{TickRate: 50}, nil, at)
	defer f.stop()
	fresh, freshPID := f.takeOverWithParked(0x01d, 0x0f2e54)
	defer func() { f.sys.Root.StopFuture(freshPID).Wait() }()
	zpid := f.world.PID("x0z0")
	f.sys.Root.Send(zpid, &msg.Leave{Player: 1, Reason: handshake.ReasonRedirected})
	f.sync()
	if n := f.world.Metrics().InputsDropped.Load(); n != 3 {
		t.Errorf("%d parked inputs dropped when the takeover was decided, want 3", n)
	}
	if c := f.census(); len(c.players) != 1 {
		t.Fatalf("players after the superseded connection's Leave: %+v", c.players)
	}
	f.sys.Root.Send(zpid, &msg.Leave{Player: 1, Conn: freshPID, Reason: handshake.ReasonDuplicate})
	f.sync()
	f.sys.Root.RequestFuture(f.dpid, &driverSync{}, 2*time.Second).Wait()
	if got, want := echoesOf(f.drv, 1), names(1, 2); !slices.Equal(got, want) {
		t.Errorf("the connection that left got %q, want %q", got, want)
	}
	if c := f.census(); len(c.players) != 0 {
		t.Errorf("players after both connections left: %+v", c.players)
	}
	if n := len(echoesOf(fresh, 1)); n != 0 {
		t.Errorf("the new connection got %d echoes", n)
	}
}

// A takeover that nothing decides (neither connection's Leave comes: lost
// on its way) keeps the displaced connection's Join and parked inputs for
// displacedGrace at most: then they are dropped (counted), and the new
// connection's Leave(Duplicate) no longer gives the player back to it.
func TestUndecidedTakeoverIsForgottenAfterAGrace(t *testing.T) {
	defer func(g time.Duration) { displacedGrace = g }(displacedGrace)
	displacedGrace = 100 * time.Millisecond
	defer verifyNoLeaks(t)()
	f := startFixture(t, pairWorld(t), sim.Config{TickRate: 50}, nil, at)
	defer f.stop()
	_, freshPID := f.takeOverWithParked(0x01d, 0x0f2e54)
	defer func() { f.sys.Root.StopFuture(freshPID).Wait() }()
	waitFor(t, 5*time.Second, "the parked inputs dropped", func() bool { return f.world.Metrics().InputsDropped.Load() == 3 })
	f.sys.Root.Send(f.world.PID("x0z0"), &msg.Leave{Player: 1, Conn: freshPID, Reason: handshake.ReasonDuplicate})
	f.sync()
	f.sys.Root.RequestFuture(f.dpid, &driverSync{}, 2*time.Second).Wait()
	if got, want := echoesOf(f.drv, 1), names(1, 2); !slices.Equal(got, want) {
		t.Errorf("the displaced connection got %q, want %q", got, want)
	}
	if c := f.census(); len(c.players) != 0 {
		t.Errorf("players: %+v", c.players)
	}
}
