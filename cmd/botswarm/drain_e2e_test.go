package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ghostwire/ghostwire/actors/node"
	"github.com/ghostwire/ghostwire/actors/tokenkey"
	"github.com/ghostwire/ghostwire/cmd/botswarm/internal/metrics"
)

// TestZonedDrainedMidRunRedirectsTheBots: the node the bots play on stops
// mid-run while other nodes live; it redirects every bot to them and the
// bots follow — counted as redirects, not disconnects — so the run passes
// its disconnects=0 and failed_reconnects=0 targets and the sessions
// invariant, and every echo event comes back exactly once, in order (an
// echo every 50 ms: some are in flight at every redirect). GW_DRAIN_BOTS sets the bot count (default 10; docs/benchmarks.md
// has the drain time at 200: a node with 2 zones and 200 players).
func TestZonedDrainedMidRunRedirectsTheBots(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(),
		goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"))
	var nodes []*node.Node
	defer func() {
		for i := len(nodes) - 1; i >= 0; i-- {
			_ = nodes[i].Stop(context.Background())
		}
	}()
	var keyFile string
	bots := 10
	if v, err := strconv.Atoi(os.Getenv("GW_DRAIN_BOTS")); err == nil && v > 0 {
		bots = v
	}
	// n2, the one drained, runs two zones; n3 (auto) has none to start
	// with and takes one of them in the handover.
	for i, zones := range []string{"x0z0,x1z0", "x0z1,x1z1", "auto"} {
		cfg := node.DefaultConfig()
		cfg.UDPAddr, cfg.HTTPAddr, cfg.NATSListen = "127.0.0.1:0", "", "127.0.0.1:0"
		cfg.DataDir = t.TempDir()
		cfg.NPCs = 0
		cfg.NodeID, cfg.Zones = "n"+string(rune('1'+i)), zones
		if i == 0 {
			keyFile = tokenkey.DevPath(cfg.DataDir)
		} else {
			cfg.NATSURL, cfg.KeyFile = nodes[0].NATSURL(), keyFile
		}
		n, err := node.Start(context.Background(), cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	stopped := make(chan error, 1)
	time.AfterFunc(1500*time.Millisecond, func() {
		began := time.Now()
		err := nodes[1].Stop(context.Background())
		t.Logf("n2 (2 zones, %d players) drained and stopped in %v", bots, time.Since(began))
		stopped <- err
	})
	path := filepath.Join(t.TempDir(), "drained.json")
	code, stdout, stderr := runCmd(t, noEnv, "--server", nodes[1].PublicAddr().String(), "--key-file", keyFile, "--quiet",
		"--bots", strconv.Itoa(bots), "--duration", "4s", "--drain", "1s", "--report", path, "--echo-interval", "50ms",
		"--slo", "disconnects=0,failed_reconnects=0,redirects>="+strconv.Itoa(bots))
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("node stop: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the node did not stop within 10 s")
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	var r metrics.Report
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatal(err)
	}
	tt := r.Totals
	t.Logf("redirects %d, disconnects %d, moves unacknowledged at the redirect %d (resent), at the end %d, corrections %d", tt.Redirects, tt.Disconnects, tt.MovesRedirected, tt.MovesUnacked, tt.Corrections)
	t.Logf("events sent %d, echoed %d, out of order %d, duplicate %d, lost %d", tt.EventsSent, tt.EventsEchoed, tt.EventsOutOfOrder, tt.EventsDuplicate, tt.EventsLost)
	if tt.Redirects != uint64(bots) || tt.Disconnects != 0 || tt.ConnectFails != 0 || tt.ReconnectFails != 0 || tt.Quits != uint64(bots) {
		t.Fatalf("want every bot's redirect followed, no disconnect or failed (re)connect, 10 quits at the end: %+v\nstdout:\n%s", tt, stdout)
	}
	// Every echo comes back once and in order across the switch: the bots
	// continue their event streams, the zone drops what it applied before
	// and holds the echoes for the new connection (docs/protocol.md §7.20).
	if tt.EventsEchoed != tt.EventsSent || tt.EventsOutOfOrder != 0 || tt.EventsDuplicate != 0 || tt.EventsLost != 0 || tt.MovesUnacked != 0 {
		t.Fatalf("events sent %d, echoed %d, out of order %d, twice %d, lost %d; moves unacknowledged at the end %d: want every echo once, in order, every move acknowledged",
			tt.EventsSent, tt.EventsEchoed, tt.EventsOutOfOrder, tt.EventsDuplicate, tt.EventsLost, tt.MovesUnacked)
	}
	if code != exitOK {
		t.Fatalf("drained mid-run: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitOK, stdout, stderr)
	}
}
