package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"go.uber.org/goleak"

	"github.com/ghostwire/ghostwire/actors/node"
	"github.com/ghostwire/ghostwire/actors/tokenkey"
	"github.com/ghostwire/ghostwire/cmd/botswarm/internal/metrics"
)

// TestHeavyLossTail is issue 13's heavy-loss run as a scenario that stays
// fixed: bots against an in-process zoned through botswarm's own impairment
// (replication/netsim on each bot's link), 20 % loss each way, 100 ± 30 ms
// one way, 1 % duplicated. (The outside relay of the issue also flipped bits
// in 1 % of the packets and replayed 1 %: the AEAD and the replay window
// drop those, so they are more loss and nothing else.) Through that relay,
// 150 bots for 50 s saw an echo p99 of 826 ms, a maximum of 4.4 s, and one
// move still unacknowledged after the 5 s drain.
//
// It holds here: no move or event lost, every move acknowledged by the end
// of the drain (the server answers a client that repeats applied moves with
// its control ack), and the echo — a guaranteed event to the zone and back,
// two one-way trips at 20 % loss — within 1 s at p99 and 2 s at worst
// (the pure-session version of this run, in virtual time: p99 ≈ 390 ms,
// worst ≈ 840 ms; the rest is the zone's tick and a shared 2-core host).
// 40 bots echo every 250 ms for 15 s (10 bots under -race, with the
// window-overflow checks off: see below), so the run stays within ~25 s.
func TestHeavyLossTail(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(),
		// protoactor's dead-letter throttle ends ~1 s after its last use.
		goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"))
	cfg := node.DefaultConfig()
	cfg.UDPAddr, cfg.HTTPAddr, cfg.NATSListen = "127.0.0.1:0", "", "127.0.0.1:0"
	cfg.DataDir = t.TempDir()
	cfg.NPCs = 20
	if raceEnabled {
		cfg.NPCs = 0
	}
	n, err := node.Start(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop(context.Background())

	bots := 40
	slo := "lost_moves=0,unacked_moves=0,lost_events=0,corrupt_events=0,connect_failures=0,disconnects=0," +
		"echoes>0,echo_p99<1s,echo_max<2s"
	args := []string{"--server", n.PublicAddr().String(), "--key-file", tokenkey.DevPath(cfg.DataDir),
		"--quiet", "--duration", "15s", "--drain", "5s", "--echo-interval", "250ms",
		"--loss", "20%", "--latency", "100ms", "--jitter", "30ms", "--duplicate", "1%"}
	if raceEnabled {
		// The race detector makes bots and server 5–10× dearer: the zone
		// falls behind and a move can outlive the client's 32-move window
		// (~1 s) unacknowledged, which is the host's speed, not the
		// protocol's (TestEndToEndAgainstZoned says the same). What the
		// protocol owes holds at any speed: every move acknowledged by the
		// end, every event echoed, and the echo's tail.
		bots = 10
		slo = "unacked_moves=0,lost_events=0,corrupt_events=0,disconnects=0,echoes>0,echo_p99<1s,echo_max<2s"
		args = append(args, "--allow-violations")
	}
	jsonPath := filepath.Join(t.TempDir(), "run.json")
	args = append(args, "--bots", strconv.Itoa(bots), "--report", jsonPath, "--slo", slo)
	code, stdout, stderr := runCmd(t, noEnv, args...)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	raw, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var r metrics.Report
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("the JSON report does not parse: %v", err)
	}
	for _, inv := range r.Invariants {
		if inv.Checked && !inv.OK && !raceEnabled {
			t.Errorf("invariant %q violated: %s", inv.Name, inv.Detail)
		}
	}
	if nl := float64(r.Metrics["net_loss"]); nl < 0.15 || nl > 0.25 {
		t.Errorf("simulated loss %.3f, want ≈ 20 %%", nl)
	}
	t.Logf("%d echoes: p50 %.0f ms, p99 %.0f ms, max %.0f ms; %d moves (ack p99 %.0f ms, max %.0f ms), %d lost, %d unacknowledged after the drain",
		r.Totals.EventsEchoed, 1000*float64(r.Metrics["echo_p50"]), 1000*float64(r.Metrics["echo_p99"]),
		1000*float64(r.Metrics["echo_max"]), r.Totals.MovesSent, 1000*float64(r.Metrics["ack_p99"]),
		1000*float64(r.Metrics["ack_max"]), r.Totals.MovesLost, r.Totals.MovesUnacked)
	if err := n.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}
