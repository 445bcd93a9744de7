package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ghostwire/ghostwire/actors/admin/adminclient"
	"github.com/ghostwire/ghostwire/replication/move"
)

// Config is one chaos run. Flags fill it (flags.go); DefaultConfig is
// `make chaos`.
type Config struct {
	Out string // working dir: binaries, data dirs, logs, reports
	// Prebuilt binaries; empty: go build them into Out.
	Zoned, Botswarm, NATSServer string

	Events int           // how many events
	Every  time.Duration // between events
	Warmup time.Duration // bots playing before the first event
	Tail   time.Duration // bots playing after the last event
	// Actions: the pool a random action is drawn from per event; Plan, when
	// set, is the exact sequence instead.
	Actions []string
	Plan    []string
	Seed    uint64

	LeaseTTL     time.Duration
	StopFor      time.Duration // SIGSTOP → SIGCONT
	RestartAfter time.Duration // exit → restart
	NATSOutage   time.Duration // nats-server down for this long
	Zones        []string      // --zones per node
	NPCs         int

	Bots         int
	TokenTimeout time.Duration
	// Gateways: the nodes whose gateways the bots use (empty: all three).
	// Only n1 keeps every session up through the events (n1 is never a
	// victim with the embedded NATS), so botswarm's invariants then judge
	// the zone failovers alone.
	Gateways []string

	ExternalNATS bool
	// NATSCluster: three clustered nats-servers (JetStream, every bucket
	// on all three: zoned --kv-replicas 3) instead of one; implies
	// ExternalNATS. The nats-kill action SIGKILLs the one leading the zones
	// bucket's stream.
	NATSCluster     bool
	ExpectRedirects bool
	// JudgeBots: botswarm's invariants other than the disconnect one
	// (moves exactly once with no correction, events, views, hitch) fail
	// the run. Off (the default), they are reported only: a player
	// restored from a checkpoint up to a second old is corrected (the
	// RPO), a handoff across a failover waits for it, and guaranteed
	// events in flight to a dead zone are not exactly once (see
	// docs/benchmarks.md#resilience). The move invariants are
	// judged either way (BotReport.moveFailures).
	JudgeBots     bool
	FailoverLimit time.Duration
	Ready         time.Duration // bound on a node's start
	Log           io.Writer
}

// DefaultConfig is `make chaos`: a few minutes, an event every 20 s.
func DefaultConfig() Config {
	return Config{
		Out: "chaos-out", Events: 9, Every: 20 * time.Second, Warmup: 10 * time.Second, Tail: 15 * time.Second,
		Actions: []string{ActTerm, ActKill, ActStop}, Seed: 1,
		LeaseTTL: 3 * time.Second, RestartAfter: time.Second, NATSOutage: 2 * time.Second,
		Zones: []string{"x0z0", "auto", "auto"}, NPCs: 60, Bots: 90, TokenTimeout: 4 * time.Second,
		FailoverLimit: 5 * time.Second, Ready: 60 * time.Second, Log: os.Stdout,
	}
}

