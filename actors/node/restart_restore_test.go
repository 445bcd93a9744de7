package node

import (
	"context"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/zones/sim"
)

// A node that crashes and starts again at once takes its zone's lease
// over from its previous run and puts the zone's players back from their
// records, as a node claiming a crashed node's zone later does: the player
// connected to the other node is rejoined by the restore, not left
// standing until its connection notices 3 s of silence and looks its
// record up. (The zones a node claimed as it started had no restore: in
// make chaos every kill's players moved again 2.98 s after the signal,
// 1.9 s after their zone was owned again.)
func TestRestartedNodeRestoresItsZonesPlayers(t *testing.T) {
	nodes := startNodes(t, nil, "x0z0", "x1z0")
	defer func() { stopAll(nodes) }()
	// A player connected to n1, playing in n2's x1z0.
	w := strollIn(t, nodes[0], "x1z0")
	defer w.s.Close(context.Background())
	w.walk(2500 * time.Millisecond) // a checkpoint or two
	var before sim.EntityInfo
	inspect(t, nodes[1], func(z *sim.Zone) {
		if e, ok := z.Entity(w.player); ok && e.Owned {
			before = e
		}
	})
	if before.ID != w.player {
		t.Fatalf("player %d not in n2's zone before the crash", w.player)
	}
	rejoins := nodes[0].Bridge().Metrics().Rejoins.Load()
	// n2 crashes (its lease left as it was) and starts again.
	cfg := nodes[1].cfg
	crashed := time.Now()
	nodes[1].leases.Abandon()
	_ = nodes[1].Stop(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	n2, err := Start(ctx, cfg, nil)
	cancel()
	if err != nil {
		t.Fatalf("n2 again: %v", err)
	}
	nodes[1] = n2
	if got := n2.Zones().IDs(); len(got) != 1 || got[0] != "x1z0" {
		t.Fatalf("n2 runs %v after its restart, want [x1z0]", got)
	}
	if !n2.Leases().TookOver("x1z0") {
		t.Fatalf("n2 claimed x1z0 afresh %v after the crash, not from its previous run's lease", time.Since(crashed))
	}
	var after sim.EntityInfo
	deadline := time.Now().Add(20 * time.Second)
	for after.ID != w.player {
		if time.Now().After(deadline) {
			t.Fatalf("player %d not back in x1z0 after n2's restart", w.player)
		}
		w.walk(100 * time.Millisecond) // the client plays on through the restart
		inspect(t, n2, func(z *sim.Zone) {
			if e, ok := z.Entity(w.player); ok && e.Owned {
				after = e
			}
		})
	}
	if after.Epoch <= before.Epoch {
		t.Fatalf("back at epoch %d, not above %d", after.Epoch, before.Epoch)
	}
	if got := nodes[0].Bridge().Metrics().Rejoins.Load(); got == rejoins {
		t.Fatalf("the player came back without a Rejoin from the restarted node's restore (relooks %d)", nodes[0].game.gw.Stats().Relooks)
	}
	w.walk(500 * time.Millisecond)
	checkEveryMoveApplied(t, n2, w.player, w.sent)
	if err := w.s.Err(); err != nil {
		t.Fatalf("the session ended: %v", err)
	}
}
