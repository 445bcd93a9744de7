package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ghostwire/ghostwire/actors/node"
	"github.com/ghostwire/ghostwire/client"
	"github.com/ghostwire/ghostwire/replication/move"
	"github.com/ghostwire/ghostwire/zones/sim"
)

// The admin commands against three nodes: the list calls merge every
// node's answer, and move takes a connected, walking client's player into
// a zone of another process and back (the cluster handoff) while it keeps
// playing: every move it sent is applied exactly once, one zone owns it,
// its session never ends.
func TestAdminThreeNodes(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(), ignoreThrottle)
	split := []struct{ id, zones string }{{"n1", "x0z0"}, {"n2", "x1z0"}, {"n3", "x0z1,x1z1"}}
	nodes, dir, url := startWorld(t, split)
	defer stopWorld(nodes)

	// Player 4 joins x0z0 (ZoneFor) through n1's gateway and walks.
	w := walkIn(t, nodes[0], 4, 60)
	defer w.s.Close(context.Background())
	s, sent, sendErr := w.s, &w.sent, &w.sendErr

	var nodeRows []nodeRow
	waitUntil(t, 5*time.Second, "three nodes listed", func() bool {
		nodeRows = nil
		ctlJSON(t, &nodeRows, url, dir, "nodes")
		return len(nodeRows) == 3
	})
	// Whichever node takes a call (one of a queue group) knows all three:
	// ask more often than there are nodes.
	for range 8 {
		var again []nodeRow
		ctlJSON(t, &again, url, dir, "nodes")
		if len(again) != 3 {
			t.Fatalf("nodes: %d listed, want 3 whichever node answers: %+v", len(again), again)
		}
	}
	for i, r := range nodeRows {
		if r.Node != split[i].id || len(r.Zones) == 0 || r.UDPAddr == "" || r.Auto || strings.Join(r.Listed, ",") != split[i].zones {
			t.Fatalf("nodes: %+v", nodeRows)
		}
	}
	var zones []map[string]any
	ctlJSON(t, &zones, url, dir, "zones")
	owner := map[string]any{"x0z0": "n1", "x1z0": "n2", "x0z1": "n3", "x1z1": "n3"}
	if len(zones) != 4 {
		t.Fatalf("zones: %v", zones)
	}
	for _, z := range zones {
		if z["node"] != owner[z["zone"].(string)] {
			t.Fatalf("zone %v: want node %v", z, owner[z["zone"].(string)])
		}
	}
	var p playerRow
	waitUntil(t, 5*time.Second, "player 4 in x0z0 on n1", func() bool {
		ctlJSON(t, &p, url, dir, "player", "4")
		return p.Zone == "x0z0" && p.Node == "n1" && p.GatewayNode == "n1"
	})

	// Into n3's x1z1 (a process border), then back to n1's x0z0 at a
	// given position: the gateway stays on n1, the entity moves.
	// The client keeps walking before, between and after the moves.
	walk := func(moves uint64) {
		t.Helper()
		from := sent.Load()
		waitUntil(t, 5*time.Second, "the client to walk on", func() bool { return sent.Load() >= from+moves })
	}
	walk(10)
	for _, step := range []struct {
		args       []string
		zone, node string
	}{
		{[]string{"move", "4", "--to", "x1z1"}, "x1z1", "n3"},
		{[]string{"move", "4", "--to", "x1z0", "--pos", "300,-300"}, "x1z0", "n2"},
	} {
		var moved playerRow
		ctlJSON(t, &moved, url, dir, step.args...)
		if moved.Zone != step.zone || moved.Node != step.node || moved.GatewayNode != "n1" || moved.Frozen {
			t.Fatalf("zonectl %v: %+v, want zone %s on node %s, gateway n1", step.args, moved, step.zone, step.node)
		}
		var listed []playerRow
		ctlJSON(t, &listed, url, dir, "players", "--node", step.node)
		if len(listed) != 1 || listed[0].Player != 4 || listed[0].Zone != step.zone {
			t.Fatalf("players --node %s: %+v", step.node, listed)
		}
		if err := s.Err(); err != nil {
			t.Fatalf("the client's session ended during the move: %v", err)
		}
		walk(10)
	}
	w.stop()

	// Exactly once: every move acknowledged, applied once by the zones in
	// all, the newest by the one zone that owns the player.
	n := sent.Load()
	waitUntil(t, 5*time.Second, "every move acknowledged", func() bool { return s.Stats().Moves.Acked == n })
	if st := s.Stats().Moves; st.Dropped != 0 {
		t.Fatalf("client dropped %d moves", st.Dropped)
	}
	var applied, lost uint64
	var owners []string
	for _, nd := range nodes {
		if err := nd.Zones().Inspect(5*time.Second, func(z *sim.Zone) {
			st := z.Stats()
			applied += st.MovesApplied
			lost += st.MovesLost
			if e, ok := z.Entity(4); ok && e.Owned {
				owners = append(owners, z.ID())
				if e.LastApplied != n {
					t.Errorf("zone %s applied up to move %d, the client sent %d", z.ID(), e.LastApplied, n)
				}
			}
		}); err != nil {
			t.Fatal(err)
		}
	}
	if applied != n || lost != 0 {
		t.Fatalf("zones applied %d moves (lost %d); the client sent %d: want each exactly once", applied, lost, n)
	}
	if len(owners) != 1 || owners[0] != "x1z0" {
		t.Fatalf("player 4 owned by %v, want x1z0 only", owners)
	}
	if e := sendErr.Load(); e != nil {
		t.Fatalf("SendMove: %v", e)
	}
	t.Logf("%d moves sent across two cross-process moves, each applied once", n)
	var st statsRow
	ctlJSON(t, &st, url, dir, "stats")
	if st.Nodes != 3 || st.Zones != 4 || st.RemoteHandoffs < 2 || st.Players != 1 || st.Connections != 1 {
		t.Fatalf("stats: %+v (want 2 remote handoffs at least)", st)
	}

	// n1 embeds the NATS server n2 and n3 use: drained, it would stop NATS
	// under them, and the zones it handed them with it. Refused, with
	// --last too, and n1 plays on.
	// Every call is refused for that reason; the nodes it names are the
	// live ones as the directory says, and a node whose heartbeat is a few
	// seconds late on a starved host is not live for that moment (CI under
	// -race beside make chaos: "that n3 use"), so the list may take a few
	// calls to name both.
	for _, args := range [][]string{{"drain", "n1"}, {"drain", "n1", "--last"}} {
		waitUntil(t, 10*time.Second, fmt.Sprintf("zonectl %v refused, naming n2 and n3", args), func() bool {
			r := ctl(t, url, dir, args...)
			if r.code != 1 || !strings.Contains(r.stderr, "node n1 embeds the NATS server that ") {
				t.Fatalf("zonectl %v: want exit 1 and the reason, got %+v", args, r)
			}
			return strings.Contains(r.stderr, "that n2, n3 use") && strings.Contains(r.stderr, "drain n2, n3 first")
		})
	}
	select {
	case <-nodes[0].Done():
		t.Fatal("a refused drain stopped n1")
	case <-time.After(200 * time.Millisecond):
	}
	if r := ctl(t, url, dir, "stats"); r.code != 0 {
		t.Fatalf("stats after a refused drain: %+v", r)
	}
}

