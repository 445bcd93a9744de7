package node

import (
	"context"
	"math"
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
	crashed := time.Now()
	n2 := crashAndRestart(t, nodes, 1)
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

// A crash costs a player whose gateway survived what its zone had not yet
// checkpointed, no more: the restore puts the player back where its
// record's last periodic checkpoint left it (each player's once a second:
// five chunk slices, each every fourth tick at 20 Hz), so the client is
// corrected back by about a second of its walking, and its moves go on.
// Without the periodic checkpoints the record is the join's, and the
// correction undoes every step since (22.9 m, 6.9 s of walking, with the
// zone's checkpoints cut out). Measured (2026-12-08): one correction
// of 0.55–0.77 m at 3.3 m/s (0.2 s of walking: where the crash fell in
// the player's checkpoint second; 2.3–2.4 m after a 2.5 s walk), 80 ms
// after the crash. The bound, 4 s of walking, allows checkpoints dropped
// on a loaded host (cluster.md: periodic checkpoints are dropped while a
// zone's fence is closed) and the write's own time.
func TestCrashRestoreWalksBackAtMostACheckpointPeriod(t *testing.T) {
	nodes := startNodes(t, nil, "x0z0", "x1z0")
	defer func() { stopAll(nodes) }()
	w := strollIn(t, nodes[0], "x1z0")
	defer w.s.Close(context.Background())
	w.walk(time.Second)
	const walkFor = 6 * time.Second
	p0 := w.s.Control().Pos
	w.walk(walkFor)
	p1 := w.s.Control().Pos
	speed := math.Hypot(float64(p1[0]-p0[0]), float64(p1[2]-p0[2])) / walkFor.Seconds()
	if speed < 0.5 {
		t.Fatalf("the player walked at %.2f m/s: not moving, nothing to measure", speed)
	}
	if w.s.ControlOffset() != [3]float32{} {
		t.Fatalf("corrected before the crash: %v", w.s.ControlOffset())
	}
	// n2 crashes (its lease left as it was) and starts again at once: it
	// takes its lease over and restores the zone's players from their
	// records.
	n2 := crashAndRestart(t, nodes, 1)
	// The client plays on; the correction comes once the player is back
	// (a Rejoin from the restore, or the connection's own look after 3 s
	// of silence).
	var back time.Time
	var worst float64
	var corrections int
	last := [3]float32{}
	deadline := time.Now().Add(20 * time.Second)
	for back.IsZero() || time.Since(back) < 1500*time.Millisecond {
		if time.Now().After(deadline) {
			t.Fatalf("player %d not back in x1z0 after n2's restart", w.player)
		}
		w.walk(50 * time.Millisecond)
		if o := w.s.ControlOffset(); o != last {
			last = o
			if d := math.Hypot(float64(o[0]), float64(o[2])); d > 0 {
				corrections++
				worst = max(worst, d)
			}
		}
		if back.IsZero() {
			inspect(t, n2, func(z *sim.Zone) {
				if e, ok := z.Entity(w.player); ok && e.Owned {
					back = time.Now()
				}
			})
		}
	}
	t.Logf("walking at %.2f m/s: %d correction(s), the largest %.2f m (%.2f s of walking)", speed, corrections, worst, worst/speed)
	if lim := 4 * speed; worst > lim {
		t.Fatalf("the restore walked the player back %.2f m, %.1f s of its walking: more than a checkpoint period's (at most %.2f m)", worst, worst/speed, lim)
	}
	if err := w.s.Err(); err != nil {
		t.Fatalf("the session ended: %v", err)
	}
}

// crashAndRestart stops nodes[i] as a crash would leave its leases (not
// released: Abandon) and starts it again at once with the same config,
// in nodes[i] (so the caller's deferred stop stops the new run).
func crashAndRestart(t *testing.T, nodes []*Node, i int) *Node {
	t.Helper()
	cfg := nodes[i].cfg
	nodes[i].leases.Abandon()
	_ = nodes[i].Stop(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := Start(ctx, cfg, nil)
	if err != nil {
		t.Fatalf("%s again: %v", cfg.NodeID, err)
	}
	nodes[i] = n
	return n
}
