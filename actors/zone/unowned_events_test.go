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
	"github.com/ghostwire/ghostwire/zones/world"
)

// classLog records every event a zone's game was handed, of any class,
// as "payload@zone(owner)", or "(NOT OWNER)" when the zone did not own
// the player then; teleport requests go on to the dev game.
type classLog struct {
	eventLog
	dev DevGame
}

func (l *classLog) HandleEvent(c *EventContext, player uint64, e *msg.Event) {
	if e.Class == event.Ordered && e.Lane == TeleportLane {
		l.dev.HandleEvent(c, player, e)
		return
	}
	z := c.Zone()
	owner := "owner"
	if !z.Handoffs().Owns(player) {
		owner = "NOT OWNER"
	}
	l.add(fmt.Sprintf("%s@%s(%s)", e.Payload, z.Config().Zone, owner))
}

// everyClass is one Input's worth of player's events, one of each class
// a client sends: unguaranteed, unordered, staggered, an ordered one not
// numbered, and an ordered one numbered seq of numbering gen (payloads
// "u", "r", "s", "o", "n<seq>").
func everyClass(player, gen, seq uint64) *msg.Input {
	in := msg.NewInput()
	in.Player, in.EventGen = player, gen
	in.Add(event.Unguaranteed, 0, 0, []byte("u"))
	in.Add(event.Unordered, 0, 0, []byte("r"))
	in.Add(event.Staggered, 0, 7, []byte("s"))
	in.Add(event.Ordered, 0, 0, []byte("o"))
	in.AddSeq(event.Ordered, 0, 0, fmt.Appendf(nil, "n%d", seq), seq)
	return in
}

func everyClassAt(zone string, seq uint64) []string {
	var s []string
	for _, p := range []string{"u", "r", "s", "o", fmt.Sprintf("n%d", seq)} {
		s = append(s, fmt.Sprintf("%s@%s(owner)", p, zone))
	}
	return s
}

// No event of a player a zone does not own reaches its game, whatever
// its class: one of a player it never had, or holds only a replica of (a
// neighbour's player near the border), is dropped and counted
// (EventsAwayDropped), and those of a player it handed away are applied
// by the owner, in their order, every class (eventsAway). Before, only
// numbered ordered events were fenced (sim.Zone.TakeEvent): unguaranteed,
// unordered, staggered and unnumbered ordered events went to the game of
// whichever zone they reached — "[u@x1z0(NOT OWNER) r@x1z0(NOT OWNER)
// s@x1z0(NOT OWNER) o@x1z0(NOT OWNER)]", acting on a player the zone
// does not simulate.
func TestEventsOfAPlayerNotOwnedNeverApplied(t *testing.T) {
	defer verifyNoLeaks(t)()
	const gen = 0xc1a55
	log := &classLog{dev: DevGame{Teleport: true}}
	nearBorder := func(id uint64, r world.Rect) [3]float32 { return [3]float32{float32(r.Max[0] - 5), 0, 0} }
	f := startFixtureWith(t, pairWorld(t), sim.Config{TickRate: 50}, nil, Params{Spawn: nearBorder, Events: log})
	defer f.stop()
	m := f.world.Metrics()
	send := func(zone string, in *msg.Input) {
		f.sys.Root.Send(f.world.PID(zone), in)
		f.syncZone(zone)
	}

	t.Run("never here", func(t *testing.T) {
		send("x1z0", everyClass(7, gen, 1))
		if got := log.take(); len(got) != 0 {
			t.Errorf("x1z0 applied %q of player 7, which it never had", got)
		}
		if n := m.EventsAwayDropped.Load(); n != 5 {
			t.Errorf("%d events dropped counted, want 5 (one of each class)", n)
		}
	})

	f.join(1, "x0z0")
	waitFor(t, 3*time.Second, "x1z0 to hold a replica of player 1", func() bool {
		replica := false
		f.inspectZone("x1z0", func(z *sim.Zone) {
			e, ok := z.Entity(1)
			replica = ok && e.Replica
		})
		return replica
	})
	t.Run("the owner", func(t *testing.T) {
		send("x0z0", everyClass(1, gen, 1))
		if got, want := log.take(), everyClassAt("x0z0", 1); !slices.Equal(got, want) {
			t.Errorf("the owner applied %q, want %q", got, want)
		}
	})
	t.Run("a neighbour's replica", func(t *testing.T) {
		away := m.EventsAwayDropped.Load()
		send("x1z0", everyClass(1, gen, 2))
		if got := log.take(); len(got) != 0 {
			t.Errorf("x1z0 applied %q of player 1, which it holds a replica of", got)
		}
		if n := m.EventsAwayDropped.Load() - away; n != 5 {
			t.Errorf("%d events dropped counted, want 5 (one of each class)", n)
		}
	})

	f.send("x0z0", 1, ordered(TeleportLane, AppendTeleport(nil, 300, 0)))
	waitFor(t, 3*time.Second, "x1z0 owning player 1", func() bool { return m.HandoffsIn.Load() == 1 })
	f.syncZone("x0z0")
	f.inspectZone("x0z0", func(z *sim.Zone) {
		if ph, _, _ := z.Handoffs().Status(1); ph != handoff.PhaseForwarding && ph != handoff.PhaseCommitting {
			t.Fatalf("player 1 is %s in x0z0, want handed away", ph)
		}
	})
	t.Run("handed away", func(t *testing.T) {
		away := m.EventsAwayDropped.Load()
		// The older connection's Input, still sent to x0z0.
		send("x0z0", everyClass(1, gen, 2))
		f.syncZone("x1z0") // what x0z0 passed on
		if got, want := log.take(), everyClassAt("x1z0", 2); !slices.Equal(got, want) {
			t.Errorf("the events sent to x0z0 after it handed player 1 away: applied %q, want %q (by the owner, in order)", got, want)
		}
		if n := m.EventsAwayDropped.Load() - away; n != 0 {
			t.Errorf("%d events dropped, want them passed on", n)
		}
	})
	if n := m.EventsEarlyDropped.Load(); n != 0 {
		t.Errorf("%d events counted dropped as of a reserved player", n)
	}
}
