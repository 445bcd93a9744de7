package node

import (
	"context"
	"math"
	"testing"
	"time"

	pb "github.com/ghostwire/ghostwire/proto/ghostwire/v1"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/zones/sim"
	"github.com/ghostwire/ghostwire/zones/world"
)

// A player connected to n1 walks out of n1's zone into n2's: the record
// the new zone writes names n1, the node that holds the connection, as
// the player's gateway, not n2. When n2 then drains, the zone's new owner
// restores the player from that record and its Rejoin reaches the
// connection at once. (The Commit's snapshot named the connection as n1
// addresses it, which n2 read as one of its own: every record named n2,
// the drain's Rejoin went to the draining node, and the player stood still
// until its connection looked the record up after 3 s of silence — 2–3 s
// stalls, by hand, for the bots that had crossed a node border.)
func TestDrainRejoinsAPlayerHandedAcrossNodes(t *testing.T) {
	nodes := startNodes(t, func(c *Config) {
		// Joining players start 3 m inside their zone's east border.
		c.spawn = func(_ uint64, r world.Rect) [3]float32 {
			return [3]float32{float32(r.Max[0]) - 3, 0, float32(r.Min[1]+r.Max[1]) / 2}
		}
	}, "x0z0", "x1z0", "auto")
	defer stopAll(nodes)
	w := strollIn(t, nodes[0], "x0z0") // connected to n1, in n1's zone
	defer w.s.Close(context.Background())
	east := func(d time.Duration) {
		t.Helper()
		// Yaw 0 faces +Z and grows towards +X.
		w.walkWith(d, move.Move{Dt: 32, Forward: 127, Yaw: move.YawFromRadians(math.Pi / 2)})
	}
	record := func() *pb.PlayerRecord {
		rec, err := nodes[0].players.Record(context.Background(), w.player)
		if err != nil {
			t.Fatalf("player %d: record: %v", w.player, err)
		}
		return rec
	}
	// Across the border: n2's zone takes the player by a Commit from n1's.
	deadline := time.Now().Add(20 * time.Second)
	for rec := record(); rec.GetZone() != "x1z0"; rec = record() {
		if time.Now().After(deadline) {
			t.Fatalf("player %d not handed to x1z0: record %v", w.player, rec)
		}
		east(200 * time.Millisecond)
	}
	if n := nodes[1].Zones().Metrics().HandoffsInRemote.Load(); n == 0 {
		t.Fatal("the player reached x1z0 without a handoff from another node: the test did not test that")
	}
	if rec := record(); rec.GetGateway() != "n1" {
		t.Fatalf("the record written by x1z0 (on n2) names gateway %q; the connection is on n1", rec.GetGateway())
	}

	// n2 drains while the player walks on.
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = nodes[1].Stop(context.Background())
	}()
	east(time.Second)
	<-done
	var owner *Node
	waitFor(t, 10*time.Second, "x1z0 restored with its player", func() bool {
		for _, n := range []*Node{nodes[0], nodes[2]} {
			inspect(t, n, func(z *sim.Zone) {
				if e, ok := z.Entity(w.player); ok && e.Owned && z.ID() == "x1z0" {
					owner = n
				}
			})
		}
		return owner != nil
	})
	if got := nodes[0].Bridge().Metrics().Rejoins.Load(); got == 0 {
		t.Fatalf("the restore's Rejoin never reached the player's connection on n1 (relooks %d)", nodes[0].game.gw.Stats().Relooks)
	}
	east(500 * time.Millisecond)
	checkEveryMoveApplied(t, owner, w.player, w.sent)
	if rec := record(); rec.GetGateway() != "n1" {
		t.Fatalf("after the drain the record names gateway %q, want n1", rec.GetGateway())
	}
	if err := w.s.Err(); err != nil {
		t.Fatalf("the session ended: %v", err)
	}
}
