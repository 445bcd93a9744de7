package zone

import (
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/replication/ghost"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/zones/sim"
	"github.com/ghostwire/ghostwire/zones/world"
)

// benchConn is a connection as the zone sees it: a PID whose process
// takes each message where it is sent (as actors/conn's shards post
// them), releases Controls and takes and releases views.
type benchConn struct {
	views    msg.ViewSlot
	controls atomic.Uint64
	nudged   atomic.Uint64 // Controls that carried the view's nudge
	readies  atomic.Uint64 // ViewReady messages
	taken    atomic.Uint64 // views taken
	messages atomic.Uint64
}

func (c *benchConn) SendUserMessage(_ *actor.PID, m any) {
	c.messages.Add(1)
	switch m := m.(type) {
	case *msg.Control:
		c.controls.Add(1)
		if m.View {
			c.nudged.Add(1)
			c.take()
		}
		m.Release()
	case *msg.ViewReady:
		c.readies.Add(1)
		c.take()
	case *msg.Output:
		m.Release()
	}
}
func (c *benchConn) take() {
	if v := c.views.Take(); v != nil {
		c.taken.Add(1)
		v.Release()
	}
}

// benchQueue is a connection shard as the zone sees it (msg.ControlQueue):
// it hands each Control to its benchConn where it is posted.
type benchQueue struct{}

func (*benchQueue) PostControls(cs []msg.PortControl) {
	for _, pc := range cs {
		pc.Conn.(*benchConn).SendUserMessage(nil, pc.Control)
	}
}

// benchQueues are the benchmarks' two shards (a node's GOMAXPROCS here).
var benchQueues = [2]*msg.ControlQueue{{Taker: &benchQueue{}}, {Taker: &benchQueue{}}}

func (c *benchConn) SendSystemMessage(*actor.PID, any) {}
func (c *benchConn) Stop(*actor.PID)                   {}

// BenchmarkZoneActor (informative): a zone actor with 250 players (a
// quarter of cmd/capacity's 1,000, in one zone of the default world) and
// 50 NPCs, inputs at 30 Hz, views as references, connections that take
// what they are sent. One iteration is one 50 ms tick period;
// cpu-µs/period is the whole process's CPU time per period (the zone actor, its inputs'
// sends, the connections' takes, the runtime, and the world's three other
// zones with their NPCs): what the zones cost a node per tick period.
func BenchmarkZoneActor(b *testing.B) {
	const players = 250
	sys := quietSystem()
	defer sys.Shutdown()
	classes := ghostClasses(b)
	m := new(Metrics)
	clk := newClock()
	zw, err := Start(sys, world.Default(), sim.Config{NPCs: 200, Classes: classes}, Params{Now: clk.Now, Metrics: m})
	if err != nil {
		b.Fatal(err)
	}
	defer zw.Stop()
	zpid := zw.PID("x0z0")
	conns := make([]*benchConn, players)
	for i := range conns {
		c := &benchConn{}
		c.views.AcceptRefs()
		pid, _ := sys.ProcessRegistry.Add(c, "bconn$"+strconv.Itoa(i))
		conns[i] = c
		sys.Root.Send(zpid, &msg.Join{Player: uint64(i + 1), Conn: pid, Ghosts: pid, Views: &c.views, ViewWithControl: true})
	}
	waitFor(b, 5*time.Second, "joins", func() bool { return m.Joins.Load() == players })
	seq := uint64(0)
	input := func() { // one move a player, walking in circles
		seq++
		for i := range players {
			in := msg.NewInput()
			in.Player = uint64(i + 1)
			in.Moves = append(in.Moves[:0], move.Move{Seq: seq, Dt: 32, Forward: 127, Yaw: uint16(seq * 500)})
			sys.Root.Send(zpid, in)
		}
	}
	// 30 Hz inputs over 20 Hz ticks: three inputs every two periods.
	run := func(periods int) {
		for k := range periods {
			input()
			if k%2 == 1 {
				time.Sleep(17 * time.Millisecond)
				input()
				time.Sleep(33 * time.Millisecond)
			} else {
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
	run(20) // interest sets, queues, pools at their steady size
	ticks0 := m.Ticks.Load()
	b.ResetTimer()
	cpu0 := processCPU()
	run(b.N)
	cpu := processCPU() - cpu0
	b.StopTimer()
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/period")
	b.ReportMetric(float64(m.Ticks.Load()-ticks0)/float64(b.N), "ticks/period")
}

// processCPU is the CPU time (user and system) this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// ghostClasses registers the player and NPC ghost classes in a fresh
// registry and returns them by entity kind, as sim.Config.Classes wants.
func ghostClasses(tb testing.TB) [8]*ghost.Class {
	tb.Helper()
	reg, err := ghost.NewRegistry(ghost.DefaultBounds())
	if err != nil {
		tb.Fatal(err)
	}
	pc, nc := ghost.PlayerClass(nil), ghost.NPCClass(nil)
	if err := reg.Register(pc, nc); err != nil {
		tb.Fatal(err)
	}
	var classes [8]*ghost.Class
	classes[sim.KindPlayer], classes[sim.KindNPC] = pc, nc
	return classes
}
