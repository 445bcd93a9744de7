package zone

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/ghostwire/ghostwire/actors/msg"
)

// benchJoin is the Join of a benchmark connection that takes its views
// with its Controls (as actors/conn's do).
func benchJoin(id uint64, pid *actor.PID, views *msg.ViewSlot) *msg.Join {
	return &msg.Join{Player: id, Conn: pid, Ghosts: pid, Views: views, ViewWithControl: true}
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