// Validate checks what flags cannot.
func (c *Config) Validate() error {
	if c.NATSCluster {
		c.ExternalNATS = true
	}
	if len(c.Zones) != 3 {
		return errors.New("chaos: --zones needs three entries, one per node")
	}
	if c.Events < 0 || c.Every <= 0 || c.LeaseTTL < 300*time.Millisecond {
		return errors.New("chaos: --events ≥ 0, --every > 0, --lease-ttl ≥ 300ms")
	}
	for _, a := range append(slices.Clone(c.Actions), c.Plan...) {
		switch a {
		case ActKill, ActTerm, ActStop:
		case ActNATSRestart:
			if !c.ExternalNATS || c.NATSCluster {
				return errors.New("chaos: nats-restart needs --external-nats without --nats-cluster (node 1's embedded NATS cannot restart without node 1; a cluster's server is killed with nats-kill)")
			}
		case ActNATSKill:
			if !c.NATSCluster {
				return errors.New("chaos: nats-kill needs --nats-cluster")
			}
		default:
			return fmt.Errorf("chaos: unknown action %q (want kill, term, stop, nats-restart, nats-kill)", a)
		}
	}
	for _, g := range c.Gateways {
		if g != "n1" && g != "n2" && g != "n3" {
			return fmt.Errorf("chaos: --gateways: unknown node %q (n1, n2, n3)", g)
		}
	}
	if len(c.Actions) == 0 && len(c.Plan) == 0 && c.Events > 0 {
		return errors.New("chaos: no actions")
	}
	if c.StopFor == 0 {
		c.StopFor = 2*c.LeaseTTL + time.Second
	}
	if c.StopFor <= c.LeaseTTL {
		return fmt.Errorf("chaos: --stop-for %v must be longer than --lease-ttl %v (the point is a node that lost its lease while paused)", c.StopFor, c.LeaseTTL)
	}
	return nil
}

// Result is what a run found.
type Result struct {
	Events   []Event       `json:"events"`
	Audit    Audit         `json:"audit"`
	Bots     *BotReport    `json:"botswarm"`
	BotsExit int           `json:"botswarm_exit"`
	NATS     []NATSRestart `json:"nats_restarts,omitempty"`
	Failures []string      `json:"failures"` // everything that fails the run
	// BotFailures: botswarm's failed invariants (in Failures too when
	// Config.JudgeBots).
	BotFailures []string        `json:"botswarm_failures"`
	Nodes       map[string]Node `json:"nodes"`
	RecordedAt  time.Time       `json:"recorded_at"`
	// RecorderMissed: by bucket, the revisions removed before the
	// recorder saw them (Recorder.Missed): writes the audit could not check.
	RecorderMissed map[string]uint64 `json:"recorder_missed"`
}

// Node is one zoned's addresses.
type Node struct {
	UDP  string `json:"udp"`
	HTTP string `json:"http"`
	Log  string `json:"log"`
}

// NATSRestart is what one restart of the standalone NATS did to the leases.
type NATSRestart struct {
	Event int `json:"event"`
	// Renewed: zones whose owner renewed its lease at the same epoch after
	// NATS came back (the lease survived the outage). Lost: zones that
	// changed epoch (their owner fenced itself, someone claimed them).
	Renewed []string `json:"renewed"`
	Lost    []string `json:"lost"`
	// PlaySeconds: seconds of the outage in which the bots still measured
	// round trips (local play goes on without NATS), of OutageSeconds.
	PlaySeconds   int     `json:"play_seconds"`
	OutageSeconds float64 `json:"outage_seconds"`
}

type cluster struct {
	cfg    Config
	nodes  []*zonedNode
	nats   *proc
	natsAt string // host:port
	// natsCl, natsClAt: the three servers of --nats-cluster (nats is nil)
	// and their client addresses; server i is named s<i+1>.
	natsCl   []*proc
	natsClAt []string
	key      string // token key file
	creds    string // recorder credentials ("" for the standalone NATS)
	rec      *Recorder
	rng      *mrand.Rand
	logf     func(format string, args ...any)
	t0       time.Time
}

type zonedNode struct {
	id         string
	udp, http  int
	p          *proc
	nonNATSHst bool
}

