package node

import (
	"context"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ghostwire/ghostwire/actors/cluster"
	"github.com/ghostwire/ghostwire/zones/world"
)

// A node claiming its fair share leaves a zone released a moment ago to
// the handover's target, which is claiming it (found by hand: two auto
// nodes starting at once, the first given a zone by a rebalance while the
// second, starting, claimed its share: the handover failed "zone owned by
// another node", and the zone's players were not restored). Past the
// grace, the zone is claimed; and a release the watcher only listed at
// its start (a clean stop long ago) is no handover in flight.
func TestClaimFairLeavesAReleasedZoneToItsTarget(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(), ignoreThrottle)
	cfg := testConfig(t)
	cfg.NodeID, cfg.Zones, cfg.NPCs = "n1", "x0z0", 0 // a fixed list: n1 claims no other zone
	n, err := Start(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	kv := n.nats.kv[BucketZones]
	var all []*cluster.Leases
	defer func() {
		for _, l := range all {
			l.Close(context.Background())
		}
	}()
	leases := func(node string) *cluster.Leases {
		l, err := cluster.NewLeases(ctx, kv, node, 0, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, l)
		return l
	}
	giver, holder, claimer := leases("giver"), leases("holder"), leases("claimer")
	for _, z := range []string{"x1z0", "x0z1"} { // only x1z1 is left to claim
		if _, err := holder.Claim(ctx, z); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := giver.Claim(ctx, "x1z1"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the claimer to see every zone owned", func() bool { return len(claimer.Owners()) == 4 })
	if err := giver.Release(ctx, "x1z1"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the claimer to see x1z1 released", func() bool {
		_, owned := claimer.Owner("x1z1")
		return !owned
	})

	wm := world.Default()
	if got := claimFair(ctx, wm, claimer, nil, "claimer", 0, time.Hour, nil); len(got) != 0 {
		t.Fatalf("claimed %v within the grace of x1z1's release", got)
	}
	if late := leases("late"); late.ReleasedWithin("x1z1", time.Hour) {
		t.Fatal("a release listed at the watcher's start counted as a handover in flight")
	}
	if got := claimFair(ctx, wm, claimer, nil, "claimer", 0, 0, nil); !slices.Equal(got, []string{"x1z1"}) {
		t.Fatalf("claimed %v past the grace, want x1z1", got)
	}
}
