package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"
)

const usage = `chaos runs three real zoned processes and botswarm on loopback and, every
--every, SIGTERMs, SIGKILLs or SIGSTOPs a random node other than the NATS host
(node n1 embeds NATS; with --external-nats every node joins a standalone
nats-server, which the nats-restart action restarts; with --nats-cluster they
join three clustered servers, and the nats-kill action SIGKILLs the one leading
the zones bucket and starts it again). Killed and terminated
nodes are restarted under the same node id after --restart-after; a stopped
node gets SIGCONT after --stop-for (longer than the lease TTL, so it loses its
zones while paused).

A recorder keeps every write to the zones and players KV buckets (both keep
one revision a key, so a revision replaced before the recorder saw it is
counted in the summary and chaos.json's recorder_missed; a recorder that has
not caught up with both buckets 30 s after the run fails it). The audit
afterwards fails the run when two nodes owned a zone at one epoch, an epoch
went backwards, a node wrote a lease or a player record for a zone another
node had claimed since (a paused node must fence itself), a zone of a
killed, stopped or drained node was not owned again within
--failover-limit, a player record names a node that does not own its zone
at the end, a client dropped a move from a full window, a session that lived
to the end left moves unacknowledged, or more moves went unacknowledged than
one window (64) per session a dead or paused gateway cut off. botswarm's own
invariants (no correction at all, events, views, hitch) fail it only with
--judge-bots: a player restored from a checkpoint is corrected by design
(RPO about a second). Disconnects are
counted per cause and reported; with --expect-redirects, sessions a drain
(SIGTERM) ended fail the run.

Everything lands in --out: n1.log … n3.log, nats.log, botswarm.log,
report.json / report.html (botswarm), chaos.json (events, failovers, audit).

Usage: chaos [flags]

Flags:
`

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run parses args, runs, prints the summary; the exit status: 0 all good,
// 1 a failure found, 2 bad flags or setup.
func run(args []string, stdout, stderr io.Writer) int {
	cfg := DefaultConfig()
	cfg.Log = stdout
	fs := pflag.NewFlagSet("chaos", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
		fmt.Fprint(stderr, "\nExit status: 0 no failure; 1 a failure (named on stdout); 2 bad flags or setup.\n")
	}
	fs.StringVar(&cfg.Out, "out", cfg.Out, "output `DIR`: binaries, data dirs, logs, reports (its data dirs and logs are replaced)")
	fs.StringVar(&cfg.Zoned, "zoned", "", "zoned binary `FILE` (default: go build ./cmd/zoned into --out)")
	fs.StringVar(&cfg.Botswarm, "botswarm", "", "botswarm binary `FILE` (default: go build ./cmd/botswarm into --out)")
	fs.StringVar(&cfg.NATSServer, "nats-server", "", "nats-server binary `FILE` for --external-nats (default: go build github.com/nats-io/nats-server/v2 at go.mod's version into --out)")
	fs.IntVar(&cfg.Events, "events", cfg.Events, "number of events `N`")
	fs.DurationVar(&cfg.Every, "every", cfg.Every, "time `D` between events")
	fs.DurationVar(&cfg.Warmup, "warmup", cfg.Warmup, "bots play for `D` before the first event")
	fs.DurationVar(&cfg.Tail, "tail", cfg.Tail, "bots play for `D` after the last event's slot")
	actions := fs.String("actions", strings.Join(cfg.Actions, ","), "comma-separated `LIST` each event draws its action from: kill (SIGKILL), term (SIGTERM: drain or clean stop), stop (SIGSTOP, SIGCONT after --stop-for), nats-restart (needs --external-nats), nats-kill (SIGKILL the nats-server leading the zones bucket, start it again after --nats-outage; needs --nats-cluster)")
	plan := fs.String("plan", "", "comma-separated `LIST` of actions in order (instead of drawing from --actions; repeats when --events is longer); each picks among the victims that hold zones")
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "random `SEED` for the victims, the actions and botswarm")
	fs.DurationVar(&cfg.LeaseTTL, "lease-ttl", cfg.LeaseTTL, "every node's zone lease TTL `D` (zoned --lease-ttl)")
	fs.DurationVar(&cfg.StopFor, "stop-for", 0, "a SIGSTOPped node gets SIGCONT after `D` (default 2×--lease-ttl + 1s; must exceed the TTL)")
	fs.DurationVar(&cfg.RestartAfter, "restart-after", cfg.RestartAfter, "a killed or terminated node is started again `D` after it exited")
	fs.DurationVar(&cfg.NATSOutage, "nats-outage", cfg.NATSOutage, "nats-restart, nats-kill: the server stays down for `D`")
	zones := fs.String("zones", strings.Join(cfg.Zones, " "), "space-separated `LISTS`: zoned --zones for n1, n2 and n3 (auto nodes take over a dead node's zones)")
	fs.IntVar(&cfg.NPCs, "npcs", cfg.NPCs, "zoned --npcs `N`")
	fs.IntVar(&cfg.Bots, "bots", cfg.Bots, "botswarm --bots `N`, spread over the three gateways")
	fs.DurationVar(&cfg.TokenTimeout, "token-timeout", cfg.TokenTimeout, "botswarm --token-timeout `D`: how long a bot's session waits on a silent (dead, paused) gateway")
	gateways := fs.String("gateways", "", "comma-separated node `LIST` whose gateways the bots use (default all three; n1 alone keeps every session up, so botswarm's invariants judge the zone failovers alone)")
	fs.BoolVar(&cfg.ExternalNATS, "external-nats", false, "run a standalone nats-server (JetStream, loopback) for every node, so the nats-restart action can restart it and n1 can be a victim too")
	fs.BoolVar(&cfg.NATSCluster, "nats-cluster", false, "run three clustered nats-servers (JetStream on each; zoned --kv-replicas 3, so every bucket lives on all three) instead of one standalone server (implies --external-nats), so the nats-kill action can SIGKILL the one leading the zones bucket: its leases go unanswered until the other two elect a leader (4–9 s)")
	fs.BoolVar(&cfg.ExpectRedirects, "expect-redirects", false, "a drain (SIGTERM) redirects its sessions: fail the run when one was disconnected by a drain (botswarm's disconnects_shutdown > 0)")
	fs.BoolVar(&cfg.JudgeBots, "judge-bots", cfg.JudgeBots, "botswarm's invariants other than the disconnect one (moves acknowledged exactly once with no correction, events, views, hitch) fail the run; false: reported only (moves dropped from full windows, left unacknowledged by live sessions, or cut off beyond a window per dead session fail it either way)")
	fs.DurationVar(&cfg.FailoverLimit, "failover-limit", cfg.FailoverLimit, "a zone of a killed, stopped or drained node must be owned again within `D` of the signal")
	fs.DurationVar(&cfg.Ready, "ready", cfg.Ready, "a node must log 'zoned ready' within `D` of its start")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		return 2
	}
	cfg.Actions = splitList(*actions, ",")
	cfg.Plan = splitList(*plan, ",")
	cfg.Zones = splitList(*zones, " ")
	cfg.Gateways = splitList(*gateways, ",")
	if err := cfg.Validate(); err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(stderr, "chaos:", err)
		return 2
	}
	summary(stdout, res, cfg)
	if len(res.Failures) > 0 {
		return 1
	}
	return 0
}