// Run runs the whole thing. It returns an error for a setup failure (no
// binary, a node that never got ready); what the audit finds is in
// Result.Failures.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	out, err := filepath.Abs(cfg.Out)
	if err != nil {
		return nil, err
	}
	cfg.Out = out
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	c := &cluster{cfg: cfg, rng: mrand.New(mrand.NewPCG(cfg.Seed, 0x6368616f73)), t0: time.Now()}
	c.logf = func(format string, args ...any) {
		fmt.Fprintf(cfg.Log, "chaos %6.1fs  %s\n", time.Since(c.t0).Seconds(), fmt.Sprintf(format, args...))
	}
	if err := c.build(ctx); err != nil {
		return nil, err
	}
	defer c.shutdown()
	if err := c.startAll(ctx); err != nil {
		return nil, err
	}
	res := &Result{Nodes: map[string]Node{}}
	for _, n := range c.nodes {
		res.Nodes[n.id] = Node{UDP: fmt.Sprintf("127.0.0.1:%d", n.udp), HTTP: fmt.Sprintf("127.0.0.1:%d", n.http), Log: n.p.logPath}
	}

	// botswarm plays through every event and the tail.
	dur := cfg.Warmup + time.Duration(cfg.Events)*cfg.Every + cfg.Tail
	bots, err := c.startBots(dur)
	if err != nil {
		return nil, err
	}
	c.logf("botswarm: %d bots for %v", cfg.Bots, dur)

	start := time.Now()
	for i := 0; i < cfg.Events; i++ {
		at := start.Add(cfg.Warmup + time.Duration(i)*cfg.Every)
		select {
		case <-ctx.Done():
			i = cfg.Events
			continue
		case <-time.After(time.Until(at)):
		}
		if !bots.running() {
			res.Failures = append(res.Failures, "botswarm exited before the events were done")
			break
		}
		action := c.pick(i)
		ev := c.do(ctx, i+1, action)
		res.Events = append(res.Events, ev)
	}

	// Wait for botswarm (bounded), let the last checkpoints land.
	st, ok := bots.wait(time.Until(start.Add(dur)) + 60*time.Second)
	if !ok {
		st = bots.stop(5 * time.Second)
		res.Failures = append(res.Failures, "botswarm did not finish in time: "+st)
	}
	res.BotsExit = exitCode(bots)
	c.logf("botswarm: %s", st)
	time.Sleep(c.cfg.LeaseTTL + 2*time.Second)
	cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	if err := c.rec.CaughtUp(cctx); err != nil {
		res.Failures = append(res.Failures, "the audit's record is incomplete: "+err.Error())
	}
	cancel()
	res.RecordedAt = time.Now()
	writes := c.rec.Writes()
	res.RecorderMissed = c.rec.Missed()
	for _, n := range c.nodes {
		if st, bad := n.p.unexpectedExit(); bad {
			res.Failures = append(res.Failures, fmt.Sprintf("node %s exited on its own: %s (see %s)", n.id, st, n.p.logPath))
		}
	}
	c.shutdown()

	res.Audit = audit(writes, res.Events, cfg.FailoverLimit, true)
	res.Failures = append(res.Failures, res.Audit.Violations...)
	for _, ev := range res.Events {
		if ev.Err != "" {
			res.Failures = append(res.Failures, fmt.Sprintf("event %d (%s %s): %s", ev.N, ev.Action, ev.Node, ev.Err))
		}
	}
	br, err := readBotReport(filepath.Join(out, "report.json"))
	if err != nil {
		res.Failures = append(res.Failures, "botswarm report: "+err.Error())
	} else {
		res.Bots = br
		res.BotFailures = br.failures(cfg.ExpectRedirects)
		res.Failures = append(res.Failures, br.moveFailures(move.DefaultWindow)...)
		if cfg.JudgeBots {
			res.Failures = append(res.Failures, res.BotFailures...)
		}
		for _, ev := range res.Events {
			if ev.Action == ActNATSRestart || ev.Action == ActNATSKill {
				res.NATS = append(res.NATS, natsRestart(ev, writes, br))
			}
		}
	}
	if err := writeJSON(filepath.Join(out, "chaos.json"), res); err != nil {
		return res, err
	}
	return res, nil
}

// pick chooses event i's action.
func (c *cluster) pick(i int) string {
	if len(c.cfg.Plan) > 0 {
		return c.cfg.Plan[i%len(c.cfg.Plan)]
	}
	return c.cfg.Actions[c.rng.IntN(len(c.cfg.Actions))]
}

