package node

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"

	"github.com/ghostwire/ghostwire/zones/sim"
)

// npcIDs is the NPC ids a census found owned, each with how many zones own
// it.
func npcIDs(c *census) map[uint64]int {
	out := map[uint64]int{}
	for _, e := range c.truth {
		if e.Kind == sim.KindNPC {
			out[e.ID]++
		}
	}
	return out
}

// pausedCensus pauses every zone of nodes, takes a settled census and lets
// them go again.
func pausedCensus(t *testing.T, nodes []*Node) *census {
	t.Helper()
	for _, n := range nodes {
		n.Zones().Pause(true)
	}
	defer func() {
		for _, n := range nodes {
			n.Zones().Pause(false)
		}
	}()
	c, err := settledCensus(nodes, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A zone handed to another node (zonectl move-zone, a drain, a
// rebalance) takes its NPCs with it: after zones moved back and forth
// while the NPCs walked, the world holds the same NPCs, each once — not
// the moved zones' shares spawned afresh, which changed the world's count
// (197 of 200 after a drain and a rebalance, by hand) and gave new NPCs
// ids that NPCs of the zone's earlier run, walking in its neighbours,
// still had.
func TestClusterHandoverKeepsNPCs(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(), ignoreThrottle)
	const npcs = 80
	nodes := startNodes(t, func(c *Config) { c.NPCs = npcs }, "x0z0,x1z0", "x0z1,x1z1")
	defer stopAll(nodes)
	before := npcIDs(pausedCensus(t, nodes))
	if len(before) != npcs {
		t.Fatalf("%d NPCs at start, want %d", len(before), npcs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, mv := range []struct {
		from   *Node
		zone   string
		target string
	}{
		{nodes[0], "x0z0", "n2"},
		{nodes[1], "x0z1", "n1"},
		{nodes[1], "x0z0", "n1"},
	} {
		time.Sleep(300 * time.Millisecond) // the NPCs walk between the moves
		if err := mv.from.MoveZone(ctx, mv.zone, mv.target); err != nil {
			t.Fatalf("move %s to %s: %v", mv.zone, mv.target, err)
		}
		waitFor(t, 10*time.Second, mv.zone+" running on "+mv.target, func() bool {
			for _, n := range nodes {
				if n.NodeID() == mv.target {
					return slices.Contains(n.Zones().IDs(), mv.zone)
				}
			}
			return false
		})
	}
	after := npcIDs(pausedCensus(t, nodes))
	if !maps.Equal(before, after) {
		var gone, new, twice []uint64
		for id := range before {
			if after[id] == 0 {
				gone = append(gone, id)
			}
		}
		for id, k := range after {
			if before[id] == 0 {
				new = append(new, id)
			}
			if k > 1 {
				twice = append(twice, id)
			}
		}
		t.Fatalf("after three handovers: %d NPCs (want the same %d): %d gone, %d new, %d owned twice (%x)", len(after), npcs, len(gone), len(new), len(twice), new)
	}
}

// A zone whose node died is started again with its share of NPCs spawned
// afresh (nothing handed them over), under ids of the new run's own
// generation: not the ids of the dead run's NPCs, some of which may be
// walking in the neighbour zones.
func TestClusterTakenOverZoneSpawnsNewNPCIDs(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(), ignoreThrottle)
	nodes := startNodes(t, func(c *Config) { c.NPCs = 80 }, "x0z0", "x1z0", "auto")
	defer stopAll(nodes)
	ids := func(n *Node, zone string) map[uint64]bool {
		out := map[uint64]bool{}
		inspect(t, n, func(z *sim.Zone) {
			if z.ID() == zone {
				z.Entities(func(e sim.EntityInfo) {
					if e.Owned && e.Kind == sim.KindNPC {
						out[e.ID] = true
					}
				})
			}
		})
		return out
	}
	dead := ids(nodes[1], "x1z0")
	if len(dead) != 20 {
		t.Fatalf("x1z0 holds %d NPCs at start, want its share of 20", len(dead))
	}
	nodes[1].leases.Abandon() // n2 "crashes": nobody renews x1z0
	waitFor(t, 15*time.Second, "the auto node to take x1z0 over", func() bool {
		return slices.Contains(nodes[2].Zones().IDs(), "x1z0")
	})
	fresh := ids(nodes[2], "x1z0")
	if len(fresh) != 20 {
		t.Fatalf("the taken-over x1z0 holds %d NPCs, want its share of 20", len(fresh))
	}
	for id := range fresh {
		if dead[id] {
			t.Fatalf("the taken-over x1z0 spawned NPC %#x, an id of the dead run's NPCs", id)
		}
	}
}

// A handover to a node of an older build, which reads a take request with
// NPCs as a zone id and refuses it (a rolling update), asks again with the
// zone id alone, as older nodes did.
func TestHandoverToAnOlderNodeAsksWithTheZoneAlone(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(), ignoreThrottle)
	nodes := startNodes(t, func(c *Config) { c.NPCs = 40 }, "auto")
	defer stopAll(nodes)
	m := nodes[0].member
	var got [][]byte
	sub, err := m.nc.Subscribe(takeSubject(m.world, "old"), func(r *nats.Msg) {
		got = append(got, slices.Clone(r.Data))
		if _, ok := m.wm.Zone(string(r.Data)); !ok { // as an older node answers
			_ = r.Respond([]byte(fmt.Sprintf("error: zone %q is not in world %q", r.Data, m.wm.Name())))
			return
		}
		_ = r.Respond([]byte("ok"))
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := m.handOver(ctx, "x1z0", []string{"old"}, false, false, nil); err != nil {
		t.Fatalf("handover to an older node: %v", err)
	}
	if len(got) != 2 || got[0][0] != takeMark || string(got[1]) != "x1z0" {
		t.Fatalf("take requests %q, want one with the NPCs, then the zone id alone", got)
	}

	// A target that refuses for another reason (it is stopping) is asked
	// once: its refusal is not an older node's, and the zone stays here.
	var stopping [][]byte
	sub2, err := m.nc.Subscribe(takeSubject(m.world, "stopping"), func(r *nats.Msg) {
		stopping = append(stopping, slices.Clone(r.Data))
		_ = r.Respond([]byte("error: this node is stopping"))
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub2.Unsubscribe() }()
	if _, err := nodes[0].Leases().Claim(ctx, "x1z0"); err != nil {
		t.Fatal(err)
	}
	m.take("x1z0")
	if _, err := m.handOver(ctx, "x1z0", []string{"stopping"}, false, true, nil); err == nil {
		t.Fatal("a handover the target refused reported done")
	}
	if len(stopping) != 1 || stopping[0][0] != takeMark {
		t.Fatalf("take requests to a stopping node %q, want the one with the NPCs alone", stopping)
	}
}
