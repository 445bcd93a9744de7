package zone

import (
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/zones/sim"
	"github.com/ghostwire/ghostwire/zones/world"
)

// TestInspectOvertakesQueuedInputs: an Inspect sent with RequestInspect runs
// before the inputs already queued in the zone's mailbox. Sent with
// RequestFuture it travelled in an *actor.MessageEnvelope, which the
// priority mailbox files at the default priority, behind every input: in
// a crowded zone on a loaded host the census waited out its 5 s
// (TestCrowdCrossesAtOnce: "inspect zone x0z0: future: timeout").
func TestInspectOvertakesQueuedInputs(t *testing.T) {
	f := startFixture(t, world.Default(), sim.Config{TickRate: 20, Seed: 1}, nil, nil)
	defer f.stop()
	f.joinWithoutViews(1, "x0z0")
	pid := f.world.PID("x0z0")
	// Hold the zone inside a first Inspect while the inputs queue up.
	held, release := make(chan struct{}), make(chan struct{})
	first := RequestInspect(f.sys.Root, pid, func(*sim.Zone) { close(held); <-release }, 10*time.Second)
	<-held
	const queued = 500
	for seq := uint64(1); seq <= queued; seq++ {
		in := msg.NewInput()
		in.Player = 1
		in.Moves = append(in.Moves, move.Move{Seq: seq, Dt: 1})
		f.sys.Root.Send(pid, in)
	}
	before := f.world.Metrics().Inputs.Load()
	var seen uint64
	second := RequestInspect(f.sys.Root, pid, func(*sim.Zone) { seen = f.world.Metrics().Inputs.Load() }, 10*time.Second)
	close(release)
	if _, err := first.Result(); err != nil {
		t.Fatal(err)
	}
	if _, err := second.Result(); err != nil {
		t.Fatal(err)
	}
	if seen != before {
		t.Fatalf("the Inspect ran after %d of the %d inputs queued before it", seen-before, queued)
	}
	// Every input is still taken, after it.
	waitFor(t, 10*time.Second, "the queued inputs", func() bool { return f.world.Metrics().Inputs.Load() == before+queued })
}