// do carries out one event and waits until the cluster has the node back.
func (c *cluster) do(ctx context.Context, n int, action string) Event {
	ev := Event{N: n, Action: action}
	if action == ActNATSRestart {
		ev.Node = "nats"
		ev.At = time.Now()
		c.logf("event %d: restart nats-server (down for %v)", n, c.cfg.NATSOutage)
		st := c.nats.stop(10 * time.Second)
		ev.Gone, ev.Status = time.Now(), st
		time.Sleep(c.cfg.NATSOutage)
		if err := c.nats.start(); err != nil {
			ev.Err = err.Error()
			return ev
		}
		if err := waitTCP(ctx, c.natsAt, 30*time.Second); err != nil {
			ev.Err = err.Error()
			return ev
		}
		ev.Back = time.Now()
		c.logf("event %d: nats-server back after %v", n, ev.Back.Sub(ev.At).Round(time.Millisecond))
		return ev
	}
	if action == ActNATSKill {
		return c.natsKill(ctx, n)
	}
	var cands []*zonedNode
	for _, z := range c.nodes {
		if z.nonNATSHst && z.p.running() {
			cands = append(cands, z)
		}
	}
	if len(cands) == 0 {
		ev.Err = "no node to pick"
		return ev
	}
	// A fixed plan is a proof of failover: it picks among the nodes that
	// hold zones (a random draw may hit a node that holds none).
	if len(c.cfg.Plan) > 0 {
		owners := c.rec.Owners()
		holders := slices.DeleteFunc(slices.Clone(cands), func(z *zonedNode) bool {
			for _, w := range owners {
				if w.Node == z.id {
					return false
				}
			}
			return true
		})
		if len(holders) > 0 {
			cands = holders
		}
	}
	v := cands[c.rng.IntN(len(cands))]
	ev.Node = v.id
	ev.Held = map[string]uint64{}
	for z, w := range c.rec.Owners() {
		if w.Node == v.id {
			ev.Held[z] = w.Epoch
		}
	}
	c.logf("event %d: %s %s (holds %v)", n, action, v.id, ev.Held)
	switch action {
	case ActStop:
		ev.At = time.Now()
		if err := v.p.signal(syscall.SIGSTOP, false); err != nil {
			ev.Err = err.Error()
			return ev
		}
		time.Sleep(c.cfg.StopFor)
		if err := v.p.signal(syscall.SIGCONT, false); err != nil {
			ev.Err = err.Error()
			return ev
		}
		ev.Gone, ev.Back = time.Now(), time.Now()
		c.logf("event %d: SIGCONT %s after %v", n, v.id, c.cfg.StopFor)
		return ev
	case ActKill, ActTerm:
		sig, grace := syscall.SIGKILL, 10*time.Second
		if action == ActTerm {
			sig, grace = syscall.SIGTERM, 5*time.Second+c.cfg.LeaseTTL+10*time.Second
		}
		ev.At = time.Now()
		if err := v.p.signal(sig, true); err != nil {
			ev.Err = err.Error()
			return ev
		}
		st, ok := v.p.wait(grace)
		if !ok {
			ev.Err = fmt.Sprintf("did not exit within %v of %v; SIGKILLed", grace, sig)
			st = v.p.stop(time.Second)
		}
		ev.Gone, ev.Status = time.Now(), st
		c.logf("event %d: %s gone after %v (%s)", n, v.id, ev.Gone.Sub(ev.At).Round(time.Millisecond), st)
		time.Sleep(c.cfg.RestartAfter)
		if err := c.startNode(ctx, v); err != nil {
			ev.Err = err.Error()
			return ev
		}
		ev.Back = time.Now()
		c.logf("event %d: %s ready again after %v", n, v.id, ev.Back.Sub(ev.At).Round(time.Millisecond))
	}
	return ev
}

