package zone

import (
	"fmt"
	"testing"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/replication/event"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/zones/sim"
)

// A player handed from x0z0 to x1z0 whose connection still sends to x0z0
// (its Route not there yet): x0z0 passes each Input on, its moves in a
// Forward and its events behind it. At x1z0 each Input's events must be
// handled after its own moves and before the next Input's, as they are
// when the connection sends to x1z0 itself: an event handler that looks
// at the player (where it stands, what it has sent) sees what it would
// have seen. Before, the passed-on events went at the default mailbox
// priority and the Forwards at zonePriority: with two Inputs queued at
// x1z0, both Forwards were taken first, and the first Input's events
// were handled after the second Input's moves (a tick between would have
// applied them).
func TestPassedOnInputsKeepTheirOrderAtTheOwner(t *testing.T) {
	defer verifyNoLeaks(t)()
	seen := &movesSeen{}
	f := startFixtureWith(t, pairWorld(t), slowOffers, nil, Params{Spawn: at, Events: seen})
	defer f.stop()
	f.handedToX1z0()
	f.sys.Root.Send(f.world.PID("x1z0"), &Pause{Paused: true}) // no tick applies the moves: they stay queued
	f.syncZone("x1z0")
	release := f.holdZone("x1z0") // the passed-on messages queue there
	defer release()
	for i := uint64(1); i <= 3; i++ {
		in := msg.NewInput()
		in.Player = 1
		in.Moves = append(in.Moves, move.Move{Seq: i, Dt: 32, Forward: 127})
		in.Add(event.Unordered, 0, 0, []byte{byte(i)})
		f.sys.Root.Send(f.world.PID("x0z0"), in)
	}
	f.syncZone("x0z0")
	release()
	f.syncZone("x1z0")
	want := []string{"x1z0: event 1 after move 1", "x1z0: event 2 after move 2", "x1z0: event 3 after move 3"}
	if got := seen.copy(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events handled at the owner:\n got %q\nwant %q", got, want)
	}
	var info sim.EntityInfo
	f.inspectZone("x1z0", func(z *sim.Zone) { info, _ = z.Entity(1) })
	if !info.Owned || info.LastApplied+uint64(info.Queued) != 3 {
		t.Fatalf("player 1 at x1z0: %+v; want owned, 3 moves received", info)
	}
}
