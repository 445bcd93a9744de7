package zone

import (
	"fmt"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/zones/handoff"
	"github.com/ghostwire/ghostwire/zones/sim"
)

// The Output that answers events applied between two ticks carries the
// player's event fence covering them (msg.Output.Applied), so the client
// hears them applied with their echoes. Left to the next tick's Control, a
// node stopped in between (SIGSTOP past its lease, a crash) had sent the
// echo but never the fence: the client sent the event again to the zone's
// next owner, which applied it again from its older checkpoint (an echo
// twice, by hand, in 1–2 of 20 bots' runs with a gateway node paused 17 s).
// Here the zone is paused by a census, so no tick reports anything: the
// Outputs alone must.
func TestEchoCarriesItsEventFence(t *testing.T) {
	defer verifyNoLeaks(t)()
	const gen = 0xec40
	f := startFixtureWith(t, pairWorld(t), sim.Config{TickRate: 50}, nil, Params{Spawn: at})
	defer f.stop()
	f.join(1, "x0z0")
	f.sync()
	f.sys.Root.Send(f.world.PID("x0z0"), &Pause{Paused: true, By: PauseManual})
	for s := uint64(1); s <= 3; s++ {
		f.sendNumbered("x0z0", 1, gen, s, s)
	}
	waitFor(t, 2*time.Second, "three echoes", func() bool { return len(echoesOf(f.drv, 1)) == 3 })
	f.drv.mu.Lock()
	fences := append([]handoff.EventFence(nil), f.drv.players[1].outFences...)
	f.drv.mu.Unlock()
	if len(fences) != 3 {
		t.Fatalf("%d Outputs, want 3 (one an input)", len(fences))
	}
	for i, fe := range fences {
		if want := (handoff.EventFence{Gen: gen, Last: [handoff.EventLanes]uint64{uint64(i + 1)}}); fe != want {
			t.Errorf("Output %d reports %s applied, want %s", i+1, fenceString(fe), fenceString(want))
		}
	}
	f.sys.Root.Send(f.world.PID("x0z0"), &Pause{Paused: false, By: PauseManual})
}

func fenceString(f handoff.EventFence) string { return fmt.Sprintf("gen %#x lanes %v", f.Gen, f.Last) }
