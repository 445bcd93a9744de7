package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/ghostwire/ghostwire/actors/zone"
	pb "github.com/ghostwire/ghostwire/proto/ghostwire/v1"
)

// putRecord writes player's record by hand: online in zoneID at epoch,
// owned by node.
func (s *slowCommit) putRecord(t *testing.T, player uint64, zoneID, node string, epoch uint64) {
	t.Helper()
	val, _ := proto.Marshal(&pb.PlayerRecord{Player: player, Zone: zoneID, Node: node, Epoch: epoch,
		State: pb.PlayerState_PLAYER_STATE_ONLINE, UpdatedUnixMs: time.Now().UnixMilli()})
	if _, err := s.kv.Put(context.Background(), PlayerKey(player), val); err != nil {
		t.Fatal(err)
	}
}

// refuse opens the gate once want items wait behind the Commit, and waits
// until the Commit's record write is refused.
func (s *slowCommit) refuse(t *testing.T, want uint64) {
	t.Helper()
	m := s.nodes[s.at].bridge.Metrics()
	waitFor(t, 5*time.Second, fmt.Sprintf("%d items held behind the Commit", want), func() bool { return m.HeldBehindCommit.Load() >= want })
	close(s.gate.open)
	waitFor(t, 5*time.Second, "the Commit's record write to be refused", func() bool { return m.RecordRefused.Load() > 0 })
}

// owners names the nodes whose zone owns player.
func owners(t *testing.T, nodes [3]*benchNode, player uint64) []string {
	t.Helper()
	var on []string
	for n, node := range nodes {
		if _, owned := entityIn(t, node, player); owned {
			on = append(on, fmt.Sprintf("n%d", n+1))
		}
	}
	return on
}

// joinsRejected reads each node's count of Joins refused, for
// noJoinsRejectedSince.
func joinsRejected(nodes [3]*benchNode) (n [3]uint64) {
	for i, node := range nodes {
		n[i] = node.m.JoinsRejected.Load()
	}
	return n
}

// noJoinsRejectedSince fails t for every node that refused a Join since
// joinsRejected read before.
func noJoinsRejectedSince(t *testing.T, nodes [3]*benchNode, before [3]uint64) {
	t.Helper()
	for n, node := range nodes {
		if d := node.m.JoinsRejected.Load() - before[n]; d != 0 {
			t.Errorf("n%d refused %d Joins of the player", n+1, d)
		}
	}
}

// A player's zone on n2 hands it to another node's zone, whose node is
// slow to write the Commit's player record; meanwhile the record moves on
// (here: the player put back in a third zone, R, its record naming R at a
// newer epoch — a restore after the old owner's node looked lost, a real
// conflict), and the player logs in again through its old zone, which
// passes the newer login's Join on behind the Commit. The record refuses
// the Commit's write for good: the new owner never takes the player. The
// Join held behind it must follow the player to the zone its record names
// (the connection redirected there, as its own record lookup would), never
// to the zone that does not own it. Before, it went on to that zone,
// which spawned the player afresh beside R's: two owners.
func TestJoinBehindARefusedCommitFollowsTheRecord(t *testing.T) {
	ids := [3]string{"x0z0", "x1z0", "x2z0"}
	for i, tc := range passOnTargets {
		t.Run(tc.name, func(t *testing.T) {
			player := uint64(850 + i)
			s := lineNodesSlowCommit(t, tc.node, player)
			nodes, gw := s.nodes, s.nodes[0]
			r := 2 - tc.node // the zone that is neither the old owner nor the target
			old := actor.NewPID(gw.sys.Address(), zone.ActorName("x1z0"))
			older := newLoginConn(gw.sys, old)
			s.commitHeld(t, older, player, tc.into)
			// The player is put back in R meanwhile, its record naming R.
			other := newLoginConn(gw.sys, actor.NewPID(gw.sys.Address(), zone.ActorName(ids[r])))
			gw.sys.Root.Send(other.route, other.join(gw.sys, player))
			other.play(t, gw.sys, player, 1, 2, "the player put back in "+ids[r])
			s.putRecord(t, player, ids[r], fmt.Sprintf("n%d", r+1), 1000)
			refused := joinsRejected(nodes)
			forwarded, in := nodes[1].m.Forwarded.Load(), nodes[tc.node].m.HandoffsIn.Load()
			// The player logs in again, through x1z0 (its lookup was older).
			newer := newLoginConn(gw.sys, old)
			gw.sys.Root.Send(old, newer.join(gw.sys, player))
			waitPassedOn(t, nodes, player, forwarded)
			s.refuse(t, 1)
			// Until the Join lands somewhere: the newer login redirected to
			// R, or the player owned twice.
			want := fmt.Sprintf("n%d", r+1)
			waitFor(t, 5*time.Second, "the newer login's Join to land", func() bool {
				_, _, route := newer.state()
				return route.Id == zone.ActorName(ids[r]) || len(owners(t, nodes, player)) != 1
			})
			if on := owners(t, nodes, player); len(on) != 1 || on[0] != want {
				t.Fatalf("the player is owned on %q, want on %s only (the zone its record names)", on, want)
			}
			newer.routedTo(t, ids[r], "the newer login")
			newer.play(t, gw.sys, player, 1, 3, "the newer login in "+ids[r])
			if on := owners(t, nodes, player); len(on) != 1 || on[0] != want {
				t.Errorf("the player is owned on %q, want on %s only (the zone its record names)", on, want)
			}
			noJoinsRejectedSince(t, nodes, refused)
			if n := nodes[tc.node].m.HandoffsIn.Load() - in; n != 0 {
				t.Errorf("%s took %d players by a Commit, want 0 (its record write was refused)", tc.zone, n)
			}
			// What x1z0 passes on later (it still forwards to tc.zone) follows
			// the record too: a Teleport, through the older login's route.
			next := passOnTargets[1-i].next // inside R
			gw.sys.Root.Send(old, &zone.Teleport{Entity: player, Pos: next})
			waitFor(t, 5*time.Second, "the Teleport passed on later to move the player in "+ids[r], func() bool {
				e, owned := entityIn(t, nodes[r], player)
				return owned && e.State.Pos[0] == next[0] && e.State.Pos[2] == next[2]
			})
			if on := owners(t, nodes, player); len(on) != 1 || on[0] != want {
				t.Errorf("after the Teleport the player is owned on %q, want on %s only", on, want)
			}
			if got := s.nodes[s.at].bridge.Metrics().FollowedRecord.Load(); got != 2 {
				t.Errorf("%d items followed the record, want 2 (the newer login's Join held behind the Commit, the Teleport after)", got)
			}
		})
	}
}

