package zone

import (
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/zones/sim"
	"github.com/ghostwire/ghostwire/zones/world"
)

// BenchmarkZoneInputMailbox (informative): 256 players' inputs through a
// paused zone actor's mailbox, as connection shards send them
// (sendShardInputs: a shard round's inputs for the zone in one message,
// eight a round here). One iteration is one input from every player, the
// zone done with them all; run under callgrind to compare builds.
func BenchmarkZoneInputMailbox(b *testing.B) {
	const players = 256
	sys := quietSystem()
	defer sys.Shutdown()
	m := new(Metrics)
	clk := newClock()
	zw, err := Start(sys, world.Default(), sim.Config{}, Params{Now: clk.Now, Metrics: m})
	if err != nil {
		b.Fatal(err)
	}
	defer zw.Stop()
	zpid := zw.PID("x0z0")
	for i := range players {
		c := &benchConn{}
		pid, _ := sys.ProcessRegistry.Add(c, "mconn$"+strconv.Itoa(i))
		sys.Root.Send(zpid, &msg.Join{Player: uint64(i + 1), Conn: pid, Ghosts: pid, Views: &c.views})
	}
	waitFor(b, 5*time.Second, "joins", func() bool { return m.Joins.Load() == players })
	sys.Root.Send(zpid, &Pause{Paused: true})
	if err := zw.Inspect(time.Second, func(*sim.Zone) {}); err != nil {
		b.Fatal(err)
	}
	seq := uint64(0)
	ins := make([]*msg.Input, players)
	round := func() {
		seq++
		want := m.Inputs.Load() + players
		for i := range ins {
			in := msg.NewInput()
			in.Player = uint64(i + 1)
			in.Moves = append(in.Moves[:0], move.Move{Seq: seq, Dt: 32, Forward: 127})
			ins[i] = in
		}
		sendShardInputs(sys, zpid, ins)
		for m.Inputs.Load() < want {
			runtime.Gosched()
		}
	}
	for range 4 {
		round()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		round()
	}
}
