package cluster

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ghostwire/ghostwire/actors/msg"
	"github.com/ghostwire/ghostwire/actors/zone"
	pb "github.com/ghostwire/ghostwire/proto/ghostwire/v1"
	"github.com/ghostwire/ghostwire/replication/event"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/zones/handoff"
	"github.com/ghostwire/ghostwire/zones/sim"
)

// send hands c's route one Input of player's, in c's event generation:
// the moves seqs and echo-lane events numbered from..to ("e<n>"; none
// when from is 0).
func (c *loginConn) send(sys *actor.ActorSystem, player uint64, seqs []uint64, from, to uint64) {
	_, _, route := c.state()
	c.sendVia(sys, route, player, seqs, from, to)
}

// sendVia sends as send does, to pid whatever c's route is now.
func (c *loginConn) sendVia(sys *actor.ActorSystem, pid *actor.PID, player uint64, seqs []uint64, from, to uint64) {
	in := msg.NewInput()
	in.Player, in.EventGen = player, c.gen
	for _, s := range seqs {
		in.Moves = append(in.Moves, move.Move{Seq: s, Dt: 1, Forward: 1})
	}
	for s := from; from != 0 && s <= to; s++ {
		in.AddSeq(event.Ordered, zone.EchoLane, 0, fmt.Appendf(nil, "e%d", s), s)
	}
	sys.Root.Send(pid, in)
}

func (c *loginConn) echoed() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.echoes)
}

// routedTo waits until c's route is zone (a Redirect came).
func (c *loginConn) routedTo(t *testing.T, zoneID, what string) {
	t.Helper()
	waitFor(t, 5*time.Second, what+" redirected to "+zoneID, func() bool {
		_, _, route := c.state()
		return route.Id == zone.ActorName(zoneID)
	})
}

// connAt is how node n's zones hold connection pid of gateway node gw
// (index in lineNodes): itself on its own node, else n's link to gw
// tagged with it.
func connAt(nodes [3]*benchNode, n, gw int, pid *actor.PID) *actor.PID {
	if n == gw {
		return pid
	}
	return &actor.PID{Address: nodes[n].sys.Address(), Id: linkPrefix + []string{"n1", "n2", "n3"}[gw], RequestId: connTag(pid)}
}

