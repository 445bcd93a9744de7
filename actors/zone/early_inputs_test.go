package zone

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/replication/event"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/zones/handoff"
	"github.com/ghostwire/ghostwire/zones/sim"
)

// earlyLogin hands player 1, joined in x0z0 through the fixture's driver
// (numbering genOld), towards x1z0 and holds x0z0 once x1z0 has accepted
// the offer: x1z0 waits for the Commit. It starts a newer login (numbering
// genNew, routed to x1z0 as if x0z0 had redirected it) and sends x1z0 its
// inputs seqs (move s, event e<s> each) before x1z0 has its Join, as a
// connection redirected there at once does (actors/cluster: handed back to
// the gateway's node); in rounds of up to 8 (msg.Inputs, as connection
// shards send them) when round. It returns the newer login, a func that sends its
// Join to x0z0, and x0z0's release.
func (f *fixture) earlyLogin(round bool, genOld, genNew uint64, seqs ...uint64) (newer *driver, pid *actor.PID, join, release func()) {
	f.t.Helper()
	x0 := f.world.PID("x0z0")
	p := f.drv.add(1, x0)
	f.sys.Root.Send(x0, &msg.Join{Player: 1, Conn: f.dpid, Ghosts: f.dpid, Views: &p.views, EventGen: genOld})
	f.sendFrom("x0z0", 1, genOld, []uint64{1}, 1, 1)
	waitFor(f.t, 2*time.Second, "the older login's echo e1", func() bool { return len(echoesOf(f.drv, 1)) == 1 })
	// x1z0 held, the Offer waits there; then x0z0 held, x1z0 takes the
	// Offer and its Accept waits in x0z0.
	releaseX1 := f.holdZone("x1z0")
	defer releaseX1()
	f.sys.Root.Send(x0, &Teleport{Entity: 1, Pos: [3]float32{500, 0, 0}})
	waitFor(f.t, 2*time.Second, "x0z0 to offer the player", func() bool {
		var ph handoff.Phase
		f.inspectZone("x0z0", func(z *sim.Zone) { ph, _, _ = z.Handoffs().Status(1) })
		return ph == handoff.PhaseOffering
	})
	release = f.holdZone("x0z0")
	defer func() {
		if f.t.Failed() {
			release()
		}
	}()
	releaseX1()
	waitFor(f.t, 2*time.Second, "x1z0 to accept the offer", func() bool {
		var ok bool
		f.inspectZone("x1z0", func(z *sim.Zone) { _, ok = z.Handoffs().Reserved(1) })
		return ok
	})
	newer = newDriver(nil)
	np := newer.add(1, f.world.PID("x1z0"))
	pid = f.sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return newer }))
	var ins []*msg.Input
	for _, s := range seqs {
		if !round {
			f.sendFrom("x1z0", 1, genNew, []uint64{s}, s, s)
			continue
		}
		in := msg.NewInput()
		in.Player, in.EventGen = 1, genNew
		in.Moves = append(in.Moves, move.Move{Seq: s, Dt: 32, Forward: 1})
		in.AddSeq(event.Ordered, 0, 0, fmt.Appendf(nil, "e%d", s), s)
		ins = append(ins, in)
	}
	sendShardInputs(f.sys, f.world.PID("x1z0"), ins)
	f.syncZone("x1z0")
	// The newer login's Join reaches x0z0, which passes it on behind its
	// Commit once it takes x1z0's Accept (joinAway).
	join = func() {
		f.sys.Root.Send(x0, &msg.Join{Player: 1, Conn: pid, Ghosts: pid, Views: &np.views, EventGen: genNew})
	}
	return newer, pid, join, release
}

