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
	p := Params{Now: func() time.Duration { return now }, Metrics: new(Metrics),
		Sim: sim.Config{Zone: "x0z0", World: world.Default()}}
	z, err := sim.New(p.Sim, 0)
	if err != nil {
		t.Fatal(err)
	}
	a := &zoneActor{p: p, m: p.Metrics}
	a.init(z)
	a.log = slog.New(slog.DiscardHandler)
	a.ctx = syncCtx{sys: sys}
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
	if got := a.m.Inputs.Load(); got != 6 {
		t.Fatalf("%d inputs taken, want 6", got)
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
