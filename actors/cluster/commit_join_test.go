package cluster

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	"github.com/ghostwire/ghostwire/actors/zone"
	pb "github.com/ghostwire/ghostwire/proto/ghostwire/v1"
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
			var refused [3]uint64
			var in uint64
			_, newer := s.newerLoginBehindCommit(t, player, tc.node, tc.zone, tc.into, func() {
				refused, in = joinsRejected(nodes), nodes[tc.node].m.HandoffsIn.Load()
			})
			newer.play(t, gw.sys, player, 1, 3, "the newer login in "+tc.zone)
			noJoinsRejectedSince(t, nodes, refused)
			if on, want := owners(t, nodes, player), fmt.Sprintf("n%d", tc.node+1); len(on) != 1 || on[0] != want {
				t.Errorf("the player is owned on %q, want on %s only", on, want)
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

// A copy of a Commit that reaches the new owner's zone after a newer
// login took the player over there (the old zone resends its Commit until
// the CommitAck reaches it; the new owner's node sends each copy on once
// the record is written) carries the Join the player was handed with,
// the older login's. The zone must keep playing the player through the
// newer: its Controls go to the newer connection, which sees its moves
// acknowledged. Before, each copy set the older's Join again, and the
// newer's moves were applied but never acknowledged (the newer's Controls
// went to the older connection; while the gateway's node delivered what
// came through a link to the newest connection, the older's Controls
// from the old zone reached the newer and hid it: this test's sibling
// failed 1 run in ≈ 30 once they no longer did).
func TestResentCommitAfterATakeoverKeepsTheNewerLogin(t *testing.T) {
	for i, tc := range passOnTargets {
		t.Run(tc.name, func(t *testing.T) {
			player := uint64(760 + i)
			s := lineNodesSlowCommit(t, tc.node, player)
			nodes, gw := s.nodes, s.nodes[0]
			// A copy of the Commit as it crossed to the new owner's node.
			nc, err := nats.Connect(gw.bridge.cfg.NC.ConnectedUrl())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(nc.Close)
			var mu sync.Mutex
			var commit *pb.ZoneItem
			sub, err := nc.Subscribe(zoneSubject("line", tc.zone), func(m *nats.Msg) {
				var zb pb.ZoneBatch
				if proto.Unmarshal(m.Data, &zb) != nil {
					return
				}
				mu.Lock()
				defer mu.Unlock()
				for _, it := range zb.GetItems() {
					if h := it.GetHandoff().GetMsg(); commit == nil && h.GetKind() == pb.HandoffKind_HANDOFF_KIND_COMMIT && h.GetEntity() == player {
						commit = it
					}
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := nc.Flush(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = sub.Unsubscribe() })
			older, newer := s.newerLoginBehindCommit(t, player, tc.node, tc.zone, tc.into, nil)
			mu.Lock()
			it := commit
			mu.Unlock()
			if it == nil {
				t.Fatal("no Commit of the player crossed to " + tc.zone)
			}
			n := nodes[tc.node]
			m, err := n.bridge.decodeItem(it, "n2")
			if err != nil {
				t.Fatal(err)
			}
			env := m.(*zone.HandoffEnvelope)
			if env.Join == nil || !env.Join.Conn.Equal(connAt(nodes, tc.node, 0, older.pid)) {
				t.Fatalf("the Commit's copy carries the Join of %v, want the older login's", env.Join)
			}
			// A copy comes once the player is taken over: ahead of the
			// newer's inputs (a handoff's priority).
			n.sys.Root.Send(actor.NewPID(n.sys.Address(), zone.ActorName(tc.zone)), env)
			newer.play(t, gw.sys, player, 1, 3, "the newer login in "+tc.zone+" after the Commit's copy")
		})
	}
}

// newerLoginBehindCommit joins player through x1z0 on the gateway's node
// (the older login), holds its handoff's Commit to zoneID on nodes[node]
// behind the Commit's record write, runs whileHeld (if any), and logs the
// player in again through x1z0: the newer login's Join is passed on behind
// the Commit. Then it lets the write through and waits until zoneID plays
// the player through the newer login.
func (s *slowCommit) newerLoginBehindCommit(t *testing.T, player uint64, node int, zoneID string, into [3]float32, whileHeld func()) (older, newer *loginConn) {
	t.Helper()
	nodes, gw := s.nodes, s.nodes[0]
	old := actor.NewPID(gw.sys.Address(), zone.ActorName("x1z0"))
	older = newLoginConn(gw.sys, old)
	s.commitHeld(t, older, player, into)
	if whileHeld != nil {
		whileHeld()
	}
	forwarded := nodes[1].m.Forwarded.Load()
	newer = newLoginConn(gw.sys, old)
	gw.sys.Root.Send(old, newer.join(gw.sys, player))
	waitPassedOn(t, nodes, player, forwarded)
	s.open(t, player, zoneID)
	newer.routedTo(t, zoneID, "the newer login")
	waitPlayedThrough(t, nodes, node, player, connAt(nodes, node, 0, newer.pid),
		zoneID+" to play the player through the newer login on n1")
	return older, newer
}
