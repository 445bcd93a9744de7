package zone

import (
	"strconv"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ghostwire/ghostwire/actors/msg"
)

// benchJoin is the Join of a benchmark connection that takes its views
// with its Controls (as actors/conn's do).
func benchJoin(id uint64, pid *actor.PID, views *msg.ViewSlot) *msg.Join {
	return &msg.Join{Player: id, Conn: pid, Ghosts: pid, Views: views, ViewWithControl: true}
}

// joinRefConns joins n benchmark connections taking their views by
// reference to a (players 1..n), their Controls alternating between the
// two bench queues; name prefixes their registry ids.
func joinRefConns(sys *actor.ActorSystem, a *zoneActor, n int, name string) []*benchConn {
	conns := make([]*benchConn, n)
	for i := range conns {
		c := &benchConn{}
		c.views.AcceptRefs()
		conns[i] = c
		pid, _ := sys.ProcessRegistry.Add(c, name+strconv.Itoa(i))
		j := benchJoin(uint64(i+1), pid, &c.views)
		j.Port = msg.ControlPort{Queue: benchQueues[i%2], Conn: c}
		a.onJoin(j)
	}
	return conns
}

// sendShardInputs sends ins as connection shards do: eight a round in one
// *msg.Inputs.
func sendShardInputs(sys *actor.ActorSystem, zone *actor.PID, ins []*msg.Input) {
	for len(ins) > 0 {
		n := min(8, len(ins))
		b := msg.NewInputs()
		b.List = append(b.List, ins[:n]...)
		sys.Root.Send(zone, b)
		ins = ins[n:]
	}
}
