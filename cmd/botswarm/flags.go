package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/ghostwire/ghostwire/actors/tokenkey"
	"github.com/ghostwire/ghostwire/cmd/botswarm/internal/impair"
	"github.com/ghostwire/ghostwire/cmd/botswarm/internal/metrics"
	"github.com/ghostwire/ghostwire/cmd/botswarm/internal/scenario"
	"github.com/ghostwire/ghostwire/cmd/botswarm/internal/slo"
	"github.com/ghostwire/ghostwire/cmd/botswarm/internal/swarm"
	"github.com/ghostwire/ghostwire/zones/world"
)

// options is everything the command line says, before it becomes a
// swarm.Config.
type options struct {
	server   string
	bots     int
	duration time.Duration
	ramp     float64
	seed     uint64

	scenario      string
	worldFile     string
	crowdPoint    string
	crowdRadius   float64
	borderSwing   float64
	teleportEvery time.Duration
	churnLife     time.Duration
	churnPause    time.Duration

	inputRate int
	sendRate  int

	loss, reorder, duplicate string
	burst                    float64
	latency, jitter          time.Duration
	mix                      string

	keyFile      string
	protocolID   string
	tokenTimeout time.Duration
	playerBase   string

	echoInterval time.Duration
	expectEcho   bool
	viewPeers    int
	observers    string
	drain        time.Duration
	workers      int
	transport    string
	quantum      time.Duration

	tick       time.Duration
	hitchLimit time.Duration

	metricsURL string

	report, html, slo string
	quiet             bool
	allowViolations   bool
	expectDisconnects bool
	verbose           bool
	cpuProfile        string
}

// usageError is a bad command line: exit status 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

const defaultKeyFile = tokenkey.DefaultDataDir + "/" + tokenkey.DevFileName