// As above, but the Commit's record write fails (a KV error on every try,
// the record left as it was: a NATS cluster electing the players bucket's
// leader): a later copy of the Commit may still be written, and is. What
// waited behind the failed write waits on for that copy and goes to the
// zone right behind it, never before the zone owns the player: the newer
// login's Join takes the player there, no Join of its own needed. Before,
// the Join went on to that zone, which spawned the player afresh, then took
// the written Commit's copy for a player it already had (the handed-off
// state lost); later, it was dropped, and the inputs waiting with it (their
// events lost: 5 of 4,487 by hand, one NATS server of three killed).
func TestJoinBehindAFailedCommitWriteIsNotSpawned(t *testing.T) {
	for i, tc := range passOnTargets {
		t.Run(tc.name, func(t *testing.T) {
			player := uint64(870 + i)
			s := lineNodesSlowCommit(t, tc.node, player)
			nodes, gw := s.nodes, s.nodes[0]
			old := actor.NewPID(gw.sys.Address(), zone.ActorName("x1z0"))
			older := newLoginConn(gw.sys, old)
			s.commitHeld(t, older, player, tc.into)
			forwarded, in := nodes[1].m.Forwarded.Load(), nodes[tc.node].m.HandoffsIn.Load()
			newer := newLoginConn(gw.sys, old)
			gw.sys.Root.Send(old, newer.join(gw.sys, player))
			waitPassedOn(t, nodes, player, forwarded)
			s.gate.fail.Store(commitTries) // every try of this copy's write
			s.refuse(t, 1)
			waitFor(t, 5*time.Second, "a later copy of the Commit written", func() bool { return s.record(player).GetZone() == tc.zone })
			waitFor(t, 5*time.Second, tc.zone+" to take the player by the Commit", func() bool {
				return nodes[tc.node].m.HandoffsIn.Load() > in
			})
			if on, want := owners(t, nodes, player), fmt.Sprintf("n%d", tc.node+1); len(on) != 1 || on[0] != want {
				t.Errorf("the player is owned on %q, want on %s only", on, want)
			}
			m := s.nodes[s.at].bridge.Metrics()
			if d, f := m.DroppedBehindCommit.Load(), m.FollowedRecord.Load(); d != 0 || f != 0 {
				t.Errorf("%d items dropped behind the failed write, %d followed the record; want 0, 0 (the newer login's Join waits for the written copy)", d, f)
			}
			// The newer login's Join went behind the written copy: it plays
			// where x1z0 redirected it, without joining again.
			newer.routedTo(t, tc.zone, "the newer login")
			newer.play(t, gw.sys, player, 1, 3, "the newer login in "+tc.zone)
			if on, want := owners(t, nodes, player), fmt.Sprintf("n%d", tc.node+1); len(on) != 1 || on[0] != want {
				t.Errorf("after the newer login joined again the player is owned on %q, want on %s only", on, want)
			}
		})
	}
}
