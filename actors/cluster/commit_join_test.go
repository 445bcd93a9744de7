package cluster

import (
	"fmt"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ghostwire/ghostwire/actors/zone"
	"github.com/ghostwire/ghostwire/zones/handoff"
	"github.com/ghostwire/ghostwire/zones/sim"
)

// A player's zone on n2 hands it to another node's zone, and the new
// owner's node is slow to write the Commit's player record; meanwhile the
// player logs in again (a relaunch, a second device), its record lookup
// still naming x1z0. The old zone, committing, passes the newer login's
// Join on to the new owner at once (actors/zone joinAway), so the Join
// reaches the new owner's node behind the Commit, and must reach its
// zone behind it too: held with the Commit's write, as a Leave is, the
// zone takes the player, then takes it over for the newer login. Sent on
// ahead, the zone, not owning the player yet, spawned it afresh for the
// Join and then refused the Commit.
func TestJoinBehindASlowCommitRecordWriteTakesThePlayerOver(t *testing.T) {
	for i, tc := range passOnTargets {
		t.Run(tc.name, func(t *testing.T) {
			player := uint64(750 + i)
			s := lineNodesSlowCommit(t, tc.node, player)
			nodes, gw := s.nodes, s.nodes[0]
			old := actor.NewPID(gw.sys.Address(), zone.ActorName("x1z0"))
			older := newLoginConn(gw.sys, old)
			s.commitHeld(t, older, player, tc.into)
			// The Commit waits for its write; the player logs in again.
			var refused [3]uint64
			for n, node := range nodes {
				refused[n] = node.m.JoinsRejected.Load()
			}
			forwarded, in := nodes[1].m.Forwarded.Load(), nodes[tc.node].m.HandoffsIn.Load()
			newer := newLoginConn(gw.sys, old)
			gw.sys.Root.Send(old, newer.join(gw.sys, player))
			waitPassedOn(t, nodes, player, forwarded)
			s.open(t, player, tc.zone)
			newer.routedTo(t, tc.zone, "the newer login")
			waitPlayedThrough(t, nodes, tc.node, player, connAt(nodes, tc.node, 0, newer.pid),
				tc.zone+" to play the player through the newer login on n1")
			newer.play(t, gw.sys, player, 1, 3, "the newer login in "+tc.zone)
			var owners []string
			for n, node := range nodes {
				if _, owned := entityIn(t, node, player); owned {
					owners = append(owners, fmt.Sprintf("n%d", n+1))
				}
				if d := node.m.JoinsRejected.Load() - refused[n]; d != 0 {
					t.Errorf("n%d refused %d Joins of the player", n+1, d)
				}
			}
			if want := fmt.Sprintf("n%d", tc.node+1); len(owners) != 1 || owners[0] != want {
				t.Errorf("the player is owned on %q, want on %s only", owners, want)
			}
			if n := nodes[tc.node].m.HandoffsIn.Load() - in; n != 1 {
				t.Errorf("%s took %d players by a Commit, want 1 (this one, not spawned afresh)", tc.zone, n)
			}
			var phase handoff.Phase
			_ = nodes[1].zones.Inspect(2*time.Second, func(z *sim.Zone) { phase, _, _ = z.Handoffs().Status(player) })
			if phase != handoff.PhaseForwarding {
				t.Errorf("x1z0's handoff of the player is %v, want %v (its Commit acknowledged)", phase, handoff.PhaseForwarding)
			}
			s.heldBehind(t, 1, "the newer login's Join")
		})
	}
}
