package cluster

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/actors/zone"
	pb "github.com/ghostwire/ghostwire/proto/ghostwire/v1"
	"github.com/ghostwire/ghostwire/replication/handshake"
	"github.com/ghostwire/ghostwire/zones/sim"
)

// Where a passed-on Leave or Teleport lands: the zone the player was
// handed to from x1z0 (n2), and a point inside it.
var passOnTargets = []struct {
	name string
	node int    // index in lineNodes
	zone string // the zone the player is handed to
	into [3]float32
	next [3]float32 // a teleport within that zone
}{
	{name: "to a third node", node: 2, zone: "x2z0", into: [3]float32{1000, 0, 0}, next: [3]float32{1200, 0, 100}},
	{name: "back to the gateway's node", node: 0, zone: "x0z0", into: [3]float32{-1000, 0, 0}, next: [3]float32{-1200, 0, 100}},
}

// entityIn reads player's entity in n's zone (ok: owned there).
func entityIn(t *testing.T, n *benchNode, player uint64) (e sim.EntityInfo, owned bool) {
	t.Helper()
	if err := n.zones.Inspect(2*time.Second, func(z *sim.Zone) {
		if x, ok := z.Entity(player); ok && x.Owned {
			e, owned = x, true
		}
	}); err != nil {
		t.Fatal(err)
	}
	return e, owned
}

// handedOn joins player through gateway n1 to x1z0 (n2) on connection c,
// teleports it into the target's zone and waits until the zone there owns
// it. c's route stays x1z0: its client has not seen the Redirect yet.
func handedOn(t *testing.T, nodes [3]*benchNode, c *loginConn, player uint64, into [3]float32, to int) {
	t.Helper()
	gw := nodes[0]
	gw.sys.Root.Send(c.route, c.join(gw.sys, player))
	c.play(t, gw.sys, player, 1, 3, "join on n2")
	gw.sys.Root.Send(c.route, &zone.Teleport{Entity: player, Pos: into})
	waitFor(t, 5*time.Second, "the handoff from x1z0", func() bool {
		_, owned := entityIn(t, nodes[to], player)
		return owned
	})
}

// A player's zone on n2 hands it to a zone on another node just as its
// client, on gateway n1, quits: the connection's Leave reaches x1z0, which
// passes it on to the new owner (zone metrics: Forwarded). The new owner
// must take the player out, whether it is on a third node or on the
// gateway's own. Before, a passed-on Leave crossed naming the passing
// node's link ("link-n1" as a connection of n2): the new owner read it as
// another connection's Leave and kept the player for good — a ghost with
// nobody behind it, its record online, nothing timing it out (no zone
// timer ends a player whose connection is gone; only its handoff record
// expires, after ForwardTTL, on the old zone).
func TestLeavePassedOnAcrossNodesEndsThePlayer(t *testing.T) {
	nodes := lineNodes(t)
	gw := nodes[0]
	old := actor.NewPID(gw.sys.Address(), zone.ActorName("x1z0"))
	for i, tc := range passOnTargets {
		t.Run(tc.name, func(t *testing.T) {
			player := uint64(300 + i)
			c := newLoginConn(gw.sys, old)
			handedOn(t, nodes, c, player, tc.into, tc.node)
			forwarded := nodes[1].m.Forwarded.Load()
			gw.sys.Root.Send(old, &msg.Leave{Player: player, Conn: c.pid, Reason: handshake.ReasonClientQuit})
			c.views.Close()
			waitFor(t, 5*time.Second, "x1z0 to pass the Leave on", func() bool { return nodes[1].m.Forwarded.Load() > forwarded })
			waitLeft(t, nodes[tc.node], player, "the player to leave "+tc.zone)
		})
	}
}

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
			waitLeft(t, nodes[1], player, "x1z0 to hand the player away")
			waitLeft(t, nodes[tc.node], player, "the player to leave "+tc.zone)
		})
	}
}

