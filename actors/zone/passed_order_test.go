package zone

import (
	"fmt"
	"sync"
	"testing"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/replication/event"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/zones/handoff"
	"github.com/ghostwire/ghostwire/zones/sim"
)

// movesSeen records, for each event a player sends, the zone that handled
// it and the newest move of the player's that zone had received by then
// (applied or queued).
type movesSeen struct {
	mu  sync.Mutex
	got []string
}

func (s *movesSeen) HandleEvent(c *EventContext, player uint64, e *msg.Event) {
	info, _ := c.Zone().Entity(player)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, fmt.Sprintf("%s: event %d after move %d", c.Zone().ID(), e.Payload[0], info.LastApplied+uint64(info.Queued)))
}

func (s *movesSeen) copy() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.got...)
}

// The owner's side of the same: what x0z0 sends x1z0 for two Inputs of a
// player it handed there — each Input's Forward, then the Input passed on
// (passInputOn: wrapped, a zone of this process) — queued at x1z0 while
// it is busy, is handled in the order it was sent.
func TestPassedInputsAndForwardsKeepTheirOrder(t *testing.T) {
	defer verifyNoLeaks(t)()
	seen := &movesSeen{}
	f := startFixtureWith(t, pairWorld(t), slowOffers, nil, Params{Spawn: at, Events: seen})
	defer f.stop()
	f.handedToX1z0()
	var ep handoff.Epoch
	f.inspectZone("x1z0", func(z *sim.Zone) { _, ep, _ = z.Handoffs().Status(1) })
	f.sys.Root.Send(f.world.PID("x1z0"), &Pause{Paused: true})
	f.syncZone("x1z0")
	release := f.holdZone("x1z0")
	defer release()
	for i := uint64(1); i <= 3; i++ {
		f.sys.Root.Send(f.world.PID("x1z0"), &HandoffEnvelope{Msg: handoff.Msg{Kind: handoff.KindForward, Entity: 1, Epoch: ep,
			From: "x0z0", To: "x1z0", Sent: f.clk.Now(), Moves: []move.Move{{Seq: i, Dt: 32, Forward: 127}}}})
		in := msg.NewInput()
		in.Player = 1
		in.Add(event.Unordered, 0, 0, []byte{byte(i)})
		f.sys.Root.Send(f.world.PID("x1z0"), &passedInput{in: in})
	}
	release()
	f.syncZone("x1z0")
	want := []string{"x1z0: event 1 after move 1", "x1z0: event 2 after move 2", "x1z0: event 3 after move 3"}
	if got := seen.copy(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events handled at the owner:\n got %q\nwant %q", got, want)
	}
}

// A passed-on Input goes wrapped to a zone of this process and to a
// proxy alike: the proxy (actors/cluster) takes it with PassedOn and marks
// it on the wire, and the owner's node wraps it again with PassOn. A plain
// Input is not taken for a passed-on one.
func TestPassedInputTellsItself(t *testing.T) {
	in := msg.NewInput()
	defer in.Release()
	if got, ok := PassedOn(PassOn(in)); !ok || got != in {
		t.Fatalf("PassedOn(PassOn(in)) = %p, %v; want in, true", got, ok)
	}
	if _, ok := PassedOn(in); ok {
		t.Fatal("a plain Input taken for a passed-on one")
	}
	if p, ok := PassOn(in).(*passedInput); !ok || p.GetPriority() != zonePriority {
		t.Fatal("PassOn's wrapper is not at zonePriority")
	}
}
