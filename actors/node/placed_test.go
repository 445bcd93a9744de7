package node

import (
	"context"
	"slices"
	"testing"
	"time"
)

// An operator's zone move (zonectl move-zone, Node.MoveZone) between two
// auto nodes is kept: the node it left, now below its share, asks for a
// zone back, and gets one of the target's other zones, not the one the
// operator placed there. (The target gave the zone with the fewest
// players, which the moved one often was: by hand it went back 200 ms
// after the move.)
func TestOperatorsZoneMoveIsKept(t *testing.T) {
	nodes := startNodes(t, func(c *Config) {
		c.LeaseTTL = Duration(time.Second) // the loop asks every TTL/3
	}, "auto", "auto")
	defer stopAll(nodes)
	shares := func() []int { return zoneShares(nodes) }
	waitFor(t, 15*time.Second, "2 zones each over 2 nodes", func() bool { return slices.Equal(shares(), []int{2, 2}) })
	// The zone n1 would give first: its zones are empty, so the first in
	// the world's order.
	zone := nodes[1].Zones().IDs()[0]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := nodes[1].MoveZone(ctx, zone, "n1"); err != nil {
		t.Fatalf("move %s to n1: %v", zone, err)
	}
	if !slices.Contains(nodes[0].Zones().IDs(), zone) {
		t.Fatalf("n1 runs %v after the move, not %s", nodes[0].Zones().IDs(), zone)
	}
	if got := nodes[0].Zones().IDs(); got[0] != zone {
		t.Fatalf("n1 runs %v: %s is not the zone it would give first, the test does not test that", got, zone)
	}
	// n2 asks for its share back, and gets it.
	waitFor(t, 15*time.Second, "2 zones each again", func() bool { return slices.Equal(shares(), []int{2, 2}) })
	// Several of n2's looks later, the operator's zone is still on n1.
	time.Sleep(time.Second)
	if o, ok := nodes[0].Leases().Owner(zone); !ok || o.Node != "n1" || !slices.Contains(nodes[0].Zones().IDs(), zone) {
		t.Fatalf("%s owned by %+v (%v), n1 runs %v: the operator's move was undone", zone, o, ok, nodes[0].Zones().IDs())
	}
	if got := shares(); !slices.Equal(got, []int{2, 2}) {
		t.Fatalf("shares %v, want 2 and 2", got)
	}
}