// waitPlayedThrough waits until node n's zone owns player through conn
// (as n names it).
func waitPlayedThrough(t *testing.T, nodes [3]*benchNode, n int, player uint64, conn *actor.PID, what string) {
	t.Helper()
	var got string
	deadline := time.Now().Add(5 * time.Second)
	for {
		e, owned := entityIn(t, nodes[n], player)
		got = e.Conn
		if owned && got == msg.ConnName(conn) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after 5s waiting for %s: played through %q (owned %v), want %q", what, got, owned, msg.ConnName(conn))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// slowOffers: an Offer waits for its answer as long as a test holds the
// target zone (the default aborts it after 500 ms).
var slowOffers = sim.Config{Handoff: handoff.Config{OfferTimeout: 10 * time.Second}}

// loginMidHandoff sends x1z0 (n2), from node from's proxy, a Teleport of
// player into the zone of node to, then join, with that zone held: its
// answer to the Offer waits, the player frozen in x1z0, until x1z0 has had
// the Join (a Teleport of an entity nobody has, behind it on the same
// route, was dropped there).
func loginMidHandoff(t *testing.T, nodes [3]*benchNode, from, to int, player uint64, into [3]float32, join *msg.Join) {
	t.Helper()
	loginMidHandoffThen(t, nodes, from, to, player, into, join, nil)
}

// loginMidHandoffThen is loginMidHandoff calling then, when not nil, once
// x1z0 has the Join and before the target zone is let go: the player is
// still frozen in x1z0, the Join kept there.
func loginMidHandoffThen(t *testing.T, nodes [3]*benchNode, from, to int, player uint64, into [3]float32, join *msg.Join, then func()) {
	t.Helper()
	in, out := make(chan struct{}), make(chan struct{})
	target := nodes[to]
	var zid string
	_ = target.zones.Inspect(2*time.Second, func(z *sim.Zone) { zid = z.ID() })
	fut := zone.RequestInspect(target.sys.Root, actor.NewPID(target.sys.Address(), zone.ActorName(zid)),
		func(*sim.Zone) { close(in); <-out }, 10*time.Second)
	select {
	case <-in:
	case <-time.After(5 * time.Second):
		t.Fatalf("zone %s not held", zid)
	}
	released := false
	release := func() {
		if !released {
			released = true
			close(out)
			if _, err := msg.Await(fut); err != nil {
				t.Errorf("zone %s: %v", zid, err)
			}
		}
	}
	defer release()
	sys := nodes[from].sys
	x1z0 := actor.NewPID(sys.Address(), zone.ActorName("x1z0"))
	dropped := nodes[1].m.TeleportsDropped.Load()
	sys.Root.Send(x1z0, &zone.Teleport{Entity: player, Pos: into})
	sys.Root.Send(x1z0, join)
	sys.Root.Send(x1z0, &zone.Teleport{Entity: 1 << 40, Pos: into})
	waitFor(t, 5*time.Second, "x1z0 to have the Join", func() bool { return nodes[1].m.TeleportsDropped.Load() > dropped })
	if e, ok := entityIn(t, nodes[1], player); !ok || !e.Frozen {
		t.Fatalf("the player is not frozen in x1z0 when the newer login's Join comes: %+v", e)
	}
	if then != nil {
		then()
	}
}

// waitPassedOn waits until x1z0 (n2) has passed a Join on since its
// Forwarded count read forwarded; it fails saying where the player is.
func waitPassedOn(t *testing.T, nodes [3]*benchNode, player, forwarded uint64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for nodes[1].m.Forwarded.Load() <= forwarded {
		if time.Now().After(deadline) {
			var where []string
			for i, n := range nodes {
				if e, owned := entityIn(t, n, player); owned {
					where = append(where, fmt.Sprintf("n%d through %s", i+1, e.Conn))
				}
			}
			t.Fatalf("timed out after 5s waiting for x1z0 to pass the Join on: the player is owned on %q; n2 handoffs in %d, joins %d",
				where, nodes[1].m.HandoffsIn.Load(), nodes[1].m.Joins.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A player's newer login on gateway n1 comes while its zone, x1z0 on n2,
// hands the player to a zone on another node: x1z0 keeps the Join while
// the player is frozen and passes it on once the handoff completes
// (actors/zone passJoin); the new owner takes the player over for it.
// That owner must play the player through the connection on n1 directly:
// its zone holds n1's link tagged with the connection (or, back on n1,
// the connection itself), and the login's moves are acknowledged by its
// Controls. Before, the passed-on PlayerJoin named n2's link to n1 as a
// connection of n2: the new owner's node sent the login's Controls,
// Outputs and Redirects to n2, which holds no connection of the player
// and dropped them (Unknown), and a real connection recovered only by its
// record lookup after ≈ 1 s of silence. A loginConn looks nothing up, so
// its moves are acknowledged only through that route (the route is what
// is checked, not the time).
func TestLoginDuringAHandoffAcrossNodesReachesItsConnection(t *testing.T) {
	nodes := lineNodesSim(t, slowOffers, nil)
	gw := nodes[0]
	old := actor.NewPID(gw.sys.Address(), zone.ActorName("x1z0"))
	for i, tc := range passOnTargets {
		t.Run(tc.name, func(t *testing.T) {
			player := uint64(800 + i)
			older := newLoginConn(gw.sys, old)
			gw.sys.Root.Send(old, older.join(gw.sys, player))
			older.play(t, gw.sys, player, 1, 3, "join on n2")
			forwarded, unknown := nodes[1].m.Forwarded.Load(), nodes[1].bridge.Metrics().Unknown.Load()
			newer := newLoginConn(gw.sys, old)
			loginMidHandoff(t, nodes, 0, tc.node, player, tc.into, newer.join(gw.sys, player))
			waitPassedOn(t, nodes, player, forwarded)
			newer.routedTo(t, tc.zone, "the newer login")
			waitPlayedThrough(t, nodes, tc.node, player, connAt(nodes, tc.node, 0, newer.pid),
				tc.zone+" to play the player through the newer login on n1")
			newer.play(t, gw.sys, player, 1, 3, "the newer login in "+tc.zone)
			if n := nodes[1].bridge.Metrics().Unknown.Load() - unknown; n != 0 {
				t.Fatalf("n2 dropped %d updates for a player with no connection there", n)
			}
		})
	}
}

// Two logins of one player through two gateways (the older on n1, the
// newer on n3): the newer's Join takes the player over in its zone from
// the older's, and the older's inputs still come (its client has not
// been told: nothing ends it but its own lookup). In one process the zone
// holds them back by their event generation until one of the two leaves
// (actors/zone park); across nodes the zone must do the same, whether the
// newer's Join came straight from its gateway or was kept by the player's
// old zone mid-handoff and passed on to the new owner — on a third node,
// or back on the newer's gateway. The newer connection gets its own
// echoes and acknowledgements only. Before, a Join from another node
// carried no generation: the older's inputs moved the newer's player and
// their echoes went to the newer connection (and a passed-on Join named
// the passing node's link: the newer got nothing at all).
func TestDisplacedLoginsInputsAcrossNodesAreHeldBack(t *testing.T) {
	nodes := lineNodesSim(t, slowOffers, nil)
	n1, n3 := nodes[0], nodes[2]
	const genOld, genNew = 0x01d, 0x0f2e54
	for i, tc := range []struct {
		name    string
		handoff bool
		to      int // the node of the zone that takes the player over
		zone    string
		into    [3]float32 // the handoff's teleport
		tp      [3]float32 // a teleport within that zone
		// quiet: the older login sends no event before the takeover (the
		// zone knows its generation from its Join alone: carried through
		// the handoff, HandoffItem.event_gen).
		quiet bool
	}{
		{name: "a Join from another gateway", to: 1, zone: "x1z0", tp: [3]float32{100, 0, 100}},
		{name: "a Join passed on to a third node", handoff: true, to: 0, zone: "x0z0",
			into: passOnTargets[1].into, tp: passOnTargets[1].next},
		{name: "a Join passed on to its gateway's node", handoff: true, to: 2, zone: "x2z0",
			into: passOnTargets[0].into, tp: passOnTargets[0].next},
		{name: "a Join passed on to its gateway's node, the older login quiet before", handoff: true, to: 2, zone: "x2z0",
			into: passOnTargets[0].into, tp: passOnTargets[0].next, quiet: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			player := uint64(900 + i)
			older := newLoginConn(n1.sys, actor.NewPID(n1.sys.Address(), zone.ActorName("x1z0")))
			older.gen = genOld
			n1.sys.Root.Send(older.route, older.join(n1.sys, player))
			var echoes []string
			if tc.quiet {
				older.play(t, n1.sys, player, 1, 2, "the older login")
			} else {
				older.send(n1.sys, player, []uint64{1, 2}, 1, 2)
				echoes = []string{"e1", "e2"}
				waitFor(t, 3*time.Second, "the older login's echoes e1, e2", func() bool { return len(older.echoed()) == 2 })
			}
			newer := newLoginConn(n3.sys, actor.NewPID(n3.sys.Address(), zone.ActorName("x1z0")))
			newer.gen = genNew
			forwarded := nodes[1].m.Forwarded.Load()
			if tc.handoff {
				loginMidHandoff(t, nodes, 2, tc.to, player, tc.into, newer.join(n3.sys, player))
			} else {
				n3.sys.Root.Send(newer.route, newer.join(n3.sys, player))
			}
			if tc.handoff {
				waitPassedOn(t, nodes, player, forwarded)
				older.routedTo(t, tc.zone, "the older login (by the new owner)")
				newer.routedTo(t, tc.zone, "the newer login (by x1z0)")
			}
			waitPlayedThrough(t, nodes, tc.to, player, connAt(nodes, tc.to, 2, newer.pid), tc.zone+" to play the player through the newer login")
			// The older login's input, then (in order behind it) a
			// teleport within the zone: once the player is there, the zone
			// has had the input.
			older.send(n1.sys, player, []uint64{3}, 3, 3)
			_, _, route := older.state()
			n1.sys.Root.Send(route, &zone.Teleport{Entity: player, Pos: tc.tp})
			waitFor(t, 5*time.Second, "the teleport behind the older login's input", func() bool {
				e, owned := entityIn(t, nodes[tc.to], player)
				return owned && e.State.Pos[0] == tc.tp[0] && e.State.Pos[2] == tc.tp[2]
			})
			// The newer login's first input: its echo comes behind any
			// the zone sent before (one route, in order).
			newer.send(n3.sys, player, []uint64{1}, 1, 1)
			waitFor(t, 3*time.Second, "the newer login's echo e1", func() bool {
				e := newer.echoed()
				return len(e) > 0 && e[len(e)-1] == "e1"
			})
			if got := newer.echoed(); !slices.Equal(got, []string{"e1"}) {
				t.Errorf("the newer login was echoed %q, want only its own [e1]", got)
			}
			if _, applied, _ := newer.state(); applied > 1 {
				t.Errorf("the newer login was told move %d applied, it sent 1", applied)
			}
			if got := older.echoed(); !slices.Equal(got, echoes) {
				t.Errorf("the older login was echoed %q, want %q (its input after the takeover held back)", got, echoes)
			}
		})
	}
}

// What a passed-on Join names on the receiving node (n1 here), for each
// sender: another gateway's connection behind that gateway's link, tagged
// (not the passing node's link); back on the gateway, the connection's own
// Join — the displaced one of two logins when the tag is its — and nothing
// once the player has no connection here (a nil Join must not reach the
// zone); with the connection's event generation. A sender from before
// gateway_node keeps today's reading: the sender's link.
func TestPassedOnJoinNamesItsConnection(t *testing.T) {
	b, _ := fuzzBridge(t)
	const tag = 0x5eed
	join := func(t *testing.T, j *pb.PlayerJoin) (*msg.Join, error) {
		t.Helper()
		m, err := b.decodeItem(&pb.ZoneItem{Item: &pb.ZoneItem_Join{Join: j}}, "n2")
		if m == nil {
			return nil, err
		}
		return m.(*msg.Join), err
	}
	t.Run("another gateway", func(t *testing.T) {
		j, err := join(t, &pb.PlayerJoin{Player: 630, Conn: "link-n3", GatewayNode: "n3", ConnTag: tag, EventGen: 0xb0b})
		if err != nil {
			t.Fatal(err)
		}
		if want := b.link("n3").connPID(tag); !j.Conn.Equal(want) || j.EventGen != 0xb0b {
			t.Fatalf("the Join names %v in generation %#x, want %v in 0xb0b", j.Conn, j.EventGen, want)
		}
		if _, err := join(t, &pb.PlayerJoin{Player: 631, Conn: "link-n3", GatewayNode: "n3.x", ConnTag: tag}); err == nil {
			t.Fatal("a gateway node that is no node id was taken")
		}
	})
	t.Run("a sender before gateway_node", func(t *testing.T) {
		j, err := join(t, &pb.PlayerJoin{Player: 632, Conn: "link-n3"})
		if err != nil {
			t.Fatal(err)
		}
		if want := b.link("n2").connPID(idTag("link-n3")); !j.Conn.Equal(want) {
			t.Fatalf("the Join names %v, want the sender's link %v", j.Conn, want)
		}
	})
	t.Run("back to the gateway", func(t *testing.T) {
		older := &msg.Join{Player: 633, Conn: &actor.PID{Address: "nonhost", Id: "$older"}, Views: new(msg.ViewSlot), EventGen: 1}
		newer := &msg.Join{Player: 633, Conn: &actor.PID{Address: "nonhost", Id: "$newer"}, Views: new(msg.ViewSlot), EventGen: 2}
		b.rememberLocal(older)
		b.rememberLocal(newer) // displaces older
		for _, tc := range []struct {
			name string
			tag  uint32
			want *msg.Join
		}{
			{name: "the newer's tag", tag: connTag(newer.Conn), want: newer},
			{name: "the displaced older's tag", tag: connTag(older.Conn), want: older},
			{name: "no tag", want: newer},
			{name: "an unknown tag", tag: tag, want: newer},
		} {
			j, err := join(t, &pb.PlayerJoin{Player: 633, Conn: "link-n1", GatewayNode: "n1", ConnTag: tc.tag})
			if err != nil || j != tc.want {
				t.Fatalf("%s: the Join is %+v (%v), want %+v", tc.name, j, err, tc.want)
			}
		}
		unknown := b.m.Unknown.Load()
		m, err := b.decodeItem(&pb.ZoneItem{Item: &pb.ZoneItem_Join{Join: &pb.PlayerJoin{Player: 634, Conn: "link-n1",
			GatewayNode: "n1", ConnTag: tag}}}, "n2")
		if err != nil || m != nil {
			t.Fatalf("a Join of a player with no connection here decoded to %#v (%v), want nothing", m, err)
		}
		if b.m.Unknown.Load() != unknown+1 {
			t.Fatal("the dropped Join was not counted")
		}
	})
}

// A newer login's Join reaches x1z0 (n2) while it hands the player to a
// zone on another node, and is kept there until the handoff completes
// (TestLoginDuringAHandoffAcrossNodesReachesItsConnection); meanwhile the
// newer login's client plays on, and its inputs reach x1z0, its route
// until the Redirect. x1z0 must hold them (they are the kept Join's, by
// its event generation) and pass them on behind the Join: the new owner
// takes the player over for the newer login, applies its moves and
// echoes its events to it. Before, x1z0 applied them as the older
// connection's: the moves were taken in the older's numbering, the echo
// went to the older login and the newer never had it.
func TestKeptLoginsInputsGoOnBehindItsJoin(t *testing.T) {
	nodes := lineNodesSim(t, slowOffers, nil)
	n1, n3 := nodes[0], nodes[2]
	const genOld, genNew = 0x01d, 0x0f2e54
	for i, tc := range []struct {
		name string
		node int
		zone string
		into [3]float32
	}{
		{"to the newer login's gateway's node", passOnTargets[0].node, passOnTargets[0].zone, passOnTargets[0].into},
		{"to a third node", passOnTargets[1].node, passOnTargets[1].zone, passOnTargets[1].into},
	} {
		t.Run(tc.name, func(t *testing.T) {
			player := uint64(1200 + i)
			older := newLoginConn(n1.sys, actor.NewPID(n1.sys.Address(), zone.ActorName("x1z0")))
			older.gen = genOld
			n1.sys.Root.Send(older.route, older.join(n1.sys, player))
			older.send(n1.sys, player, []uint64{1, 2}, 1, 2)
			waitFor(t, 3*time.Second, "the older login's echoes e1, e2", func() bool { return len(older.echoed()) == 2 })
			newer := newLoginConn(n3.sys, actor.NewPID(n3.sys.Address(), zone.ActorName("x1z0")))
			newer.gen = genNew
			forwarded := nodes[1].m.Forwarded.Load()
			loginMidHandoffThen(t, nodes, 2, tc.node, player, tc.into, newer.join(n3.sys, player), func() {
				// Behind the Join on the same route: x1z0 has it once a
				// Teleport of nobody behind it was dropped there.
				dropped := nodes[1].m.TeleportsDropped.Load()
				newer.send(n3.sys, player, []uint64{1}, 1, 1)
				n3.sys.Root.Send(newer.route, &zone.Teleport{Entity: 1 << 40, Pos: tc.into})
				waitFor(t, 5*time.Second, "x1z0 to have the newer login's input", func() bool {
					return nodes[1].m.TeleportsDropped.Load() > dropped
				})
			})
			waitPassedOn(t, nodes, player, forwarded)
			newer.routedTo(t, tc.zone, "the newer login (by x1z0)")
			waitFor(t, 5*time.Second, "the newer login's echo e1 and move 1", func() bool {
				_, applied, _ := newer.state()
				return slices.Equal(newer.echoed(), []string{"e1"}) && applied >= 1
			})
			if got := older.echoed(); !slices.Equal(got, []string{"e1", "e2"}) {
				t.Errorf("the older login was echoed %q, want only its own [e1 e2]", got)
			}
		})
	}
}
