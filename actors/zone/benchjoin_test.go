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