// zonectl move-zone hands a zone to another node while a player plays in
// it through the first node's gateway: the player stays connected and
// every move is applied exactly once; a zone or node that does not exist
// is refused.
func TestAdminMoveZone(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(), ignoreThrottle)
	nodes, dir, url := startWorld(t, []struct{ id, zones string }{{"n1", "x0z0,x1z0"}, {"n2", "x0z1,x1z1"}})
	defer stopWorld(nodes)
	// Player 4 joins x0z0 (ZoneFor) through n1's gateway and walks.
	w := walkIn(t, nodes[0], 4, 30)
	defer w.s.Close(context.Background())
	s, sent := w.s, &w.sent
	waitUntil(t, 5*time.Second, "the client to walk", func() bool { return sent.Load() >= 10 })
	for _, bad := range [][]string{{"move-zone", "x9z9", "--to", "n2"}, {"move-zone", "x0z0", "--to", "nobody"}, {"move-zone", "x0z0"}} {
		if r := ctl(t, url, dir, bad...); r.code == 0 {
			t.Fatalf("zonectl %v succeeded: %+v", bad, r)
		}
	}
	if r := ctl(t, url, dir, "move-zone", "x0z0", "--to", "n1"); r.code != 0 || !strings.Contains(r.stdout, "zone x0z0 already runs on n1 (epoch") || !strings.Contains(r.stdout, "nothing moved") {
		t.Fatalf("move-zone to its owner: %+v", r)
	}
	r := ctl(t, url, dir, "move-zone", "x0z0", "--to", "n2")
	if r.code != 0 || !strings.Contains(r.stdout, "zone x0z0 moved from n1 to n2 (owner n2") {
		t.Fatalf("move-zone: %+v", r)
	}
	from := sent.Load()
	waitUntil(t, 5*time.Second, "the client to walk on", func() bool { return sent.Load() >= from+10 })
	w.stop()
	n := sent.Load()
	var last, lost uint64
	waitUntil(t, 5*time.Second, "every move applied by the new owner", func() bool {
		// A look that timed out is no answer (and it still runs later,
		// writing last and lost while this reads them): fail on it.
		if err := nodes[1].Zones().Inspect(20*time.Second, func(z *sim.Zone) {
			if e, ok := z.Entity(4); ok && e.Owned && z.ID() == "x0z0" {
				last, lost = e.LastApplied, z.Stats().MovesLost
			}
		}); err != nil {
			t.Fatalf("n2: %v", err)
		}
		return last == n
	})
	if lost != 0 {
		t.Fatalf("%d moves skipped as lost", lost)
	}
	if err := s.Err(); err != nil {
		t.Fatalf("the session ended: %v", err)
	}
	var zones []map[string]any
	ctlJSON(t, &zones, url, dir, "zones")
	for _, z := range zones {
		if z["zone"] == "x0z0" && z["node"] != "n2" {
			t.Fatalf("zones: x0z0 on %v after the move", z["node"])
		}
	}
}