func newFlagSet(o *options, out io.Writer) *pflag.FlagSet {
	fs := pflag.NewFlagSet("botswarm", pflag.ContinueOnError)
	fs.SetOutput(out)
	fs.SortFlags = false
	def := swarm.DefaultConfig()

	fs.StringVar(&o.server, "server", "127.0.0.1:7777", "zone server UDP `ADDR` (host:port), as the server lists itself in tokens; a comma-separated list of gateways spreads the bots over them round-robin (bot i plays on the i-th mod n)")
	fs.IntVar(&o.bots, "bots", def.Bots, "number of bots `N`")
	fs.DurationVar(&o.duration, "duration", def.Duration, "how long the bots play, `D` (e.g. 30s, 5m); then they drain and quit")
	fs.Float64Var(&o.ramp, "ramp", def.Ramp, "start `R` bots per second (0: all at once)")
	fs.Uint64Var(&o.seed, "seed", def.Seed, "random `SEED` for movement, impairment and placement (same seed, same inputs)")

	fs.StringVar(&o.scenario, "scenario", "wander", "movement `NAME`: wander (random waypoints), crowd (all converge on one point), border (back and forth across a zone border), teleport (wander + jumps), churn (sessions come and go)")
	fs.StringVar(&o.worldFile, "world", "", "world map JSON `FILE` (as zoned's --world); default: the built-in 2×2 zones of 1 km")
	fs.StringVar(&o.crowdPoint, "crowd-point", "", "crowd scenario meeting point `X,Z` in metres (default: the world's centre)")
	fs.Float64Var(&o.crowdRadius, "crowd-radius", scenario.DefaultCrowdRadius, "crowd scenario: bots mill within `M` metres of the point")
	fs.Float64Var(&o.borderSwing, "border-swing", scenario.DefaultBorderSwing, "border scenario: walk `M` metres past the border each way")
	fs.DurationVar(&o.teleportEvery, "teleport-every", scenario.DefaultTeleportEvery, "teleport scenario: mean time `D` between jumps")
	fs.DurationVar(&o.churnLife, "churn-life", scenario.DefaultChurnLife, "churn scenario: mean session length `D` (exponential), counted from the connect")
	fs.DurationVar(&o.churnPause, "churn-pause", scenario.DefaultChurnPause, "churn scenario: longest pause `D` before reconnecting")

	fs.IntVar(&o.inputRate, "input-rate", def.InputRate, "moves per second per bot, `HZ` (must divide 960)")
	fs.IntVar(&o.sendRate, "send-rate", def.SendRate, "packets per second per bot, `HZ` (moves are batched redundantly)")

	fs.StringVar(&o.loss, "loss", "0", "simulated packet loss per direction, `P` as 5% or 0.05")
	fs.Float64Var(&o.burst, "burst-loss", 0, "mean loss-burst length in packets `N` (Gilbert model with --loss as the long-run rate; ≤ 1: independent losses)")
	fs.DurationVar(&o.latency, "latency", 0, "simulated one-way delay `D` added in each direction (RTT grows by twice this)")
	fs.DurationVar(&o.jitter, "jitter", 0, "± uniform spread `D` of the one-way delay (order kept unless --reorder)")
	fs.StringVar(&o.reorder, "reorder", "0", "probability `P` that a packet is held back and overtaken")
	fs.StringVar(&o.duplicate, "duplicate", "0", "probability `P` that a packet arrives twice")
	fs.StringVar(&o.mix, "impair-mix", "", "impairment distribution over the bots, `SPEC` like '70%:latency=20ms,loss=1%; bad=30%:loss=20%,burst=4' (keys: loss, burst, latency, jitter, reorder, duplicate; unset keys take the flags above)")

	fs.StringVar(&o.keyFile, "key-file", defaultKeyFile, "connect-token key `FILE` (64 hex digits; the dev key zoned writes); when not given, "+tokenkey.EnvVar+" (hex) overrides the default file")
	fs.StringVar(&o.protocolID, "protocol-id", "0x"+strconv.FormatUint(tokenkey.DefaultProtocolID, 16), "protocol `ID` the tokens carry (must match the server)")
	fs.DurationVar(&o.tokenTimeout, "token-timeout", def.TokenTimeout, "connection idle timeout `D` the tokens carry")
	fs.StringVar(&o.playerBase, "player-base", "0x"+strconv.FormatUint(def.PlayerBase, 16), "first player `ID` of the swarm (decimal or 0x hex): bot i's n-th session plays as ID + i×2^20 + n, so N bots use [ID, ID + N×2^20). Swarms running at once against one server need ranges that do not overlap, else each connect supersedes the other swarm's session of that id (disconnects_superseded); a run after another with the same ids resumes those players from their records, where the earlier run left them")

	fs.DurationVar(&o.echoInterval, "echo-interval", def.EchoInterval, "each bot sends a guaranteed echo event every `D` on lane 0 (0: off)")
	fs.BoolVar(&o.expectEcho, "expect-echo", true, "the server echoes lane-0 events: a run without echoes violates the event invariant")
	fs.IntVar(&o.viewPeers, "view-peers", def.ViewPeers, "peer ghosts each bot compares with the truth per sample, `N`")
	fs.StringVar(&o.observers, "observers", "100%", "`FRACTION` of the bots (spread evenly; 10% or 0.1) that decode ghosts and check their view; the others skip the ghost section, a large share of a bot's CPU (moves, events, handoffs and sessions are checked for every bot)")
	fs.DurationVar(&o.drain, "drain", def.Drain, "at the end, wait up to `D` for the last moves to be acknowledged and events echoed")
	fs.IntVar(&o.workers, "workers", 0, "worker goroutines `N` (0: one per CPU, at most one per 250 bots)")
	fs.StringVar(&o.transport, "transport", "auto", "socket layer `NAME`: shared (Linux: each worker's bots share one UDP socket, send the long form with the connection id and move datagrams in recvmmsg/sendmmsg batches), epoll (Linux) or goroutines (a socket per bot, short form); auto: shared where it exists")
	fs.DurationVar(&o.quantum, "quantum", def.Quantum, "workers begin their turns at least `D` apart, taking the datagrams that arrived and the bots' sends in batches; adds up to D to measured latencies (0: wake per datagram, ≈ 10 % more CPU)")

	fs.DurationVar(&o.tick, "tick", metrics.DefaultTick, "the server's tick period `D` (zoned's default: 50ms, 20 Hz); the handoff-hitch limit is two of them plus the RTT")
	fs.DurationVar(&o.hitchLimit, "hitch-limit", 0, "the handoff-hitch invariant fails when the hitch p99 exceeds `D` (0: two --tick periods + the run's RTT p99 + what the simulated loss and jitter explain)")

	fs.StringVar(&o.metricsURL, "metrics-url", "", "scrape the server's Prometheus `URL` (zoned: http://HOST:PORT/metrics on its --http address) once a second during the run: zone tick cost, server CPU and heap are plotted beside the bots' view and reported (server_tick_p99, server_cpu, server_heap)")
	fs.StringVar(&o.report, "report", "", "write the JSON report (every metric and histogram) to `FILE`")
	fs.StringVar(&o.html, "html", "", "write the self-contained HTML report (plots; opens offline) to `FILE`")
	fs.StringVar(&o.slo, "slo", "", "SLO gate `SPEC`, e.g. 'rtt_p99<150ms,loss<2%,lost_moves=0,view_err_p99<0.5m': exit status 1 when a target is missed")
	fs.BoolVarP(&o.quiet, "quiet", "q", false, "no live progress line (for CI)")
	fs.BoolVar(&o.allowViolations, "allow-violations", false, "exit 0 even when an invariant is violated (the SLO gate still counts)")
	fs.BoolVar(&o.expectDisconnects, "expect-disconnects", false, "the run drops sessions on purpose (chaos: nodes killed or stopped): the no-unexpected-disconnects invariant reports its counts without judging them (default false: any unexpected disconnect or failed (re)connect fails the run); gate the causes that must not happen with --slo, e.g. disconnects_shutdown=0")
	fs.BoolVarP(&o.verbose, "verbose", "v", false, "log bot errors to stderr")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a Go CPU profile of the run to `FILE` (go tool pprof)")

	fs.Usage = func() {
		fmt.Fprintf(out, `botswarm drives a swarm of bots that speak ghostwire's real protocol over UDP
against a zone server, checks correctness invariants as they play, and reports.

Usage: botswarm [flags]   (flags take --name value or --name=value)

Flags:
%s
SLO metrics (durations: ns us ms s; ratios: 2%% or 0.02; distances: mm cm m):
  %s

Invariants (judged after every run; a violated one exits 1 unless
--allow-violations): moves acknowledged exactly once and in order; guaranteed
events echoed intact and in order; view accuracy; handoff hitch; and no
unexpected disconnects. The last is on by default: a session that was up and
ended without its bot asking (server shutdown, kicked, timeout/silence, other)
or a failed connect or reconnect fails the run, so a server stopped mid-run
fails it. What the bots plan is no disconnect: the end of the run, Ctrl-C and
the churn scenario's session ends (planned_disconnects), nor is a server's
Redirect the bot follows to another gateway (redirects: a draining node moves
its players). Runs that kill nodes on purpose pass --expect-disconnects.

Exit status: 0 all good; 1 an SLO target was missed or an invariant violated
(both named on stdout); 2 bad flags or setup.
`, fs.FlagUsages(), strings.Join(wrap(metricNames(), 76), "\n  "))
	}
	return fs
}

