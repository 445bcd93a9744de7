package zone

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/replication/event"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/zones/sim"
	"github.com/ghostwire/ghostwire/zones/world"
)

// trayZone starts one zone (x0z0) with a joined-later player's connection
// stand-in, and returns its PID, tray and connection.
func trayZone(t *testing.T, sys *actor.ActorSystem, m *Metrics, cfg sim.Config, hook func(*sim.Zone)) (*actor.PID, msg.Tray, *actor.PID, func()) {
	t.Helper()
	cfg.Classes = ghostClasses(t)
	zw, err := StartZones(sys, world.Default(), cfg, Params{Now: newClock().Now, Metrics: m, afterStep: hook}, []string{"x0z0"})
	if err != nil {
		t.Fatal(err)
	}
	pid := zw.PID("x0z0")
	var tr msg.Tray
	waitFor(t, 5*time.Second, "the zone's tray", func() bool { tr = msg.TrayOf(sys, pid); return tr != nil })
	c := &benchConn{}
	cpid, _ := sys.ProcessRegistry.Add(c, "trayconn")
	return pid, tr, cpid, zw.Stop
}

func trayInput(player, seq uint64) *msg.Input {
	in := msg.NewInput()
	in.Player = player
	in.Moves = append(in.Moves, move.Move{Seq: seq, Dt: 1, Forward: 1})
	return in
}

// holdZone keeps the zone's goroutine in an Inspect (it overtakes the
// inputs) until the returned func is called.
func holdZone(sys *actor.ActorSystem, pid *actor.PID) func() {
	in, out := make(chan struct{}), make(chan struct{})
	sys.Root.Send(pid, &Inspect{Fn: func(*sim.Zone) { close(in); <-out }})
	<-in
	return func() { close(out) }
}

// TestTrayGateKeepsEarlierMessagesFirst: a shard's Join sent through the
// mailbox before it found the tray is handled before the inputs it then
// puts in the tray, even when a tick (which overtakes the mailbox's
// Join) comes between: fails if the tick takes the inputs first (they are
// for a player the zone does not know yet: InputsDropped).
func TestTrayGateKeepsEarlierMessagesFirst(t *testing.T) {
	defer verifyNoLeaks(t)()
	sys := quietSystem()
	defer sys.Shutdown()
	m := new(Metrics)
	pid, tr, cpid, stop := trayZone(t, sys, m, sim.Config{}, nil)
	defer stop()
	var views msg.ViewSlot
	release := holdZone(sys, pid)
	sys.Root.Send(pid, benchJoin(1, cpid, &views)) // before the shard found the tray
	shard := new(int)
	if !tr.Put(shard, []any{trayInput(1, 1), trayInput(1, 2), trayInput(1, 3)}, false) {
		t.Fatal("an open tray refused a put")
	}
	sys.Root.Send(pid, theTick) // ahead of the Join (zonePriority)
	release()
	waitFor(t, 5*time.Second, "the join and the inputs", func() bool { return m.Joins.Load() == 1 && m.Inputs.Load() == 3 })
	if d := m.InputsDropped.Load(); d != 0 {
		t.Fatalf("%d inputs dropped: taken before the Join sent ahead of them", d)
	}
}