// build compiles what was not given, once, into Out.
func (c *cluster) build(ctx context.Context) error {
	root, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		return fmt.Errorf("chaos: go list -m (run inside the ghostwire module, or give --zoned and --botswarm): %w", err)
	}
	dir := strings.TrimSpace(string(root))
	for _, b := range []struct {
		dst  *string
		pkg  string
		need bool
	}{
		{&c.cfg.Zoned, "github.com/ghostwire/ghostwire/cmd/zoned", true},
		{&c.cfg.Botswarm, "github.com/ghostwire/ghostwire/cmd/botswarm", true},
		{&c.cfg.NATSServer, "github.com/nats-io/nats-server/v2", c.cfg.ExternalNATS},
	} {
		if *b.dst != "" || !b.need {
			continue
		}
		bin := filepath.Join(c.cfg.Out, filepath.Base(strings.TrimSuffix(b.pkg, "/v2")))
		cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, b.pkg)
		cmd.Dir = dir
		if o, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("chaos: go build %s: %v\n%s", b.pkg, err, o)
		}
		*b.dst = bin
	}
	c.logf("built zoned, botswarm%s into %s", map[bool]string{true: ", nats-server", false: ""}[c.cfg.ExternalNATS], c.cfg.Out)
	return nil
}

// startAll starts NATS (standalone or in n1), the nodes and the recorder.
func (c *cluster) startAll(ctx context.Context) error {
	out := c.cfg.Out
	for _, d := range []string{"data-n1", "data-n2", "data-n3", "nats-store", "nats-store-s1", "nats-store-s2", "nats-store-s3"} {
		if err := os.RemoveAll(filepath.Join(out, d)); err != nil {
			return err
		}
	}
	for _, f := range []string{"n1.log", "n2.log", "n3.log", "nats.log", "nats-s1.log", "nats-s2.log", "nats-s3.log", "botswarm.log", "report.json", "chaos.json"} {
		_ = os.Remove(filepath.Join(out, f))
	}
	var url string
	natsPort := 0 // the standalone or embedded server's (the cluster's servers pick their own)
	if !c.cfg.NATSCluster {
		p, err := freePort("tcp")
		if err != nil {
			return err
		}
		natsPort, c.natsAt = p, fmt.Sprintf("127.0.0.1:%d", p)
		url = "nats://" + c.natsAt
	}
	if c.cfg.NATSCluster {
		var err error
		if url, err = c.startNATSCluster(ctx); err != nil {
			return err
		}
	} else if c.cfg.ExternalNATS {
		c.nats = &proc{name: "nats-server", bin: c.cfg.NATSServer, logPath: filepath.Join(out, "nats.log"),
			args: []string{"-a", "127.0.0.1", "-p", strconv.Itoa(natsPort), "-js", "-sd", filepath.Join(out, "nats-store")}}
		if err := c.nats.start(); err != nil {
			return err
		}
		if err := waitTCP(ctx, c.natsAt, 30*time.Second); err != nil {
			return err
		}
	} else {
		c.key = filepath.Join(out, "data-n1", "token.key")
		// The admin user may only call gwadmin.>; reading the buckets takes
		// the node user, as the nodes read them.
		c.creds = filepath.Join(out, "data-n1", "node.creds")
	}
	if c.cfg.ExternalNATS {
		key := make([]byte, 32)
		_, _ = rand.Read(key)
		c.key = filepath.Join(out, "token.key")
		if err := os.WriteFile(c.key, []byte(hex.EncodeToString(key)+"\n"), 0o600); err != nil {
			return err
		}
	}
	for i := range 3 {
		udp, err := freePort("udp")
		if err != nil {
			return err
		}
		http, err := freePort("tcp")
		if err != nil {
			return err
		}
		id := "n" + strconv.Itoa(i+1)
		args := []string{"--node-id", id, "--zones", c.cfg.Zones[i], "--data", filepath.Join(out, "data-"+id),
			"--udp", fmt.Sprintf("127.0.0.1:%d", udp), "--http", fmt.Sprintf("127.0.0.1:%d", http),
			"--lease-ttl", c.cfg.LeaseTTL.String(), "--npcs", strconv.Itoa(c.cfg.NPCs), "--dev-game=true",
			"--shutdown-timeout", "5s"}
		switch {
		case c.cfg.NATSCluster:
			args = append(args, "--nats", url, "--kv-replicas", "3", "--key-file", c.key)
		case c.cfg.ExternalNATS:
			args = append(args, "--nats", url, "--key-file", c.key)
		case i == 0:
			args = append(args, "--nats-listen", c.natsAt)
		default:
			args = append(args, "--nats", url, "--nats-creds", filepath.Join(out, "data-n1", "node.creds"), "--key-file", c.key)
		}
		n := &zonedNode{id: id, udp: udp, http: http, nonNATSHst: c.cfg.ExternalNATS || i > 0,
			p: &proc{name: id, bin: c.cfg.Zoned, args: args, logPath: filepath.Join(out, id+".log")}}
		c.nodes = append(c.nodes, n)
		if err := c.startNode(ctx, n); err != nil {
			return err
		}
		if i == 0 {
			var opts []nats.Option
			if c.creds != "" {
				o, err := adminclient.CredsOption(c.creds)
				if err != nil {
					return err
				}
				opts = append(opts, o)
			}
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			c.rec, err = StartRecorder(rctx, url, opts...)
			cancel()
			if err != nil {
				return err
			}
		}
	}
	return nil
}

