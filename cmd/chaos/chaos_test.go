package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestChaosShort is the short chaos run of `make test`: three real zoned
// processes, botswarm over all three gateways, then a drain (SIGTERM), a
// SIGKILL and a SIGSTOP past a 1 s lease, each of a node holding zones.
// It fails when two nodes owned a zone at one epoch, a paused or dead node
// wrote a lease or a player record after another had claimed its zone, a
// zone of a victim was not owned again within 5 s, a player record
// disagrees with the owners at the end, or the drain disconnected a
// session instead of redirecting it.
//
// It fails too when a client dropped a move from a full window, a session
// that lived to the end left moves unacknowledged, or more moves went
// unacknowledged than a window for each session a dead or paused gateway
// cut off. botswarm's stricter invariants (no correction at all, events,
// hitch) are logged, not judged: a restore from a checkpoint corrects the
// client by design (docs/benchmarks.md#resilience).
func TestChaosShort(t *testing.T) {
	dir := t.TempDir()
	var log bytes.Buffer
	cfg := DefaultConfig()
	cfg.Out, cfg.Log = dir, &log
	cfg.Plan, cfg.Events, cfg.Every, cfg.Warmup, cfg.Tail = []string{ActTerm, ActKill, ActStop}, 3, 8*time.Second, 4*time.Second, 3*time.Second
	cfg.LeaseTTL, cfg.RestartAfter = time.Second, 3*time.Second
	cfg.Bots, cfg.NPCs = 30, 20
	cfg.JudgeBots, cfg.ExpectRedirects = false, true
	res := runChaos(t, cfg, dir, &log, "n1.log", "n2.log", "n3.log", "botswarm.log")
	if len(res.Events) != 3 {
		t.Fatalf("%d events, want 3", len(res.Events))
	}
	// Every victim held zones, so every event is a failover.
	for _, ev := range res.Events {
		if len(ev.Held) == 0 {
			t.Errorf("event %d (%s %s): the victim held no zone", ev.N, ev.Action, ev.Node)
		}
	}
	if len(res.Audit.Failovers) < 3 {
		t.Errorf("%d failovers audited, want one per zone of every victim", len(res.Audit.Failovers))
	}
	if res.Audit.LeaseWrites == 0 || res.Audit.RecordWrites == 0 {
		t.Errorf("the recorder saw %d lease and %d record writes", res.Audit.LeaseWrites, res.Audit.RecordWrites)
	}
	if res.Bots == nil {
		t.Fatal("no botswarm report")
	}
	// The drained node had a third of the bots: they follow its Redirects.
	if res.Bots.total("redirects") == 0 {
		t.Error("the drain redirected no session")
	}
	if res.Bots.total("moves_acked") == 0 {
		t.Error("no move acknowledged")
	}
}

// TestChaosNATSClusterKill: the zoned of a world on three clustered
// nats-servers (every bucket on all three) keep their world when the
// server leading the zones bucket is SIGKILLed: the audit finds nothing,
// no move is lost, and every zone's lease is judged (renewed at its epoch
// after the election, or lost when the new leader expired it first).
func TestChaosNATSClusterKill(t *testing.T) {
	dir := t.TempDir()
	var log bytes.Buffer
	cfg := DefaultConfig()
	cfg.Out, cfg.Log = dir, &log
	cfg.NATSCluster = true
	cfg.Plan, cfg.Events, cfg.Every, cfg.Warmup, cfg.Tail = []string{ActNATSKill}, 1, 15*time.Second, 6*time.Second, 10*time.Second
	cfg.NATSOutage = 3 * time.Second
	cfg.Bots, cfg.NPCs = 30, 20
	res := runChaos(t, cfg, dir, &log, "n1.log", "n2.log", "n3.log", "nats-s1.log", "botswarm.log")
	if len(res.Events) != 1 || res.Events[0].Err != "" || !strings.HasPrefix(res.Events[0].Node, "nats-s") {
		t.Fatalf("events %+v, want one nats-kill of a server", res.Events)
	}
	if len(res.NATS) != 1 || len(res.NATS[0].Renewed)+len(res.NATS[0].Lost) != 4 {
		t.Fatalf("the kill's leases: %+v, want the four zones' judged", res.NATS)
	}
	if res.Bots == nil || res.Bots.total("moves_acked") == 0 {
		t.Fatal("no move acknowledged")
	}
}

// runChaos runs cfg (bounded: 4 minutes), logs its summary and fails t for
// each of its failures; if t fails, its end logs the driver's log and the
// ends of the named logs in dir.
func runChaos(t *testing.T, cfg Config, dir string, log *bytes.Buffer, logs ...string) *Result {
	t.Helper()
	t.Cleanup(func() { // before dir's removal: cleanups run last first
		if !t.Failed() {
			return
		}
		t.Logf("driver log:\n%s", log.String())
		for _, f := range logs {
			if b, err := os.ReadFile(filepath.Join(dir, f)); err == nil {
				t.Logf("%s (last 3000 bytes):\n%s", f, tail(b, 3000))
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	res, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var sum bytes.Buffer
	summary(&sum, res, cfg)
	t.Log(sum.String())
	for _, f := range res.Failures {
		t.Error(f)
	}
	return res
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

func TestHelpNamesEveryFlag(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"--help"}, &out, &errb); code != 0 {
		t.Fatalf("--help: exit %d", code)
	}
	for _, f := range []string{"--out", "--events", "--every", "--actions", "--plan", "--lease-ttl", "--stop-for", "--restart-after",
		"--external-nats", "--expect-redirects", "--judge-bots", "--failover-limit", "--gateways", "--nats-outage", "nats-restart",
		"--nats-cluster", "nats-kill"} {
		if !strings.Contains(errb.String(), f) {
			t.Errorf("--help does not mention %s", f)
		}
	}
	if code := run([]string{"--plan", "nats-restart"}, &out, &errb); code != 2 {
		t.Errorf("nats-restart without --external-nats: exit %d, want 2", code)
	}
	if code := run([]string{"--plan", "nats-kill", "--external-nats"}, &out, &errb); code != 2 {
		t.Errorf("nats-kill without --nats-cluster: exit %d, want 2", code)
	}
	if code := run([]string{"--stop-for", "1s", "--lease-ttl", "3s"}, &out, &errb); code != 2 {
		t.Errorf("--stop-for shorter than the TTL: exit %d, want 2", code)
	}
}