// startWorld starts one node per split entry: the first embeds NATS, the
// others join it with its node credentials and token key. It returns the
// nodes, the first node's data directory (zonectl's dev credentials) and
// its NATS URL without credentials.
func startWorld(t *testing.T, split []struct{ id, zones string }) ([]*node.Node, string, string) {
	t.Helper()
	var nodes []*node.Node
	var dir string
	for i, s := range split {
		cfg := nodeConfig(t, s.id, s.zones)
		if i == 0 {
			dir = cfg.DataDir
		} else {
			cfg.NATSURL = bareURL(t, nodes[0])
			cfg.NATSCreds = filepath.Join(dir, node.NodeCredsFile)
			cfg.KeyFile = filepath.Join(dir, "token.key")
		}
		nodes = append(nodes, startNode(t, cfg))
	}
	return nodes, dir, bareURL(t, nodes[0])
}

func stopWorld(nodes []*node.Node) {
	for i := len(nodes) - 1; i >= 0; i-- {
		_ = nodes[i].Stop(context.Background())
	}
}

// walker is a client walking at 20 moves a second until stop.
type walker struct {
	s       *client.Session
	sent    atomic.Uint64
	sendErr atomic.Value
	done    chan struct{}
	wg      sync.WaitGroup
}

// walkIn connects player through gw and starts it walking.
func walkIn(t *testing.T, gw *node.Node, player uint64, forward int8) *walker {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	s, err := client.Dial(ctx, gw.PublicAddr().String(), mintFor(t, gw, player), client.WithManualInput())
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	w := &walker{s: s, done: make(chan struct{})}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-w.done:
				return
			case <-tick.C:
			}
			if _, err := s.SendMove(move.Move{Dt: 48, Forward: forward, Yaw: 1000}); err != nil {
				w.sendErr.Store(err.Error())
				return
			}
			w.sent.Add(1)
		}
	}()
	return w
}

func (w *walker) stop() {
	close(w.done)
	w.wg.Wait()
}