func splitList(s, sep string) []string {
	var out []string
	for _, f := range strings.Split(s, sep) {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// summary prints the figures docs/benchmarks.md quotes.
func summary(w io.Writer, res *Result, cfg Config) {
	fmt.Fprintf(w, "\nchaos: %d events, lease TTL %v, %d bots\n", len(res.Events), cfg.LeaseTTL, cfg.Bots)
	counts := map[string]int{}
	for _, ev := range res.Events {
		counts[ev.Action]++
	}
	fmt.Fprintf(w, "  events: %d kill, %d term, %d stop, %d nats-restart, %d nats-kill\n", counts[ActKill], counts[ActTerm], counts[ActStop], counts[ActNATSRestart], counts[ActNATSKill])
	var owned, moving []time.Duration
	for _, f := range res.Audit.Failovers {
		mv := "no player seen moving"
		if f.Moving >= 0 {
			mv = fmt.Sprintf("players moving after %v (%d of %d)", f.Moving.Round(time.Millisecond), f.Moved, f.Players)
			moving = append(moving, f.Moving)
		}
		ow := "NEVER owned again"
		if f.Owned >= 0 {
			ow = fmt.Sprintf("owned by %s epoch %d after %v", f.NewNode, f.NewEpoch, f.Owned.Round(time.Millisecond))
			owned = append(owned, f.Owned)
		}
		fmt.Fprintf(w, "  failover: event %d %s %s zone %s epoch %d: %s; %s\n", f.Event, f.Action, f.Node, f.Zone, f.OldEpoch, ow, mv)
	}
	ms := func(d time.Duration) string {
		if d < 0 {
			return "-"
		}
		return d.Round(time.Millisecond).String()
	}
	fmt.Fprintf(w, "  failover time, signal → zone owned again: p50 %s, p99 %s, max %s over %d zones\n",
		ms(percentile(owned, 0.5)), ms(percentile(owned, 0.99)), ms(percentile(owned, 1)), len(owned))
	fmt.Fprintf(w, "  failover time, signal → its players moving (first checkpoint with a new move): p50 %s, p99 %s over %d zones\n",
		ms(percentile(moving, 0.5)), ms(percentile(moving, 0.99)), len(moving))
	a := res.Audit
	fmt.Fprintf(w, "  audit: %d lease writes, %d player record writes; %d writes past the fence; %d records written while their zone had no lease\n",
		a.LeaseWrites, a.RecordWrites, a.FencedWrites, a.RecordsWhileUnowned)
	fmt.Fprintf(w, "  the audit's record: %d lease and %d player record revisions replaced before the recorder saw them\n",
		res.RecorderMissed[bucketZones], res.RecorderMissed[bucketPlayers])
	for _, nr := range res.NATS {
		fmt.Fprintf(w, "  nats restart or kill (event %d): outage %.1fs, bots measured round trips in %d of its seconds; leases renewed at the old epoch: %v; lost: %v\n",
			nr.Event, nr.OutageSeconds, nr.PlaySeconds, nr.Renewed, nr.Lost)
	}
	if b := res.Bots; b != nil {
		disrupt := counts[ActKill] + counts[ActStop] + counts[ActTerm]
		per := "-"
		if disrupt > 0 {
			per = fmt.Sprintf("%.0f", float64(b.MovesCut())/float64(disrupt))
		}
		fmt.Fprintf(w, "  botswarm (exit %d): moves sent %d, acked %d, unacked at end %d, unacked at a redirect %d, lost from a full window %d, corrections %d; never acknowledged otherwise %d (%s per kill/stop/term)\n",
			res.BotsExit, b.total("moves_sent"), b.total("moves_acked"), b.total("moves_unacked"), b.total("moves_redirected"), b.total("moves_lost"), b.total("corrections"), b.MovesCut(), per)
		fmt.Fprintf(w, "  sessions: disconnects %d (shutdown %d, timeout %d, kicked %d, other %d), reconnects %d attempted / %d failed, redirects %d\n",
			b.total("disconnects"), b.total("disconnects_shutdown"), b.total("disconnects_timeout"), b.total("disconnects_kicked"), b.total("disconnects_other"),
			b.total("reconnect_attempts"), b.total("reconnect_fails"), b.total("redirects"))
		for _, inv := range b.Invariants {
			fmt.Fprintf(w, "  botswarm invariant %-5v %s: %s\n", inv.OK, inv.Name, inv.Detail)
		}
	}
	if !cfg.JudgeBots && len(res.BotFailures) > 0 {
		fmt.Fprintf(w, "chaos: botswarm invariants failed but not judged (--judge-bots=false): %d\n", len(res.BotFailures))
	}
	if len(res.Failures) == 0 {
		fmt.Fprintln(w, "chaos: PASS")
		return
	}
	fmt.Fprintf(w, "chaos: FAIL (%d)\n", len(res.Failures))
	for _, f := range res.Failures {
		fmt.Fprintln(w, "  -", f)
	}
}
