package node

import (
	"context"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/zones/sim"
)

// A zone taken over from a node that died puts back the players its
// checkpoint chunks name without waiting for the read of the whole
// players bucket (every player who ever played: seconds in an old world,
// the players frozen meanwhile). Here that read is held until the player
// is back in the zone; once let go, it still runs, for the players no
// chunk names.
func TestTakeoverRestoresTheChunksPlayersBeforeTheBucketRead(t *testing.T) {
	nodes := startNodes(t, nil, "x0z0", "x1z0", "auto")
	defer stopAll(nodes)
	hold := make(chan struct{})
	held := true
	defer func() {
		if held {
			close(hold)
		}
	}()
	for _, n := range []*Node{nodes[0], nodes[2]} {
		n.players.HoldScans(hold)
	}
	// A player in n2's x1z0, connected to n1's gateway.
	w := strollIn(t, nodes[0], "x1z0")
	defer w.s.Close(context.Background())
	w.walk(2500 * time.Millisecond) // every slice's chunk written at least once
	scans := nodes[2].players.BucketScans.Load() + nodes[0].players.BucketScans.Load()
	listed := nodes[2].players.ChunkListed.Load() + nodes[0].players.ChunkListed.Load()
	rejoins := nodes[0].Bridge().Metrics().Rejoins.Load()

	nodes[1].leases.Abandon() // n2 crashes: its leases are left to expire
	_ = nodes[1].Stop(context.Background())
	back := false
	deadline := time.Now().Add(20 * time.Second)
	for !back {
		if time.Now().After(deadline) {
			t.Fatalf("player %d not back in x1z0 while the bucket's read was held (chunks' players listed: %d)", w.player,
				nodes[2].players.ChunkListed.Load()+nodes[0].players.ChunkListed.Load()-listed)
		}
		w.walk(200 * time.Millisecond)
		for _, n := range []*Node{nodes[0], nodes[2]} {
			inspect(t, n, func(z *sim.Zone) {
				if e, ok := z.Entity(w.player); ok && e.Owned && z.ID() == "x1z0" {
					back = true
				}
			})
		}
	}
	if n := nodes[2].players.ChunkListed.Load() + nodes[0].players.ChunkListed.Load() - listed; n != 1 {
		t.Errorf("the takeover found %d players in x1z0's chunks, want 1", n)
	}
	// The player's gateway was asked to join it again: by the chunks'
	// restore, the only one that can while the bucket's read is held (a
	// connection that looked its record up after 3 s of silence joins
	// without one).
	waitFor(t, 10*time.Second, "a Rejoin at the player's gateway", func() bool {
		return nodes[0].Bridge().Metrics().Rejoins.Load() > rejoins
	})
	if n := nodes[2].players.BucketScans.Load() + nodes[0].players.BucketScans.Load() - scans; n != 0 {
		t.Fatalf("%d reads of the whole bucket finished while held", n)
	}
	close(hold)
	held = false
	waitFor(t, 15*time.Second, "the takeover's read of the whole bucket, for the players no chunk names", func() bool {
		return nodes[2].players.BucketScans.Load()+nodes[0].players.BucketScans.Load() > scans
	})
	if err := w.s.Err(); err != nil {
		t.Fatalf("the session ended: %v", err)
	}
}
