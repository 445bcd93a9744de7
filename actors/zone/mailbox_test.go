package zone

import (
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/replication/event"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/zones/sim"
	"github.com/ghostwire/ghostwire/zones/world"
)

// TestInputMailboxIsBounded: a zone that stops taking its mailbox (here an
// Inspect that waits) holds at most its bound of inputs (1,024 for a zone
// of one player); the newest inputs without events beyond it are dropped
// and counted (InputsShed, MovesShed), alone or out of a shard's batch,
// while every input that carries events is kept. Once the zone has taken
// its mailbox it has room for the bound again. Without the bound every
// input waited in the mailbox.
func TestInputMailboxIsBounded(t *testing.T) {
	sys := quietSystem()
	defer sys.Shutdown()
	m := new(Metrics)
	clk := newClock()
	zw, err := StartZones(sys, world.Default(), sim.Config{Classes: ghostClasses(t)}, Params{Now: clk.Now, Metrics: m}, []string{"x0z0"})
	if err != nil {
		t.Fatal(err)
	}
	defer zw.Stop()
	zpid := zw.PID("x0z0")
	c := &benchConn{}
	cpid, _ := sys.ProcessRegistry.Add(c, "mbconn")
	sys.Root.Send(zpid, benchJoin(1, cpid, &c.views))
	waitFor(t, 5*time.Second, "join", func() bool { return m.Joins.Load() == 1 })

	seq := uint64(0)
	input := func(ev bool) *msg.Input {
		seq++
		in := msg.NewInput()
		in.Player = 1
		in.Moves = append(in.Moves, move.Move{Seq: seq, Dt: 1, Forward: 1})
		if ev {
			in.Add(event.Ordered, EchoLane, 0, []byte{byte(seq)})
		}
		return in
	}
	// burst sends n inputs, every tenth with an event, alone and in shard
	// batches of eight, while the zone waits; it returns how many carry
	// events and how many without come after the first bound's worth
	// (in the order the mailbox gets them).
	burst := func(n int) (events, late int) {
		posted := 0
		post := func(ins ...*msg.Input) {
			for _, in := range ins {
				if posted >= minQueuedInputs && len(in.Events) == 0 {
					late++
				}
				posted++
			}
		}
		entered, release := make(chan struct{}), make(chan struct{})
		RequestInspect(sys.Root, zpid, func(*sim.Zone) { close(entered); <-release }, 10*time.Second)
		<-entered
		defer close(release)
		var batch []*msg.Input
		for i := range n {
			ev := i%10 == 9
			if ev {
				events++
			}
			in := input(ev)
			if i%3 == 0 {
				post(in)
				sys.Root.Send(zpid, in)
				continue
			}
			batch = append(batch, in)
			if len(batch) == 8 {
				post(batch...)
				sendShardInputs(sys, zpid, batch)
				batch = batch[:0]
			}
		}
		post(batch...)
		sendShardInputs(sys, zpid, batch)
		return events, late
	}

	const n = 3000
	// The first 1,024 inputs are kept whatever they carry; after them only
	// those with events.
	events, late := burst(n)
	waitFor(t, 10*time.Second, "the backlog taken", func() bool { return m.Inputs.Load()+m.InputsShed.Load() == n })
	if got := m.InputsShed.Load(); got != uint64(late) {
		t.Fatalf("%d inputs shed, want %d (every input without events beyond the first %d)", got, late, minQueuedInputs)
	}
	if got := m.MovesShed.Load(); got != uint64(late) {
		t.Fatalf("%d moves shed, want %d", got, late)
	}
	if got := m.Events.Load(); got != uint64(events) {
		t.Fatalf("%d events taken, want every one of %d", got, events)
	}
	// Taken: the mailbox has its whole room again.
	shed := m.InputsShed.Load()
	if _, late := burst(minQueuedInputs); late != 0 {
		t.Fatal("the second burst is larger than the bound")
	}
	waitFor(t, 10*time.Second, "the second burst taken", func() bool { return m.Inputs.Load()+m.InputsShed.Load() == n+minQueuedInputs })
	if got := m.InputsShed.Load(); got != shed {
		t.Fatalf("%d inputs shed from a burst the bound holds, want 0", got-shed)
	}
}