// A passed-on Leave of a superseded login must not take the newer login's
// player: the player's older connection on n1 plays in x1z0 (n2), which
// hands it on; a newer login of the player (another connection on n1)
// joins the new owner; then the older connection's Leave (Duplicate)
// reaches x1z0 and is passed on. The new owner keeps the player for the
// newer login, through the newer connection. A Teleport passed on behind the Leave (the same path, in
// order) says the Leave was taken; it must move the player there (a
// Teleport names no connection: it needs no tag to be taken).
func TestStaleLeavePassedOnKeepsTheNewerLogin(t *testing.T) {
	nodes := lineNodes(t)
	gw := nodes[0]
	old := actor.NewPID(gw.sys.Address(), zone.ActorName("x1z0"))
	for i, tc := range passOnTargets {
		t.Run(tc.name, func(t *testing.T) {
			player := uint64(400 + i)
			older := newLoginConn(gw.sys, old)
			handedOn(t, nodes, older, player, tc.into, tc.node)
			to := actor.NewPID(gw.sys.Address(), zone.ActorName(tc.zone))
			newer := newLoginConn(gw.sys, to)
			gw.sys.Root.Send(to, newer.join(gw.sys, player))
			newer.play(t, gw.sys, player, 1, 5, "the newer login")
			before, _ := entityIn(t, nodes[tc.node], player)
			forwarded := nodes[1].m.Forwarded.Load()
			gw.sys.Root.Send(old, &msg.Leave{Player: player, Conn: older.pid, Reason: handshake.ReasonDuplicate})
			older.views.Close()
			gw.sys.Root.Send(old, &zone.Teleport{Entity: player, Pos: tc.next})
			waitFor(t, 5*time.Second, "x1z0 to pass the Leave and the Teleport on", func() bool {
				return nodes[1].m.Forwarded.Load() >= forwarded+2
			})
			waitFor(t, 5*time.Second, "the passed-on Teleport in "+tc.zone, func() bool {
				e, owned := entityIn(t, nodes[tc.node], player)
				if !owned {
					t.Fatalf("%s no longer owns the player: the older login's Leave took the newer's", tc.zone)
				}
				return e.State.Pos[0] == tc.next[0] && e.State.Pos[2] == tc.next[2]
			})
			// The player is still the newer connection's (not given back to
			// the older: the gateway node delivers to its newer connection
			// either way, so only the zone tells).
			if e, _ := entityIn(t, nodes[tc.node], player); e.Conn != before.Conn {
				t.Fatalf("%s plays the player for %s, the newer login was %s", tc.zone, e.Conn, before.Conn)
			}
			newer.play(t, gw.sys, player, 6, 10, "the newer login after the stale Leave")
		})
	}
}

