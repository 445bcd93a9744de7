package node

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// startCluster (stop them with stopAll) starts three nodes of one world on loopback: the first
// embeds NATS, the others join it with the first one's token key; zones
// split x0z0 | x1z0 | x0z1,x1z1, so every border of the default world but
// one is a process border.
func startCluster(t *testing.T, npcs int) []*Node {
	t.Helper()
	split := []string{"x0z0", "x1z0", "x0z1,x1z1"}
	var nodes []*Node
	for i, zones := range split {
		cfg := testConfig(t)
		cfg.NPCs = npcs
		cfg.spawn = nearBorder
		cfg.Zones = zones
		cfg.NodeID = "n" + string(rune('1'+i))
		if i > 0 {
			cfg.NATSURL = nodes[0].NATSURL()
			cfg.KeyFile = filepath.Join(nodes[0].cfg.DataDir, "token.key")
		}
		n, err := Start(context.Background(), cfg, nil)
		if err != nil {
			for _, n := range nodes {
				_ = n.Stop(context.Background())
			}
			t.Fatalf("node %d: %v", i+1, err)
		}
		nodes = append(nodes, n)
	}
	for _, n := range nodes {
		if got := strings.Join(n.Zones().IDs(), ","); got != split[indexOf(nodes, n)] {
			stopAll(nodes)
			t.Fatalf("node %s runs %q, want %q", n.NodeID(), got, split[indexOf(nodes, n)])
		}
	}
	return nodes
}

// stopAll stops the nodes, the NATS-embedding first one last.
func stopAll(nodes []*Node) {
	for i := len(nodes) - 1; i >= 0; i-- {
		_ = nodes[i].Stop(context.Background())
	}
}

func indexOf(ns []*Node, n *Node) int {
	for i := range ns {
		if ns[i] == n {
			return i
		}
	}
	return -1
}

// The proof for one world over three processes: clients dial the
// three gateways round-robin, whichever node runs their zone, and walk
// across every border (process borders included). Afterwards: exactly one
// owner per player, every move applied exactly once, NPCs conserved, ghost
// ids stable across handoffs, players near a border see what is across it
// — the same checks as on one node.
func TestClusterThreeNodesAcrossBorders(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(),
		goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"))
	clients := 200
	if raceEnabled {
		clients = 45
	}
	const npcs = 400
	nodes := startCluster(t, npcs)
	defer stopAll(nodes)
	// Under the race detector the embedded nats-server is instrumented too
	// and every message between the nodes is many times slower: replicas
	// can come late enough for a ghost to be re-created. Ghost-id
	// stability across process borders is checked at full scale without
	// it (make scale).
	walkAcrossBorders(t, nodes, clients, npcs, 8*time.Second, 10, !raceEnabled)
	var handoffs, remote, remoteNanos uint64
	for _, n := range nodes {
		m := n.Bridge().Metrics()
		handoffs += m.Handoffs.Load()
		remote += m.RemoteInputs.Load()
		remoteNanos += m.RemoteInputNanos.Load()
	}
	if remote > 0 {
		t.Logf("%d inputs crossed to another node, %v on average", remote, time.Duration(remoteNanos/remote))
	}
	if handoffs == 0 {
		t.Fatal("no cross-process handoff committed: the walk did not cross a process border")
	}
	t.Logf("%d cross-process handoffs", handoffs)
}
