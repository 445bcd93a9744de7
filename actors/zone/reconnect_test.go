package zone

import (
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/replication/event"
	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/zones/sim"
	"github.com/ghostwire/ghostwire/zones/world"
)

// A player who reconnected through another connection (a client following
// a Redirect) stays when its old connection's Leave arrives late: only the
// connection the player joined through last can take it out.
func TestLateLeaveOfAnOldConnectionIsIgnored(t *testing.T) {
	// "new-conn" is no actor: the zone's Controls to it are dead letters,
	// whose throttle goroutine protoactor keeps for a while.
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(),
		goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"))
	w, _ := world.Grid("pair", 2, 1, 1000, [2]float64{-1000, -500})
	f := startFixture(t, w, sim.Config{TickRate: 50}, nil, nil)
	defer f.stop()
	f.join(1, "x0z0")
	waitFor(t, 2*time.Second, "join", func() bool { return f.world.Metrics().Joins.Load() == 1 })
	// The new connection (another PID) joins the same player.
	newConn := actor.NewPID(f.sys.Address(), "new-conn")
	f.sys.Root.Send(f.world.PID("x0z0"), &msg.Join{Player: 1, Conn: newConn})
	waitFor(t, 2*time.Second, "rejoin", func() bool { return f.world.Metrics().Joins.Load() == 2 })
	f.sys.Root.Send(f.world.PID("x0z0"), &msg.Leave{Player: 1, Conn: f.dpid}) // the old one's, late
	f.sync()
	if c := f.census(); len(c.players) != 1 {
		t.Fatalf("the player left on its old connection's Leave: %+v", c.players)
	}
	f.sys.Root.Send(f.world.PID("x0z0"), &msg.Leave{Player: 1, Conn: newConn})
	waitFor(t, 2*time.Second, "leave", func() bool { return f.world.Metrics().Leaves.Load() == 1 })
	if c := f.census(); len(c.players) != 0 {
		t.Fatalf("still there after its connection's Leave: %+v", c.players)
	}
}

// A player whose client left to follow a Redirect stays (live) for its new
// connection's Join; one whose client never comes back leaves after the
// grace period, with its final checkpoint.
func TestRedirectedPlayerWaitsForItsNewConnection(t *testing.T) {
	// Sending to new-conn, an actor that does not exist, is a dead letter:
	// protoactor logs those through a throttle whose goroutine lives for its
	// period after the last one, which may outlast the test.
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(),
		goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"))
	defer func(g time.Duration) { redirectGrace = g }(redirectGrace)
	redirectGrace = 300 * time.Millisecond
	w, _ := world.Grid("pair", 2, 1, 1000, [2]float64{-1000, -500})
	f := startFixture(t, w, sim.Config{TickRate: 50}, nil, nil)
	defer f.stop()
	f.join(1, "x0z0")
	f.join(2, "x0z0")
	waitFor(t, 2*time.Second, "joins", func() bool { return f.world.Metrics().Joins.Load() == 2 })
	for _, p := range []uint64{1, 2} {
		f.sys.Root.Send(f.world.PID("x0z0"), &msg.Leave{Player: p, Conn: f.dpid, Reason: handshake.ReasonRedirected})
	}
	f.sync()
	if c := f.census(); len(c.players) != 2 {
		t.Fatalf("redirected players taken out at once: %+v", c.players)
	}
	// Player 1 comes back through another connection; player 2 never does.
	newConn := actor.NewPID(f.sys.Address(), "new-conn")
	f.sys.Root.Send(f.world.PID("x0z0"), &msg.Join{Player: 1, Conn: newConn})
	waitFor(t, 2*time.Second, "player 2 to leave after the grace", func() bool { return f.world.Metrics().Leaves.Load() == 1 })
	time.Sleep(2 * redirectGrace)
	c := f.census()
	if _, ok := c.players[1]; !ok || len(c.players) != 1 {
		t.Fatalf("after the grace: %+v, want player 1 only", c.players)
	}
}

// A Leave(Redirected) is answered with an empty Output to the connection,
// after every event the zone sent it before; events from then on are held
// for the next connection, none goes to the old one. The connection
// redirects its client on that answer (actors/conn onRedirect): an echo
// sent before the Leave but still on its way when the connection went by a
// time guess instead was lost.
func TestRedirectedLeaveIsAnsweredAfterTheEventsSentBefore(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(),
		goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"))
	w, _ := world.Grid("pair", 2, 1, 1000, [2]float64{-1000, -500})
	f := startFixture(t, w, sim.Config{TickRate: 50}, nil, nil)
	defer f.stop()
	f.join(1, "x0z0")
	waitFor(t, 2*time.Second, "join", func() bool { return f.world.Metrics().Joins.Load() == 1 })
	echo := func(s string) {
		in := msg.NewInput()
		in.Player = 1
		in.Add(event.Ordered, EchoLane, 0, []byte(s))
		f.sys.Root.Send(f.world.PID("x0z0"), in)
	}
	echo("before")
	f.sys.Root.Send(f.world.PID("x0z0"), &msg.Leave{Player: 1, Conn: f.dpid, Reason: handshake.ReasonRedirected})
	echo("after")
	waitFor(t, 2*time.Second, "the answer", func() bool { return len(f.drv.snapshot()[1].holdsAt) == 1 })
	f.sync()
	p := f.drv.snapshot()[1]
	if len(p.echoes) != 1 || string(p.echoes[0].Payload) != "before" || p.holdsAt[0] != 1 {
		t.Fatalf("the old connection got echoes %q and the answer after %v of them, want [before], then the answer", payloads(p.echoes), p.holdsAt)
	}
	// The new connection gets what was held.
	newConn := actor.NewPID(f.sys.Address(), "new-conn")
	f.sys.Root.Send(f.world.PID("x0z0"), &msg.Join{Player: 1, Conn: newConn})
	waitFor(t, 2*time.Second, "rejoin", func() bool { return f.world.Metrics().Joins.Load() == 2 })
	if p := f.drv.snapshot()[1]; len(p.echoes) != 1 || len(p.holdsAt) != 1 {
		t.Fatalf("the old connection got %q after the answer", payloads(p.echoes))
	}
}

func payloads(es []msg.Event) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = string(e.Payload)
	}
	return out
}