func (c *cluster) startNode(ctx context.Context, n *zonedNode) error {
	if err := n.p.start(); err != nil {
		return err
	}
	if err := n.p.waitLog(ctx, "zoned ready", c.cfg.Ready); err != nil {
		n.p.stop(5 * time.Second)
		return err
	}
	c.logf("%s ready (udp %d, http %d)", n.id, n.udp, n.http)
	return nil
}

func (c *cluster) startBots(dur time.Duration) (*proc, error) {
	var servers []string
	for _, n := range c.nodes {
		if len(c.cfg.Gateways) == 0 || slices.Contains(c.cfg.Gateways, n.id) {
			servers = append(servers, fmt.Sprintf("127.0.0.1:%d", n.udp))
		}
	}
	args := []string{"--server", strings.Join(servers, ","), "--key-file", c.key, "--bots", strconv.Itoa(c.cfg.Bots),
		"--ramp", "50", "--duration", dur.String(), "--token-timeout", c.cfg.TokenTimeout.String(),
		"--seed", strconv.FormatUint(c.cfg.Seed, 10), "--expect-disconnects", "--allow-violations", "-q",
		"--report", filepath.Join(c.cfg.Out, "report.json"), "--html", filepath.Join(c.cfg.Out, "report.html")}
	p := &proc{name: "botswarm", bin: c.cfg.Botswarm, args: args, logPath: filepath.Join(c.cfg.Out, "botswarm.log")}
	return p, p.start()
}

// shutdown stops everything still running: nodes 3, 2, then 1 (which may
// host NATS), then the standalone NATS. Safe to call twice.
func (c *cluster) shutdown() {
	if c.rec != nil {
		c.rec.Close()
		c.rec = nil
	}
	for i := len(c.nodes) - 1; i >= 0; i-- {
		if c.nodes[i].p.running() {
			c.nodes[i].p.stop(15 * time.Second)
		}
	}
	if c.nats != nil && c.nats.running() {
		c.nats.stop(10 * time.Second)
	}
	for _, p := range c.natsCl {
		if p.running() {
			p.stop(10 * time.Second)
		}
	}
}

func exitCode(p *proc) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state == nil {
		return -1
	}
	return p.state.ExitCode()
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
