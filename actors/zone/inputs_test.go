package zone

import (
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/replication/event"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/zones/sim"
	"github.com/ghostwire/ghostwire/zones/world"
)

// TestInputsBatchTakenAsEach: a connection shard's round of inputs
// (msg.Inputs) is taken as its inputs would be one by one: every move
// applied in order, every event handled (echoes back to their players, in
// order), each Input released.
func TestInputsBatchTakenAsEach(t *testing.T) {
	sys := quietSystem()
	defer sys.Shutdown()
	var now time.Duration
	a, z := syncZoneActor(t, sys, &now)
	conns := make([]*benchConn, 2)
	outs := make([]*outRec, 2)
	for i := range conns {
		conns[i], outs[i] = &benchConn{}, &outRec{}
		pid, _ := sys.ProcessRegistry.Add(outs[i], "iconn$"+strconv.Itoa(i))
		a.onJoin(&msg.Join{Player: uint64(i + 1), Conn: pid, Views: &conns[i].views})
	}
	b := msg.NewInputs()
	for seq := uint64(1); seq <= 3; seq++ {
		for id := uint64(1); id <= 2; id++ {
			in := msg.NewInput()
			in.Player = id
			in.Moves = append(in.Moves, move.Move{Seq: seq, Dt: 32, Forward: 127})
			in.Add(event.Ordered, EchoLane, 0, []byte{byte(id), byte(seq)})
			b.List = append(b.List, in)
		}
	}
	now = 10 * time.Millisecond
	a.onInputs(b)
	if got, ev := a.m.Inputs.Load(), a.m.Events.Load(); got != 6 || ev != 6 {
		t.Fatalf("%d inputs taken, %d events counted, want 6 and 6", got, ev)
	}
	for i, o := range outs {
		var echoes [][]byte
		for _, m := range o.got {
			for _, e := range m.Events {
				echoes = append(echoes, e.Payload)
			}
		}
		if len(echoes) != 3 {
			t.Fatalf("player %d: %d echoes, want 3", i+1, len(echoes))
		}
		for k, e := range echoes {
			if e[0] != byte(i+1) || e[1] != byte(k+1) {
				t.Fatalf("player %d: echo %d is %v", i+1, k, e)
			}
		}
	}
	now = z.Period()
	a.nextAt = now
	a.stopped.Store(true)
	a.onTick()
	for id := uint64(1); id <= 2; id++ {
		if e, ok := z.Entity(id); !ok || e.LastApplied != 3 {
			t.Fatalf("player %d: moves applied up to %d, want 3", id, e.LastApplied)
		}
	}
}

// outRec is a connection that keeps the events of the Outputs it is sent
// (copies) and releases what it is sent.
type outRec struct{ got []msg.Output }

func (o *outRec) SendUserMessage(_ *actor.PID, m any) {
	switch m := m.(type) {
	case *msg.Output:
		var c msg.Output
		for _, e := range m.Events {
			c.Add(e.Class, e.Lane, e.Key, append([]byte(nil), e.Payload...))
		}
		o.got = append(o.got, c)
		m.Release()
	case *msg.Control:
		m.Release()
	}
}
func (o *outRec) SendSystemMessage(*actor.PID, any) {}
func (o *outRec) Stop(*actor.PID)                   {}

// TestControlCarriesTheEventFence: each player's Control carries its own
// ordered-event fence (the zone finds it by the Control's slot), and a
// player with a connection but no view still gets its Control.
func TestControlCarriesTheEventFence(t *testing.T) {
	sys := quietSystem()
	defer sys.Shutdown()
	var now time.Duration
	a, z := syncZoneActor(t, sys, &now)
	recs := make([]*ctlRec, 3)
	for i := range recs {
		recs[i] = &ctlRec{}
		pid, _ := sys.ProcessRegistry.Add(recs[i], "fconn$"+strconv.Itoa(i))
		j := &msg.Join{Player: uint64(i + 1), Conn: pid, ViewWithControl: true}
		if i != 1 { // player 2 has no view slot: no view, a Control still
			j.Views = &msg.ViewSlot{}
		}
		a.onJoin(j)
	}
	const gen = 0xfeed
	for id, seq := range map[uint64]uint64{1: 7, 2: 4, 3: 9} {
		if !z.TakeEvent(id, gen, 1, seq) {
			t.Fatalf("player %d: event %d not new", id, seq)
		}
	}
	now = z.Period()
	a.nextAt = now
	a.stopped.Store(true)
	a.onTick()
	for i, r := range recs {
		want := map[int]uint64{0: 7, 1: 4, 2: 9}[i]
		if len(r.got) != 1 || r.got[0].Player != uint64(i+1) || r.got[0].Events.Gen != gen || r.got[0].Events.Last[1] != want {
			t.Fatalf("player %d: controls %+v, want one with lane 1's fence at %d", i+1, r.got, want)
		}
	}
}

// ctlRec is a connection that keeps copies of the Controls it is sent.
type ctlRec struct{ got []msg.Control }

func (c *ctlRec) SendUserMessage(_ *actor.PID, m any) {
	if m, ok := m.(*msg.Control); ok {
		c.got = append(c.got, *m)
		m.Release()
	}
}
func (c *ctlRec) SendSystemMessage(*actor.PID, any) {}
func (c *ctlRec) Stop(*actor.PID)                   {}

// syncZoneActor is a zone actor on zone x0z0 of the default world whose
// sends go straight to sys's processes (syncCtx), its clock *now.
func syncZoneActor(t *testing.T, sys *actor.ActorSystem, now *time.Duration) (*zoneActor, *sim.Zone) {
	t.Helper()
	p := Params{Now: func() time.Duration { return *now }, Metrics: new(Metrics),
		Sim: sim.Config{Zone: "x0z0", World: world.Default()}}
	z, err := sim.New(p.Sim, 0)
	if err != nil {
		t.Fatal(err)
	}
	a := &zoneActor{p: p, m: p.Metrics}
	a.init(z)
	a.log = slog.New(slog.DiscardHandler)
	a.ctx = syncCtx{sys: sys}
	return a, z
}
