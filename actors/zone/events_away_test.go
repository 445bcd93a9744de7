package zone

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/replication/event"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/zones/handoff"
	"github.com/ghostwire/ghostwire/zones/sim"
)

// ownerLog records, for every lane-0 event a zone applied, which zone
// applied it and whether that zone owned the player then (inside its
// fence); the rest goes to the dev game (teleports).
type ownerLog struct {
	eventLog
	dev DevGame
}

func (l *ownerLog) HandleEvent(c *EventContext, player uint64, e *msg.Event) {
	if e.Class == event.Ordered && e.Lane == 0 {
		z := c.Zone()
		owner := "owner"
		if !z.Handoffs().Owns(player) {
			owner = "NOT OWNER"
		}
		l.add(fmt.Sprintf("%s@%s(%s)", e.Payload, z.Config().Zone, owner))
		return
	}
	l.dev.HandleEvent(c, player, e)
}

func moveAt(seq uint64) move.Move { return move.Move{Seq: seq, Dt: 32, Forward: 1} }

func appliedAt(zone string, from, to uint64) []string {
	var s []string
	for i := from; i <= to; i++ {
		s = append(s, fmt.Sprintf("e%d@%s(owner)", i, zone))
	}
	return s
}

// A player handed from x0z0 to x1z0 (the Commit taken, x0z0 forwarding)
// whose older connection's inputs still reach x0z0 before its Route: the
// moves are forwarded, and the events go on with them to the owner, which
// applies each once inside its fence — none at x0z0, outside it. The
// client resends them to the new owner after its Route (docs/protocol.md
// §7.20): the fence drops the resend. Before, x0z0 ran the events itself
// (sim.Zone.TakeEvent let a player it did not own through, "their owner
// fences them", yet nothing sent them there) and the resend was applied
// again at x1z0: twice, once outside the owner's fence.
func TestEventsOfAHandedAwayPlayerGoOnToTheOwner(t *testing.T) {
	for _, tc := range []struct {
		name  string
		moves bool
		round bool
	}{
		{name: "events alone"},
		{name: "behind moves", moves: true},
		{name: "in a shard's round", moves: true, round: true},
	} {
		t.Run(tc.name, func(t *testing.T) { eventsOfAHandedAwayPlayer(t, tc.moves, tc.round) })
	}
}

func eventsOfAHandedAwayPlayer(t *testing.T, moves, round bool) {
	defer verifyNoLeaks(t)()
	const gen = 0x5e7
	log := &ownerLog{dev: DevGame{Teleport: true}}
	f := startFixtureWith(t, pairWorld(t), sim.Config{TickRate: 50}, nil, Params{Spawn: at, Events: log})
	defer f.stop()
	f.join(1, "x0z0")
	f.sendNumbered("x0z0", 1, gen, 1, 2)
	f.send("x0z0", 1, ordered(TeleportLane, AppendTeleport(nil, 300, 50)))
	waitFor(t, 3*time.Second, "x1z0 owning the player", func() bool { return f.world.Metrics().HandoffsIn.Load() == 1 })
	f.syncZone("x0z0")
	f.inspectZone("x0z0", func(z *sim.Zone) {
		if ph, _, _ := z.Handoffs().Status(1); ph != handoff.PhaseForwarding {
			t.Fatalf("player 1 is %s in x0z0, want forwarding", ph)
		}
	})
	if got := log.take(); !slices.Equal(got, appliedAt("x0z0", 1, 2)) {
		t.Fatalf("before the handoff applied %q", got)
	}
	// The older connection's inputs, still sent to x0z0.
	in := msg.NewInput()
	in.Player, in.EventGen = 1, gen
	if moves {
		in.Moves = append(in.Moves, moveAt(1), moveAt(2))
	}
	for s := uint64(3); s <= 4; s++ {
		in.AddSeq(event.Ordered, 0, 0, fmt.Appendf(nil, "e%d", s), s)
	}
	if round {
		sendShardInputs(f.sys, f.world.PID("x0z0"), []*msg.Input{in})
	} else {
		f.sys.Root.Send(f.world.PID("x0z0"), in)
	}
	f.syncZone("x0z0")
	f.syncZone("x1z0")
	f.syncZone("x1z0") // what x0z0 passed on behind the first
	if got, want := log.take(), appliedAt("x1z0", 3, 4); !slices.Equal(got, want) {
		t.Errorf("the older connection's e3, e4: applied %q, want %q (by the owner)", got, want)
	}
	// The client, routed to x1z0, resends what it has not seen applied.
	f.sendNumbered("x1z0", 1, gen, 3, 5)
	f.syncZone("x1z0")
	if got, want := log.take(), appliedAt("x1z0", 5, 5); !slices.Equal(got, want) {
		t.Errorf("the resend e3..e5: applied %q, want %q (e3, e4 once only)", got, want)
	}
	if moves {
		waitFor(t, 3*time.Second, "the forwarded moves applied by x1z0", func() bool { return appliedOf(f.drv, 1) >= 2 },
			func() string { return fmt.Sprintf("move %d applied", appliedOf(f.drv, 1)) })
	}
	if n := f.world.Metrics().EventsDuplicate.Load(); n != 2 {
		t.Errorf("%d duplicates dropped at x1z0's fence, want 2 (the resent e3, e4)", n)
	}
	if n := f.world.Metrics().EventsAwayDropped.Load(); n != 0 {
		t.Errorf("%d events dropped as of a player no zone here knows", n)
	}
}

// An ordered event of a player a zone neither owns nor knows where it
// went (never here, or forgotten) is dropped, counted: its client resends
// it on its next connection. Before, it was applied (TakeEvent let it
// through), outside any fence.
func TestEventsOfAnUnknownPlayerDroppedCounted(t *testing.T) {
	defer verifyNoLeaks(t)()
	log := &ownerLog{}
	f := startFixtureWith(t, pairWorld(t), sim.Config{TickRate: 50}, nil, Params{Spawn: at, Events: log})
	defer f.stop()
	f.sendNumbered("x1z0", 7, 0x7, 1, 3)
	f.syncZone("x1z0")
	if got := log.take(); len(got) != 0 {
		t.Errorf("x1z0 applied %q of player 7, which it does not know", got)
	}
	if n := f.world.Metrics().EventsAwayDropped.Load(); n != 3 {
		t.Errorf("%d events dropped counted, want 3", n)
	}
}