// What a passed-on Leave names on the new owner's node (n1 here), for
// each sender: the connection the zone holds for the player when it is
// the one that left, never another login's; and the link keeps the
// player's view slot for a Leave its zone does not take. A sender from
// before gateway_node (a rolling update) names the passing node's link
// ("link-n3" as its connection): its Leave matches a Join that named no
// connection only, as before tags.
func TestPassedOnLeaveNamesTheJoinItsZoneHolds(t *testing.T) {
	b, _ := fuzzBridge(t)
	const tag, other = 0x5eed, 0x0dd
	leave := func(t *testing.T, l *pb.PlayerLeave) *actor.PID {
		t.Helper()
		l.Reason = uint32(handshake.ReasonClientQuit)
		m, err := b.decodeItem(&pb.ZoneItem{Item: &pb.ZoneItem_Leave{Leave: l}}, "n2")
		if err != nil {
			t.Fatal(err)
		}
		return m.(*msg.Leave).Conn
	}
	slotKept := func(t *testing.T, player uint64) {
		t.Helper()
		lk := b.link("n3")
		lk.mu.Lock()
		defer lk.mu.Unlock()
		if lk.slots[player] == nil {
			t.Fatal("the link dropped the view slot of a player its zone keeps")
		}
	}
	for _, tc := range []struct {
		name    string
		player  uint64
		joinTag uint32 // the tag of the Join the zone holds (0: untagged)
		leave   *pb.PlayerLeave
		matches bool
	}{
		{name: "tagged, the same connection", player: 601, joinTag: tag,
			leave: &pb.PlayerLeave{Conn: "link-n3", GatewayNode: "n3", ConnTag: tag}, matches: true},
		{name: "tagged, another connection", player: 602, joinTag: tag,
			leave: &pb.PlayerLeave{Conn: "link-n3", GatewayNode: "n3", ConnTag: other}},
		{name: "untagged passer, untagged Join", player: 603,
			leave: &pb.PlayerLeave{Conn: "link-n3", GatewayNode: "n3"}, matches: true},
		{name: "untagged passer, a tagged Join", player: 604, joinTag: tag,
			leave: &pb.PlayerLeave{Conn: "link-n3", GatewayNode: "n3"}},
		{name: "passer before gateway_node, untagged Join", player: 605,
			leave: &pb.PlayerLeave{Conn: "link-n3"}, matches: true},
		{name: "passer before gateway_node, a tagged Join", player: 606, joinTag: tag,
			leave: &pb.PlayerLeave{Conn: "link-n3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := b.joinFor(tc.player, "n3", tc.joinTag, 0, nil, 0)
			tc.leave.Player = tc.player
			if got := leave(t, tc.leave); got.Equal(j.Conn) != tc.matches {
				t.Fatalf("the Leave names %v, the zone holds %v: match %v, want %v", got, j.Conn, !tc.matches, tc.matches)
			}
			if !tc.matches {
				slotKept(t, tc.player)
			}
		})
	}
	t.Run("a gateway with no link here", func(t *testing.T) {
		b.mu.Lock()
		links := len(b.links)
		b.mu.Unlock()
		for _, gw := range []string{"n7", "n8", "n9"} {
			leave(t, &pb.PlayerLeave{Player: 620, Conn: "link-" + gw, GatewayNode: gw, ConnTag: tag})
			leave(t, &pb.PlayerLeave{Player: 620, Conn: "link-" + gw})
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		if len(b.links) != links {
			t.Fatalf("Leaves naming gateways no Join named made %d links", len(b.links)-links)
		}
	})
	t.Run("back to the gateway", func(t *testing.T) {
		if _, err := b.decodeItem(&pb.ZoneItem{Item: &pb.ZoneItem_Leave{Leave: &pb.PlayerLeave{Player: 610,
			GatewayNode: "n1.x", ConnTag: 1}}}, "n2"); err == nil {
			t.Fatal("a gateway node that is no node id was taken")
		}
		older := &msg.Join{Player: 611, Conn: &actor.PID{Address: "nonhost", Id: "$older"}, Views: new(msg.ViewSlot)}
		newer := &msg.Join{Player: 611, Conn: &actor.PID{Address: "nonhost", Id: "$newer"}, Views: new(msg.ViewSlot)}
		b.rememberLocal(older)
		b.rememberLocal(newer)
		b.forgetLocal(611, older.Conn, handshake.ReasonDuplicate)
		for _, c := range []*msg.Join{older, newer} {
			if got := leave(t, &pb.PlayerLeave{Player: 611, Conn: "link-n1", GatewayNode: "n1", ConnTag: connTag(c.Conn)}); !got.Equal(c.Conn) {
				t.Fatalf("the Leave of %v names %v", c.Conn, got)
			}
		}
		if got := leave(t, &pb.PlayerLeave{Player: 611, Conn: "link-n1", GatewayNode: "n1", ConnTag: other}); got.Equal(older.Conn) || got.Equal(newer.Conn) {
			t.Fatalf("an unknown connection's Leave names %v", got)
		}
		if got := leave(t, &pb.PlayerLeave{Player: 611, Conn: "link-n1", GatewayNode: "n1"}); got.Equal(older.Conn) || got.Equal(newer.Conn) {
			t.Fatalf("an untagged Leave names %v while the player has a live connection here", got)
		}
		b.forgetLocal(611, newer.Conn, handshake.ReasonClientQuit)
		if got := leave(t, &pb.PlayerLeave{Player: 611, Conn: "link-n1", GatewayNode: "n1"}); !got.Equal(newer.Conn) {
			t.Fatalf("an untagged Leave names %v, the connection that left last was %v", got, newer.Conn)
		}
	})
}

// A Teleport that reaches a zone while it hands the player to another
// node is kept until the handoff settles, then passed on to the new
// owner, which applies it: a Teleport names no connection, so nothing
// about it depends on which node it lands on (the Leave's defect is not
// the Teleport's: this passes on main too).
func TestTeleportDuringAHandoffAcrossNodesIsPassedOn(t *testing.T) {
	nodes := lineNodes(t)
	gw := nodes[0]
	old := actor.NewPID(gw.sys.Address(), zone.ActorName("x1z0"))
	for i, tc := range passOnTargets {
		t.Run(tc.name, func(t *testing.T) {
			player := uint64(700 + i)
			c := newLoginConn(gw.sys, old)
			gw.sys.Root.Send(old, c.join(gw.sys, player))
			c.play(t, gw.sys, player, 1, 3, "join on n2")
			forwarded := nodes[1].m.Forwarded.Load()
			// One batch, in order: the handoff starts, then a Teleport
			// within the zone the player is handed to.
			gw.sys.Root.Send(old, &zone.Teleport{Entity: player, Pos: tc.into})
			gw.sys.Root.Send(old, &zone.Teleport{Entity: player, Pos: tc.next})
			waitFor(t, 5*time.Second, "x1z0 to pass the Teleport on", func() bool { return nodes[1].m.Forwarded.Load() > forwarded })
			waitFor(t, 5*time.Second, "the second Teleport in "+tc.zone, func() bool {
				e, owned := entityIn(t, nodes[tc.node], player)
				return owned && e.State.Pos[0] == tc.next[0] && e.State.Pos[2] == tc.next[2]
			})
		})
	}
}

// waitLeft waits (at most 5 s) until player is no longer owned by any
// zone of node n.
func waitLeft(t *testing.T, n *benchNode, player uint64, what string) {
	t.Helper()
	waitFor(t, 5*time.Second, what, func() bool {
		_, owned := entityIn(t, n, player)
		return !owned
	})
}
