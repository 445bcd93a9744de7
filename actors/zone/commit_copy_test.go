package zone

import (
	"testing"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/zones/handoff"
	"github.com/ghostwire/ghostwire/zones/sim"
)

// A player handed from x0z0 to x1z0 is taken over there by a newer login;
// then a late copy of the handoff's Commit reaches x1z0 (resent before
// the CommitAck reached x0z0; across processes the new owner's node
// delivers every copy once the record is written, and rebuilds each
// copy's Join from what the old zone kept: the older connection). The
// copy must not take the player's connection back to the older login:
// x1z0 owns the player, the copy is a duplicate. Before, its Join
// replaced the newer login's, whose Controls then went to the older
// connection (across nodes: TestJoinBehindAFailedCommitWriteIsNotSpawned,
// back to the gateway's node, under -race at load).
func TestLateCommitCopyKeepsTheNewerLogin(t *testing.T) {
	defer verifyNoLeaks(t)()
	f := startFixture(t, pairWorld(t), slowOffers, nil, at)
	defer f.stop()
	f.handedToX1z0()
	d, pid := f.newerLogin(1, "x1z0")
	f.waitOwnedThrough(1, "x1z0", pid)
	var ep handoff.Epoch
	f.inspectZone("x1z0", func(z *sim.Zone) { _, ep, _ = z.Handoffs().Status(1) })
	older := &msg.Join{Player: 1, Conn: f.dpid, Ghosts: f.dpid, Views: new(msg.ViewSlot)}
	f.sys.Root.Send(f.world.PID("x1z0"), &HandoffEnvelope{Join: older,
		Msg: handoff.Msg{Kind: handoff.KindCommit, From: "x0z0", To: "x1z0", Entity: 1, Epoch: ep - 1, Sent: f.clk.Now()}})
	f.syncZone("x1z0")
	f.newerPlays(d, pid, 1)
	f.waitOwnedThrough(1, "x1z0", pid)
}