// TestTrayTakenBeforeOtherMessages: inputs put in the tray without a
// nudge are taken before any message the zone handles after (here an
// Inspect sent after them, as the tests' World.Inspect barrier), and a
// Leave put after inputs never overtakes them. Ticks at 1 Hz: the zone's
// first comes a second after its start, so none takes the tray first.
func TestTrayTakenBeforeOtherMessages(t *testing.T) {
	defer verifyNoLeaks(t)()
	sys := quietSystem()
	defer sys.Shutdown()
	m := new(Metrics)
	pid, tr, cpid, stop := trayZone(t, sys, m, sim.Config{TickRate: 1, MaxCredit: 2 * time.Second}, nil)
	defer stop()
	var views msg.ViewSlot
	shard := new(int)
	tr.Put(shard, []any{benchJoin(1, cpid, &views)}, true)
	waitFor(t, 5*time.Second, "the join", func() bool { return m.Joins.Load() == 1 })

	release := holdZone(sys, pid)
	tr.Put(shard, []any{trayInput(1, 1), trayInput(1, 2)}, false)
	var seen, tick atomic.Uint64
	f := sys.Root.RequestFuture(pid, &Inspect{Fn: func(z *sim.Zone) { seen.Store(m.Inputs.Load()); tick.Store(z.Tick()) }}, 5*time.Second)
	release()
	if _, err := f.Result(); err != nil {
		t.Fatal(err)
	}
	if tick.Load() != 0 {
		t.Fatalf("the zone ticked (tick %d) before the Inspect: the test proves nothing", tick.Load())
	}
	if seen.Load() != 2 {
		t.Fatalf("the Inspect saw %d inputs taken, want the 2 put before it", seen.Load())
	}

	release = holdZone(sys, pid)
	tr.Put(shard, []any{trayInput(1, 3), trayInput(1, 4)}, false)
	tr.Put(shard, []any{trayInput(1, 5), &msg.Leave{Player: 1, Conn: cpid}}, true)
	release()
	waitFor(t, 5*time.Second, "the leave", func() bool { return m.Leaves.Load() == 1 })
	if in, d := m.Inputs.Load(), m.InputsDropped.Load(); in != 5 || d != 0 {
		t.Fatalf("inputs %d (dropped %d) when the Leave was handled, want 5 (0): it overtook them", in, d)
	}
}

// TestTrayInputInTheNextTick: an input put in the tray during tick k (a
// shard's round while the zone ticks) is taken by tick k+1, without a
// message of its own; fails if the tick does not take the tray.
func TestTrayInputInTheNextTick(t *testing.T) {
	defer verifyNoLeaks(t)()
	sys := quietSystem()
	defer sys.Shutdown()
	m := new(Metrics)
	var (
		tr     atomic.Pointer[msg.Tray]
		putAt  atomic.Uint64 // the tick during which the input was put
		taken  atomic.Uint64 // the inputs taken by the tick after
		nudged atomic.Bool
		shard  = new(int)
		armed  atomic.Bool
	)
	hook := func(z *sim.Zone) {
		switch k := z.Tick(); {
		case armed.Load() && putAt.Load() == 0:
			(*tr.Load()).Put(shard, []any{trayInput(1, 1)}, false)
			nudged.Store((*tr.Load()).(*tray).nudged)
			putAt.Store(k)
		case putAt.Load() != 0 && k == putAt.Load()+1:
			taken.Store(m.Inputs.Load() + 1) // +1: zero means not yet
		}
	}
	pid, trv, cpid, stop := trayZone(t, sys, m, sim.Config{}, hook)
	defer stop()
	_ = pid
	tr.Store(&trv)
	var views msg.ViewSlot
	trv.Put(shard, []any{benchJoin(1, cpid, &views)}, true)
	waitFor(t, 5*time.Second, "the join", func() bool { return m.Joins.Load() == 1 })
	armed.Store(true)
	waitFor(t, 5*time.Second, "the tick after the put", func() bool { return taken.Load() != 0 })
	if nudged.Load() {
		t.Error("an input without events nudged the zone")
	}
	if got := taken.Load() - 1; got != 1 {
		t.Fatalf("tick %d had taken %d inputs, want the 1 put during tick %d", putAt.Load()+1, got, putAt.Load())
	}
}

// TestTrayBound: the tray takes no more inputs than the mailbox would
// (inputGauge), drops the newest without events and counts them; an
// input with events is never dropped.
func TestTrayBound(t *testing.T) {
	defer verifyNoLeaks(t)()
	sys := quietSystem()
	defer sys.Shutdown()
	m := new(Metrics)
	pid, tr, cpid, stop := trayZone(t, sys, m, sim.Config{}, nil)
	defer stop()
	var views msg.ViewSlot
	shard := new(int)
	tr.Put(shard, []any{benchJoin(1, cpid, &views)}, true)
	waitFor(t, 5*time.Second, "the join", func() bool { return m.Joins.Load() == 1 })
	release := holdZone(sys, pid)
	max := int(tr.(*tray).g.max.Load())
	l := make([]any, 0, max+10)
	for i := range max + 10 {
		l = append(l, trayInput(1, uint64(i+1)))
	}
	tr.Put(shard, l, false)
	ev := trayInput(1, uint64(max+11))
	ev.Events = append(ev.Events, msg.Event{Class: event.Unordered, Payload: []byte("x")})
	tr.Put(shard, []any{ev}, true)
	if s, mv := m.InputsShed.Load(), m.MovesShed.Load(); s != 10 || mv != 10 {
		t.Fatalf("shed %d inputs (%d moves), want 10 (10)", s, mv)
	}
	release()
	waitFor(t, 5*time.Second, "the inputs kept", func() bool { return m.Inputs.Load() == uint64(max+1) })
	if q := tr.(*tray).g.queued.Load(); q != 0 {
		t.Fatalf("gauge %d after the tray was taken, want 0", q)
	}
}