func metricNames() []string {
	var out []string
	for n := range metrics.Known {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// wrap joins words into lines of at most width characters.
func wrap(words []string, width int) []string {
	var lines []string
	cur := ""
	for _, w := range words {
		if cur != "" && len(cur)+2+len(w) > width {
			lines = append(lines, cur+",")
			cur = ""
		}
		if cur != "" {
			cur += ", "
		}
		cur += w
	}
	if cur != "" {
		lines = append(lines, cur)
	}
	return lines
}

// plan is a validated run.
type plan struct {
	cfg     swarm.Config
	spec    slo.Spec
	opts    options
	keyFrom string
}

// buildPlan turns options into a swarm configuration. fs tells which
// flags were set; getenv reads the environment.
func buildPlan(o options, fs *pflag.FlagSet, getenv func(string) string) (plan, error) {
	cfg := swarm.DefaultConfig()
	p := plan{opts: o}
	for _, s := range strings.Split(o.server, ",") {
		s = strings.TrimSpace(s)
		addr, err := resolve(s)
		if err != nil {
			return p, usagef("--server %q: %v", s, err)
		}
		if slices.Contains(cfg.Servers, addr) {
			return p, usagef("--server: %v listed twice", addr)
		}
		cfg.Servers = append(cfg.Servers, addr)
	}
	if o.bots < 1 {
		return p, usagef("--bots %d: need at least one bot", o.bots)
	}
	cfg.Bots, cfg.Duration, cfg.Ramp, cfg.Seed = o.bots, o.duration, o.ramp, o.seed
	if o.duration <= 0 {
		return p, usagef("--duration %v: must be positive", o.duration)
	}
	if o.ramp < 0 {
		return p, usagef("--ramp %v: must not be negative", o.ramp)
	}

	kind, err := scenario.ParseKind(o.scenario)
	if err != nil {
		return p, usagef("--scenario: %v", err)
	}
	wd := world.Default()
	if o.worldFile != "" {
		if wd, err = world.Load(o.worldFile); err != nil {
			return p, usagef("--world: %v", err)
		}
	}
	sp := scenario.Params{Kind: kind, World: wd, Seed: o.seed, CrowdRadius: o.crowdRadius,
		BorderSwing: o.borderSwing, TeleportEvery: o.teleportEvery, ChurnLife: o.churnLife, ChurnPause: o.churnPause}
	if o.crowdPoint != "" {
		x, z, ok := strings.Cut(o.crowdPoint, ",")
		fx, err1 := strconv.ParseFloat(strings.TrimSpace(x), 64)
		fz, err2 := strconv.ParseFloat(strings.TrimSpace(z), 64)
		if !ok || err1 != nil || err2 != nil {
			return p, usagef("--crowd-point %q: want X,Z in metres", o.crowdPoint)
		}
		sp.CrowdPoint = &[2]float64{fx, fz}
	}
	if err := sp.Validate(); err != nil {
		return p, usagef("%v", err)
	}
	cfg.Scenario = sp
	cfg.InputRate, cfg.SendRate = o.inputRate, o.sendRate

	base := impair.Profile{Name: "all", Weight: 1, Burst: o.burst, Latency: o.latency, Jitter: o.jitter}
	for _, f := range []struct {
		name string
		v    string
		dst  *float64
	}{{"loss", o.loss, &base.Loss}, {"reorder", o.reorder, &base.Reorder}, {"duplicate", o.duplicate, &base.Duplicate}} {
		if *f.dst, err = impair.ParseRatio(f.v); err != nil {
			return p, usagef("--%s: %v", f.name, err)
		}
	}
	if err := base.Validate(); err != nil {
		return p, usagef("impairment: %v", err)
	}
	cfg.Mix = []impair.Profile{base}
	if o.mix != "" {
		if cfg.Mix, err = impair.ParseMix(o.mix, base); err != nil {
			return p, usagef("--impair-mix: %v", err)
		}
	}

	pid, err := strconv.ParseUint(o.protocolID, 0, 64)
	if err != nil {
		return p, usagef("--protocol-id %q: %v", o.protocolID, err)
	}
	cfg.ProtocolID, cfg.TokenTimeout = pid, o.tokenTimeout
	if cfg.PlayerBase, err = strconv.ParseUint(o.playerBase, 0, 64); err != nil {
		return p, usagef("--player-base %q: want an unsigned integer (decimal or 0x hex)", o.playerBase)
	}

	if cfg.Observers, err = impair.ParseRatio(o.observers); err != nil {
		return p, usagef("--observers %q: want the share of bots that observe, 0%%–100%% or 0–1", o.observers)
	}
	cfg.EchoInterval, cfg.EchoExpected = o.echoInterval, o.expectEcho && o.echoInterval > 0
	cfg.ViewPeers, cfg.Drain, cfg.Workers, cfg.Transport, cfg.Quantum = o.viewPeers, o.drain, o.workers, o.transport, o.quantum

	if o.tick <= 0 || o.tick > 10*time.Second {
		return p, usagef("--tick %v: want a period in (0, 10s]", o.tick)
	}
	if o.metricsURL != "" {
		u, err := url.Parse(o.metricsURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return p, usagef("--metrics-url %q: want http://HOST:PORT/metrics", o.metricsURL)
		}
	}
	if o.hitchLimit < 0 {
		return p, usagef("--hitch-limit %v: must not be negative", o.hitchLimit)
	}
	if p.spec, err = slo.Parse(o.slo, metrics.Known); err != nil {
		return p, usageError{err}
	}
	if err := cfg.Validate(); err != nil {
		return p, usageError{err}
	}
	// The key last: a run without one (no zoned started here yet) still
	// hears first about a flag that is wrong.
	keyPath := ""
	if fs.Changed("key-file") {
		keyPath = o.keyFile
	}
	// An explicit --key-file wins; otherwise the environment, then the dev
	// key zoned wrote (the default file is DATA/token.key).
	key, src, err := tokenkey.Resolve(keyPath, getenv, filepath.Dir(o.keyFile))
	if err != nil {
		return p, usagef("token key: %v", err)
	}
	cfg.Key, p.keyFrom = key, string(src)
	p.cfg = cfg
	return p, nil
}

// metricsOptions tells metrics.Build how to judge the invariants.
func (p plan) metricsOptions() metrics.Options {
	return metrics.Options{
		EchoExpected:        p.cfg.EchoExpected,
		CorrectionsExpected: p.cfg.Scenario.Kind == scenario.Crowd || p.cfg.Scenario.Kind == scenario.Teleport,
		Tick:                p.opts.tick,
		HitchLimit:          p.opts.hitchLimit,
		HitchSlack:          impair.MixHitchSlack(p.cfg.Mix, p.opts.tick, p.cfg.HitchWindow) + p.cfg.Quantum,
		DisconnectsExpected: p.opts.expectDisconnects,
	}
}

// resolve turns host:port into an address (a name resolves once, IPv4 first).
func resolve(s string) (netip.AddrPort, error) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap, nil
	}
	ua, err := net.ResolveUDPAddr("udp", s)
	if err != nil {
		return netip.AddrPort{}, err
	}
	ap := ua.AddrPort()
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), nil
}

