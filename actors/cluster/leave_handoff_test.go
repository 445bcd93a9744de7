package cluster

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/actors/zone"
	"github.com/ghostwire/ghostwire/replication/handshake"
)

// The client quits while its zone hands the player across nodes: the
// Leave reaches x1z0 (n2) right behind the Teleport that started the
// handoff, is kept while the handoff is in flight, and must be passed on
// to the new owner once it settles (actors/zone), which must take the
// player out, wherever it is.
func TestLeaveDuringAHandoffAcrossNodesEndsThePlayer(t *testing.T) {
	nodes := lineNodes(t)
	gw := nodes[0]
	old := actor.NewPID(gw.sys.Address(), zone.ActorName("x1z0"))
	for i, tc := range passOnTargets {
		t.Run(tc.name, func(t *testing.T) {
			player := uint64(500 + i)
			c := newLoginConn(gw.sys, old)
			gw.sys.Root.Send(old, c.join(gw.sys, player))
			c.play(t, gw.sys, player, 1, 3, "join on n2")
			// One batch, in order: the handoff starts, then the Leave.
			gw.sys.Root.Send(old, &zone.Teleport{Entity: player, Pos: tc.into})
			gw.sys.Root.Send(old, &msg.Leave{Player: player, Conn: c.pid, Reason: handshake.ReasonClientQuit})
			c.views.Close()
			waitFor(t, 5*time.Second, "x1z0 to hand the player away", func() bool {
				_, owned := entityIn(t, nodes[1], player)
				return !owned
			})
			waitFor(t, 5*time.Second, "the player to leave "+tc.zone, func() bool {
				_, owned := entityIn(t, nodes[tc.node], player)
				return !owned
			})
		})
	}
}