// A newer login's inputs that reach the zone taking its player over
// before the login's Join (passed on behind the Commit by the old zone,
// which redirected the login there at once) wait for that Join: its moves
// and events are applied for it, each once, in order, and none is
// dropped. Before, taken as they came, the moves were stashed for the
// Commit as the older connection's (numbered from 1: dropped as applied)
// and the events handled for a player not owned there — lost, uncounted
// (actors/cluster TestInputsBehindAHeldJoinWaitForIt, back to the
// gateway's node: "move 0 applied (80 Controls) and echoes []").
func TestNewerLoginsInputsBeforeItsJoinWaitForIt(t *testing.T) {
	for _, tc := range []struct {
		name  string
		round bool
	}{
		{name: "an Input a message"},
		{name: "in a shard's round (Inputs)", round: true},
	} {
		t.Run(tc.name, func(t *testing.T) { newerLoginsInputsBeforeItsJoin(t, tc.round) })
	}
}

func newerLoginsInputsBeforeItsJoin(t *testing.T, round bool) {
	defer verifyNoLeaks(t)()
	f := startFixture(t, pairWorld(t), sim.Config{TickRate: 50}, nil, at)
	defer f.stop()
	newer, pid, join, release := f.earlyLogin(round, 0x01d, 0xb0b, 1, 2, 3)
	defer func() { f.sys.Root.StopFuture(pid).Wait() }()
	defer release()
	if n := f.world.Metrics().InputsDropped.Load(); n != 0 {
		t.Fatalf("%d inputs dropped before the newer login's Join came", n)
	}
	join()
	release()
	waitFor(t, 3*time.Second, "the newer login's moves 1–3 and echoes e1–e3", func() bool {
		return appliedOf(newer, 1) >= 3 && len(echoesOf(newer, 1)) >= 3
	}, func() string {
		return fmt.Sprintf("move %d applied, echoes %q, %d inputs dropped", appliedOf(newer, 1), echoesOf(newer, 1), f.world.Metrics().InputsDropped.Load())
	})
	f.sync()
	f.sys.Root.RequestFuture(pid, &driverSync{}, 2*time.Second).Wait()
	if got, want := echoesOf(newer, 1), names(1, 3); !slices.Equal(got, want) {
		t.Errorf("the newer login was echoed %q, want %q (once each, in order)", got, want)
	}
	if got, want := echoesOf(f.drv, 1), names(1, 1); !slices.Equal(got, want) {
		t.Errorf("the older login was echoed %q, want %q (none of the newer's)", got, want)
	}
	if n := f.world.Metrics().InputsDropped.Load(); n != 0 {
		t.Errorf("%d inputs dropped", n)
	}
}

// The inputs held for a Join that has not come are bounded (maxParked:
// past it the newest is dropped, counted) and wait earlyGrace at most:
// with no Join by then they are dropped, counted, never applied to the
// player the older login plays.
func TestEarlyInputsAreBoundedAndCountedWhenDropped(t *testing.T) {
	defer verifyNoLeaks(t)()
	defer func(g time.Duration) { earlyGrace = g }(earlyGrace)
	earlyGrace = 300 * time.Millisecond
	f := startFixture(t, pairWorld(t), sim.Config{TickRate: 50}, nil, at)
	defer f.stop()
	seqs := make([]uint64, maxParked+1)
	for i := range seqs {
		seqs[i] = uint64(i + 1)
	}
	newer, pid, _, release := f.earlyLogin(false, 0x01d, 0xb0b, seqs...)
	defer func() { f.sys.Root.StopFuture(pid).Wait() }()
	defer release()
	if n := f.world.Metrics().HeldInputsDropped.Load(); n != 1 {
		t.Errorf("%d inputs dropped past the bound, want 1 (the %dth)", n, maxParked+1)
	}
	release() // the newer login's Join is lost on its way: no zone has it
	f.waitOwnedThrough(1, "x1z0", f.dpid)
	waitFor(t, 3*time.Second, "the held inputs dropped once their Join did not come", func() bool {
		return f.world.Metrics().HeldInputsDropped.Load() >= 1+maxParked
	}, func() string { return fmt.Sprintf("%d dropped", f.world.Metrics().HeldInputsDropped.Load()) })
	if n := appliedOf(newer, 1); n != 0 {
		t.Errorf("the newer login, never joined, has move %d applied", n)
	}
	if got, want := echoesOf(f.drv, 1), names(1, 1); !slices.Equal(got, want) {
		t.Errorf("the older login was echoed %q, want %q (none of the newer's)", got, want)
	}
}