// config is the run's settings as the reports show them.
func (p plan) config(transport string, workers int) map[string]any {
	o := p.opts
	mix := make([]map[string]any, 0, len(p.cfg.Mix))
	for _, m := range p.cfg.Mix {
		mix = append(mix, map[string]any{"name": m.Name, "weight": m.Weight, "impairment": m.String()})
	}
	return map[string]any{
		"server": serverList(p.cfg.Servers), "bots": o.bots, "duration": o.duration.String(), "ramp_per_s": o.ramp,
		"seed": o.seed, "scenario": o.scenario, "world": p.cfg.Scenario.World.Name(), "input_rate_hz": o.inputRate,
		"send_rate_hz": o.sendRate, "impairment": mix, "echo_interval": o.echoInterval.String(),
		"expect_echo": p.cfg.EchoExpected, "key": p.keyFrom, "protocol_id": o.protocolID, "player_base": "0x" + strconv.FormatUint(p.cfg.PlayerBase, 16), "slo": o.slo, "expect_disconnects": o.expectDisconnects,
		"transport": transport, "workers": workers, "drain": o.drain.String(),
		"tick": o.tick.String(), "hitch_limit": o.hitchLimit.String(), "observers": p.cfg.Observers, "metrics_url": o.metricsURL,
	}
}

// serverList is the gateways as --server takes them.
func serverList(as []netip.AddrPort) string {
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = a.String()
	}
	return strings.Join(s, ",")
}

var errHelp = errors.New("help requested")

// parseArgs parses args into options.
func parseArgs(args []string, out io.Writer) (options, *pflag.FlagSet, error) {
	var o options
	fs := newFlagSet(&o, out)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return o, fs, errHelp
		}
		return o, fs, usageError{err}
	}
	if fs.NArg() > 0 {
		return o, fs, usagef("unexpected arguments: %q (flags only)", fs.Args())
	}
	return o, fs, nil
}
