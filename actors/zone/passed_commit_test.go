package zone

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/replication/event"
	"github.com/ghostwire/ghostwire/zones/handoff"
	"github.com/ghostwire/ghostwire/zones/sim"
)

// Inputs the offering zone passed on (passInputOn: the handed
// connection's events, its moves gone ahead in a Forward) that reach the
// zone taking the player before its Commit — a Commit kept by a lease's
// hold (paused.go), or one waiting for its record write on another node
// while they overtook it — are the player's as it is handed: applied at
// the Commit, in order, inside the fence it carries. Before, they were
// held with a newer login's inputs (holdEarly) and, of the Offer's own
// generation (the handed connection's), could not be told from a
// redirected newer login's of that generation: they waited for a Join
// that never came and were dropped at earlyGrace (10 s), the events lost.
// A newer login's inputs of the same generation still wait for its Join
// (TestSameGenerationLoginsInputsBeforeTheCommitWaitForItsJoin).
func TestPassedOnInputsBeforeTheCommitAppliedAtIt(t *testing.T) {
	defer verifyNoLeaks(t)()
	f := startFixture(t, pairWorld(t), sim.Config{TickRate: 50}, nil, at)
	defer f.stop()
	const gen = 0x0ff
	x0 := f.world.PID("x0z0")
	p := f.drv.add(1, x0)
	f.sys.Root.Send(x0, &msg.Join{Player: 1, Conn: f.dpid, Ghosts: f.dpid, Views: &p.views, EventGen: gen})
	f.sendFrom("x0z0", 1, gen, []uint64{1}, 1, 1)
	waitFor(t, 2*time.Second, "the echo e1", func() bool { return len(echoesOf(f.drv, 1)) == 1 })
	// x1z0 takes the Offer; x0z0, held, has its Accept waiting.
	releaseX1 := f.holdZone("x1z0")
	defer releaseX1()
	f.sys.Root.Send(x0, &Teleport{Entity: 1, Pos: [3]float32{500, 0, 0}})
	waitFor(t, 2*time.Second, "x0z0 to offer the player", func() bool {
		var ph handoff.Phase
		f.inspectZone("x0z0", func(z *sim.Zone) { ph, _, _ = z.Handoffs().Status(1) })
		return ph == handoff.PhaseOffering
	})
	release := f.holdZone("x0z0")
	defer release()
	releaseX1()
	waitFor(t, 2*time.Second, "x1z0 to accept the offer", func() bool {
		var ok bool
		f.inspectZone("x1z0", func(z *sim.Zone) { _, ok = z.Handoffs().Reserved(1) })
		return ok
	})
	// What x0z0 passed on reaches x1z0 before the Commit: e2, e3.
	for s := uint64(2); s <= 3; s++ {
		in := msg.NewInput()
		in.Player, in.EventGen = 1, gen
		in.AddSeq(event.Ordered, 0, 0, fmt.Appendf(nil, "e%d", s), s)
		f.sys.Root.Send(f.world.PID("x1z0"), &passedInput{in: in})
	}
	f.syncZone("x1z0")
	if got := echoesOf(f.drv, 1); len(got) != 1 {
		t.Fatalf("echoed %q before the Commit: passed-on events applied for a player not owned yet", got)
	}
	release() // the Accept taken: x0z0 commits the player to x1z0
	waitFor(t, 3*time.Second, "e2, e3 applied at the Commit", func() bool { return len(echoesOf(f.drv, 1)) >= 3 }, func() string {
		return fmt.Sprintf("echoed %q, %d held inputs dropped", echoesOf(f.drv, 1), f.world.Metrics().HeldInputsDropped.Load())
	})
	f.sync()
	if got, want := echoesOf(f.drv, 1), names(1, 3); !slices.Equal(got, want) {
		t.Errorf("echoed %q, want %q (once each, in order)", got, want)
	}
	if n := f.world.Metrics().HeldInputsDropped.Load(); n != 0 {
		t.Errorf("%d held inputs dropped", n)
	}
	var info sim.EntityInfo
	f.inspectZone("x1z0", func(z *sim.Zone) { info, _ = z.Entity(1) })
	if !info.Owned {
		t.Fatalf("player 1 at x1z0: %+v; want owned", info)
	}
}