// TestTrayPutTakeAllocatesNothing: a round's put and the tick's take
// reuse the tray's lists.
func TestTrayPutTakeAllocatesNothing(t *testing.T) {
	g := new(inputGauge)
	g.max.Store(1 << 20)
	tr := &tray{g: g, m: new(Metrics)}
	shard := new(int)
	tr.seen = append(tr.seen, shard) // its gate handled
	ins := make([]any, 16)
	for i := range ins {
		ins[i] = &msg.Input{}
	}
	round := func() {
		tr.Put(shard, ins, false)
		tr.Put(shard, ins, false)
		l := tr.take()
		g.queued.Add(-int64(len(l)))
		tr.done(l)
	}
	round()
	round()
	if n := testing.AllocsPerRun(100, round); n != 0 {
		t.Fatalf("%v allocations a round, want 0", n)
	}
}

// TestTrayGateOfARestartedZonesOldTray: a gate the zone's tray sent
// before the zone restarted (a panic) opens nothing in the new tray: a
// shard's Join sent through the mailbox before its first put in the new
// tray still comes before those inputs when a tick comes between.
func TestTrayGateOfARestartedZonesOldTray(t *testing.T) {
	defer verifyNoLeaks(t)()
	sys := quietSystem()
	defer sys.Shutdown()
	m := new(Metrics)
	pid, tr1, cpid, stop := trayZone(t, sys, m, sim.Config{}, nil)
	defer stop()
	shard := new(int)
	release := holdZone(sys, pid)
	tr1.Put(shard, []any{trayInput(1, 1)}, false) // its gate waits behind the panic
	sys.Root.Send(pid, &Inspect{Fn: func(*sim.Zone) { panic("restart the zone") }})
	release()
	var tr2 msg.Tray
	waitFor(t, 5*time.Second, "the restarted zone's tray", func() bool {
		tr2 = msg.TrayOf(sys, pid)
		return tr2 != nil && tr2 != tr1
	})
	dropped := m.InputsDropped.Load() // the old tray's input, if the new zone got it: none expected

	var views msg.ViewSlot
	release = holdZone(sys, pid)
	sys.Root.Send(pid, benchJoin(1, cpid, &views))
	tr2.Put(shard, []any{trayInput(1, 2), trayInput(1, 3)}, false)
	sys.Root.Send(pid, theTick)
	release()
	waitFor(t, 5*time.Second, "the join and the inputs", func() bool { return m.Joins.Load() == 1 && m.Inputs.Load() >= 2 })
	if d := m.InputsDropped.Load() - dropped; d != 0 {
		t.Fatalf("%d inputs dropped: taken before the Join sent ahead of them", d)
	}
}

// BenchmarkTrayPutTake: a shard round's put of 16 inputs and the zone's
// take of them (no message either way: the usual round).
func BenchmarkTrayPutTake(b *testing.B) {
	g := new(inputGauge)
	g.max.Store(1 << 20)
	tr := &tray{g: g, m: new(Metrics)}
	shard := new(int)
	tr.seen = append(tr.seen, shard)
	ins := make([]any, 16)
	for i := range ins {
		ins[i] = &msg.Input{}
	}
	b.ReportAllocs()
	for b.Loop() {
		tr.Put(shard, ins, false)
		l := tr.take()
		g.queued.Add(-int64(len(l)))
		tr.done(l)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(ins)), "ns/input")
}
