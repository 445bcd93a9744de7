// Command capacity measures what one zoned costs per connected player: it
// runs a whole node (actors/node: gateway, connections, ghost managers,
// zones with their NPCs, its NATS server embedded, or with --external-nats
// in a child process of its own) in this process, drives it with
// cmd/botswarm in a child process over loopback UDP, and for each player
// count reports
//
//   - the server's CPU per player-second (getrusage of this process over a
//     steady window: everything the node runs, NATS and NPCs included;
//     with --external-nats the NATS server's CPU is read from its process
//     and reported beside the node's);
//   - the live heap per player: heap after a forced GC with the players
//     connected, minus the same before they came, divided by the players;
//   - the zone tick cost p50/p99 over the window (zone.Metrics.TickCost);
//   - botswarm's RTT p99 and move/echo invariants (its JSON report);
//   - how fast the node's process ran bench/hostcheck's Wide loop in short
//     bursts over the window (--host-probe): on a shared host, whether
//     another tenant's thread slowed the core that minute. The bursts'
//     CPU is left out of the server's.
//
// The bots never share the server's heap or CPU accounting: they run in
// their own process. Results go to stdout as a markdown table, and with
// --json / --png to a JSON file and a plot (gonum/plot).
//
//	go run ./cmd/capacity --players 1000,2000              # memory + CPU at two counts
//	make capacity                                          # the curve in docs/benchmarks.md
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/ghostwire/ghostwire/actors/node"
	"github.com/ghostwire/ghostwire/cmd/internal/procs"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if errors.Is(err, pflag.ErrHelp) {
		return // the usage went to stderr: asked for, not an error
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "capacity:", err)
		os.Exit(1)
	}
}

type options struct {
	players    []int
	ramp       float64
	warmup     time.Duration
	window     time.Duration
	botswarm   string
	swarmFlags string
	jsonOut    string
	pngOut     string
	cpuProfile string
	memProfile string
	profileAt  int
	npcs       int
	keep       bool
	gcPercent  int
	memRate    int
	breakdown  bool
	probeEvery time.Duration
	worldFile  string
	spawn      string
	procs      procs.Setting
	// externalNATS runs each step's node against a standalone nats-server
	// (natsServer: the binary; empty: built at go.mod's version).
	externalNATS bool
	natsServer   string
	defaultPs    int // the runtime's GOMAXPROCS at start: each step's node starts there
	// mapFile is the world map the node runs: worldFile, or with --spawn
	// that map (or the default) with its spawn zones replaced, written to
	// the run's temporary directory; empty: the built-in default world.
	mapFile string
}

// Step is one player count's measurement.
type Step struct {
	Players   int `json:"players"`
	Connected int `json:"connected"` // connections open at the end of the window

	WindowS        float64 `json:"window_s"`
	CPUCores       float64 `json:"server_cpu_cores"`
	CPUMsPerPlayer float64 `json:"server_cpu_ms_per_player_s"`

	HeapIdleB      uint64  `json:"heap_idle_bytes"` // after GC, before any player
	HeapB          uint64  `json:"heap_bytes"`      // after GC, players connected
	HeapPerPlayerB float64 `json:"heap_per_player_bytes"`
	StackB         uint64  `json:"stack_inuse_bytes"`
	Goroutines     int     `json:"goroutines"`
	GCs            uint32  `json:"gc_cycles_in_window"`

	TickP50Ms float64 `json:"tick_p50_ms"`
	TickP99Ms float64 `json:"tick_p99_ms"`
	TickMax   float64 `json:"tick_max_ms"`
	Missed    uint64  `json:"missed_ticks"`

	CPUUsPerPacket    float64 `json:"server_cpu_us_per_packet"` // CPU ÷ datagrams in and out
	PktsInPerPlayerS  float64 `json:"packets_in_per_player_s"`
	PktsOutPerPlayerS float64 `json:"packets_out_per_player_s"`
	InboundDropped    uint64  `json:"inbound_dropped"`
	WriteDropped      uint64  `json:"write_dropped"`

	// The batched system calls over the window: datagrams each recvmmsg
	// and sendmmsg carried, the reader's waits on an empty socket and the
	// connection shards' rounds (each one but a straight one a wake-up) a
	// second: where the kernel's share of the CPU comes from.
	DatagramsPerRead  float64 `json:"datagrams_per_recvmmsg"`
	DatagramsPerWrite float64 `json:"datagrams_per_sendmmsg"`
	ReadWaitsPerS     float64 `json:"read_waits_per_s"`
	ShardRoundsPerS   float64 `json:"shard_rounds_per_s"`

	// The Go scheduler's Ps (GOMAXPROCS) at the end of the window, as
	// zoned's sizer set them (--gomaxprocs auto: Ps changes in the window,
	// and its probe's mean wake lag), or as fixed.
	Ps          int     `json:"gomaxprocs"`
	PsChanges   uint64  `json:"gomaxprocs_changes_in_window"`
	PsLagRaises uint64  `json:"gomaxprocs_lag_raises_in_window"` // of the changes, raises the probe's lag made
	ProbeLagUs  float64 `json:"sizer_probe_lag_us,omitempty"`

	RTTP50Ms     float64 `json:"rtt_p50_ms"`
	RTTP99Ms     float64 `json:"rtt_p99_ms"`
	LostMoves    float64 `json:"lost_moves"`
	LostEvents   float64 `json:"lost_events"`
	SwarmCPUMs   float64 `json:"botswarm_cpu_ms_per_bot_s"`
	GhostsPerBot float64 `json:"ghosts_per_bot"` // botswarm's series, mean of its seconds inside the measurement window
	// PlayersByZone is the players each zone owned at the end of the
	// window (playersByZone).
	PlayersByZone map[string]int `json:"players_by_zone,omitempty"`
	SwarmExit     int            `json:"botswarm_exit"`

	// How fast the node's process ran hostcheck.Wide in its bursts over
	// the window (hostProbe, --host-probe): ≈ 1.04 ns a step on a quiet
	// core of the Machine table's host. The bursts' CPU is left out of
	// CPUCores.
	HostWideP50Ns float64 `json:"host_wide_ns_per_step_p50,omitempty"`
	HostWideP90Ns float64 `json:"host_wide_ns_per_step_p90,omitempty"`
	// hostcheck.Chain over the same bursts: ≈ 1.11 ns a step at the
	// Machine table's host's clock; higher, a slower clock (a sibling
	// does not slow it).
	HostChainP50Ns float64 `json:"host_chain_ns_per_step_p50,omitempty"`
	HostProbes     int     `json:"host_probe_bursts,omitempty"`
	HostProbeCPUMs float64 `json:"host_probe_cpu_ms,omitempty"`

	// With --external-nats the node's NATS server ran in a process of its
	// own (a cluster's topology): the CPU and heap above are the node's
	// alone, and these are the server's CPU per player-second over the
	// same window and its resident memory's growth per player since the
	// idle baseline (RSS: the runtime keeps freed pages a while, so an
	// upper bound of its live heap).
	ExternalNATS            bool    `json:"external_nats,omitempty"`
	NATSServerCPUMs         float64 `json:"nats_server_cpu_ms_per_player_s,omitempty"`
	NATSServerRSSPerPlayerB float64 `json:"nats_server_rss_per_player_bytes,omitempty"`
	// The URL the node's NATS client used and, with --external-nats, the
	// standalone server's (the tests' check that the node used it).
	nodeNATSURL, serverNATSURL string

	// What the node wrote to NATS over the window: its connection's
	// messages and bytes (headers and payloads) a second, and per KV
	// bucket the messages stored a second and the bytes a stored message
	// takes (subject, headers, record, the file store's framing).
	NATSMsgsPerS  float64                `json:"nats_msgs_out_per_s"`
	NATSBytesPerS float64                `json:"nats_bytes_out_per_s"`
	NATSBuckets   map[string]BucketStats `json:"nats_buckets,omitempty"`

	// HeapParts is the live heap per player by part (--breakdown): the
	// heap profile after the window minus the same at idle, divided.
	HeapParts   map[string]float64 `json:"heap_per_player_by_part_bytes,omitempty"`
	SwarmReport string             `json:"botswarm_report,omitempty"`
}

func parse(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := pflag.NewFlagSet("capacity", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: capacity [flags]\n\nRuns a whole zoned in this process, drives it with botswarm over loopback at each\nplayer count, and prints the server's CPU and live heap per player, tick p50/p99\nand RTT p99 (docs/benchmarks.md, \"Server cost per player\").\n\nFlags:\n")
		fs.PrintDefaults()
	}
	players := fs.String("players", "250,500,750,1000,1500,2000,2500", "player counts to measure, comma separated")
	fs.Float64Var(&o.ramp, "ramp", 80, "bots connected per second (the handshake limit is 100/s per /24; loopback is one /24)")
	fs.DurationVar(&o.warmup, "warmup", 10*time.Second, "settle time after every bot connected, before the window")
	fs.DurationVar(&o.window, "window", 20*time.Second, "measurement window")
	fs.StringVar(&o.botswarm, "botswarm", "", "botswarm binary (empty: go build ./cmd/botswarm into a temporary directory)")
	fs.StringVar(&o.swarmFlags, "swarm-flags", "", "extra botswarm flags, space separated (e.g. '--send-rate 20')")
	fs.StringVar(&o.jsonOut, "json", "", "write the steps as JSON to `FILE`")
	fs.StringVar(&o.pngOut, "png", "", "write the capacity plot to `FILE` (PNG)")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write the server's CPU profile over the window of --profile-at players to `FILE`")
	fs.StringVar(&o.memProfile, "memprofile", "", "write the server's heap profile (after GC, at the end of the window of --profile-at players) to `FILE`")
	fs.IntVar(&o.profileAt, "profile-at", 0, "player count whose window is profiled (0: the largest)")
	fs.IntVar(&o.npcs, "npcs", node.DefaultConfig().NPCs, "NPCs in the world (the default world's)")
	fs.BoolVar(&o.keep, "keep", false, "keep the botswarm reports (paths in the JSON)")
	fs.IntVar(&o.gcPercent, "gc-percent", 0, "GOGC for the server (0: the runtime's default)")
	fs.IntVar(&o.memRate, "mem-profile-rate", 4096, "runtime.MemProfileRate when --memprofile or --breakdown is set (bytes per sample)")
	fs.StringVar(&o.worldFile, "world", "", "world map `FILE` the server runs (empty: the built-in default world of 2×2 zones of 1 km)")
	fs.StringVar(&o.spawn, "spawn", "", "`ZONES` new players join, comma separated, replacing the map's spawn list (e.g. x1z0: every player starts in one zone of the default world, the crowd of the capacity passes before the forty-first); empty: the map's own, every zone unless it lists some")
	ps := fs.String("gomaxprocs", "auto", "`PS` the server's Go scheduler runs on, as zoned's --gomaxprocs: auto sizes them to the load (zoned's default), a number fixes them; the GOMAXPROCS environment variable, when set, wins (botswarm inherits it too)")
	fs.DurationVar(&o.probeEvery, "host-probe", 50*time.Millisecond, "time between the bursts (≈ 100 µs each) that time bench/hostcheck's Wide and Chain loops in the node's process over each window: Wide tells a core another tenant's thread shares from a quiet one (≈ 1.04 ns a step quiet on the host of docs/benchmarks.md's Machine table), Chain a slower core clock (≈ 1.11 ns there); the bursts' CPU is left out of the server's; 0: none")
	fs.BoolVar(&o.externalNATS, "external-nats", false, "run each step's node against a standalone nats-server of its own (JetStream, loopback, a fresh store), as a cluster's nodes run, instead of the embedded one: the server's CPU and heap are then the node's alone, and the NATS server's CPU per player-second and resident memory per player are reported beside them")
	fs.StringVar(&o.natsServer, "nats-server", "", "nats-server binary `FILE` for --external-nats (empty: go build github.com/nats-io/nats-server/v2 at go.mod's version into a temporary directory)")
	fs.BoolVar(&o.breakdown, "breakdown", false, "also print the live heap per player by part (ghost table, session, views, connection, zones, protoactor, other), from the heap profile at idle and after each window")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	for _, s := range strings.Split(*players, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return o, fmt.Errorf("--players: %q is not a positive count", s)
		}
		o.players = append(o.players, n)
	}
	var err error
	if o.probeEvery < 0 {
		return o, fmt.Errorf("--host-probe: %v is negative (0 turns the probe off)", o.probeEvery)
	}
	// The rest before a botswarm build and a world's start, not after.
	switch {
	case !(o.ramp > 0) || math.IsInf(o.ramp, 1):
		return o, fmt.Errorf("--ramp: %v is not a positive rate (bots a second)", o.ramp)
	case o.warmup < 0:
		return o, fmt.Errorf("--warmup: %v is negative", o.warmup)
	case o.window <= 0:
		return o, fmt.Errorf("--window: %v is not positive", o.window)
	case o.npcs < 0 || o.npcs > 1_000_000:
		return o, fmt.Errorf("--npcs: %d is not in [0, 1000000] (zoned's bound)", o.npcs)
	case o.gcPercent < 0:
		return o, fmt.Errorf("--gc-percent: %d is negative (0: the runtime's default)", o.gcPercent)
	case o.memRate < 1:
		return o, fmt.Errorf("--mem-profile-rate: %d is not a positive byte count", o.memRate)
	case o.profileAt < 0 || o.profileAt > 0 && !slices.Contains(o.players, o.profileAt):
		// Else no window is profiled and --cpuprofile writes nothing.
		return o, fmt.Errorf("--profile-at: %d is not one of --players %v (0: the largest)", o.profileAt, o.players)
	}
	if o.natsServer != "" && !o.externalNATS {
		return o, errNATSServerFlag
	}
	if o.procs, err = procs.ParseSetting(*ps); err != nil {
		return o, fmt.Errorf("--gomaxprocs: %w", err)
	}
	o.defaultPs = runtime.GOMAXPROCS(0)
	if o.profileAt == 0 {
		for _, n := range o.players {
			o.profileAt = max(o.profileAt, n)
		}
	}
	return o, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parse(args, stderr)
	if err != nil {
		return err
	}
	if o.memProfile != "" || o.breakdown {
		runtime.MemProfileRate = o.memRate
	}
	if o.gcPercent > 0 {
		debug.SetGCPercent(o.gcPercent)
	}
	tmp, err := os.MkdirTemp("", "ghostwire-capacity-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if o.mapFile, err = worldMap(o.worldFile, o.spawn, tmp); err != nil {
		return err
	}
	bin := o.botswarm
	if bin == "" {
		bin = filepath.Join(tmp, "botswarm")
		fmt.Fprintln(stderr, "capacity: building botswarm")
		cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/botswarm")
		cmd.Stdout, cmd.Stderr = stderr, stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("go build ./cmd/botswarm (run from the module root): %w", err)
		}
	}
	if o.externalNATS && o.natsServer == "" {
		fmt.Fprintln(stderr, "capacity: building nats-server")
		if o.natsServer, err = buildNATSServer(ctx, tmp, stderr); err != nil {
			return err
		}
	}
	var steps []Step
	for _, n := range o.players {
		if ctx.Err() != nil {
			break
		}
		st, err := measure(ctx, o, bin, tmp, n, stderr)
		if err != nil {
			return fmt.Errorf("%d players: %w", n, err)
		}
		steps = append(steps, st)
		fmt.Fprintf(stderr, "capacity: %s\n", oneLine(st))
		if st.NATSBuckets != nil {
			fmt.Fprintf(stderr, "capacity: %s\n", natsLine(st))
		}
		fmt.Fprintf(stderr, "capacity: %s\n", batchLine(st))
		if st.HostProbes > 0 {
			fmt.Fprintf(stderr, "capacity: %s\n", hostLine(st))
		}
		if st.PlayersByZone != nil {
			fmt.Fprintf(stderr, "capacity: %s\n", zoneLine(st))
		}
	}
	writeTable(stdout, steps)
	writeLimit(stdout, steps)
	writeBreakdown(stdout, steps)
	if o.jsonOut != "" {
		b, _ := json.MarshalIndent(steps, "", "  ")
		if err := os.WriteFile(o.jsonOut, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	if o.pngOut != "" {
		if err := writePlot(o.pngOut, steps); err != nil {
			return err
		}
	}
	return nil
}

func oneLine(s Step) string {
	line := fmt.Sprintf("%d players (%d connected): CPU %.3f ms/player-s (%.2f cores, %.2f µs/packet, %.1f/%.1f packets in/out per player-s), heap %.1f KB/player, tick p99 %.1f ms, RTT p99 %.1f ms, lost moves %.0f",
		s.Players, s.Connected, s.CPUMsPerPlayer, s.CPUCores, s.CPUUsPerPacket, s.PktsInPerPlayerS, s.PktsOutPerPlayerS,
		s.HeapPerPlayerB/1024, s.TickP99Ms, s.RTTP99Ms, s.LostMoves)
	if s.ExternalNATS {
		line += fmt.Sprintf("; the NATS server (its own process, not in the above): CPU %.3f ms/player-s, RSS +%.1f KB/player",
			s.NATSServerCPUMs, s.NATSServerRSSPerPlayerB/1024)
	}
	return line
}

// measure runs one fresh node with n bots.
func measure(ctx context.Context, o options, bin, tmp string, n int, stderr io.Writer) (Step, error) {
	st := Step{Players: n}
	dir := filepath.Join(tmp, fmt.Sprintf("node-%d", n))
	cfg := node.DefaultConfig()
	cfg.UDPAddr, cfg.HTTPAddr, cfg.NATSListen, cfg.DataDir = "127.0.0.1:0", "", "127.0.0.1:0", dir
	cfg.NPCs = o.npcs
	cfg.WorldFile = o.mapFile
	var ns *natsServer
	if o.externalNATS {
		var err error
		if ns, err = startNATS(ctx, o.natsServer, filepath.Join(tmp, fmt.Sprintf("nats-%d", n))); err != nil {
			return st, err
		}
		defer ns.stop() // after the node's stop (deferred below): its last writes land
		cfg.NATSURL, cfg.NATSListen = ns.url, ""
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	// The Ps as a fresh zoned's: the runtime's default (or the fixed
	// count) while the node starts, its shards as many; then sized, as
	// zoned does, until the step ends.
	runtime.GOMAXPROCS(o.defaultPs)
	auto := procs.Apply(o.procs, os.Getenv, nil)
	nd, err := node.Start(ctx, cfg, log)
	if err != nil {
		return st, err
	}
	st.nodeNATSURL = nd.NATSURL()
	if ns != nil {
		st.serverNATSURL = ns.url
	}
	sizing := &procs.Stats{}
	if auto {
		sctx, endSizing := context.WithCancel(ctx)
		sized := make(chan struct{})
		go func() {
			defer close(sized)
			if err := procs.Run(sctx, procs.Config{Stats: sizing}); err != nil {
				fmt.Fprintf(stderr, "capacity: GOMAXPROCS not sized: %v\n", err)
			}
		}()
		defer func() { endSizing(); <-sized }() // before the next step resets the Ps
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_ = nd.Stop(sctx)
			cancel()
		}
	}
	defer stop()

	// Idle baseline: the world with its NPCs ticking, no player.
	sleep(ctx, 3*time.Second)
	st.HeapIdleB = heapAfterGC(nil)
	var natsIdleRSS uint64
	if ns != nil {
		if _, natsIdleRSS, err = ns.usage(); err != nil {
			return st, fmt.Errorf("nats-server: %w", err)
		}
	}
	var idleParts map[string]float64
	if o.breakdown {
		idleParts = heapParts()
	}

	ramp := time.Duration(float64(n)/o.ramp*float64(time.Second)) + time.Second
	total := ramp + o.warmup + o.window + 8*time.Second // margin: the ramp may run late
	report := filepath.Join(tmp, fmt.Sprintf("swarm-%d.json", n))
	args := []string{
		"--server", nd.PublicAddr().String(), "--key-file", cfg.KeyPath(),
		"--bots", strconv.Itoa(n), "--ramp", strconv.FormatFloat(o.ramp, 'f', -1, 64),
		"--duration", total.String(), "-q", "--allow-violations", "--report", report,
	}
	args = append(args, strings.Fields(o.swarmFlags)...)
	cmd := exec.CommandContext(ctx, bin, args...)
	swarmLog, err := os.Create(filepath.Join(tmp, fmt.Sprintf("swarm-%d.log", n)))
	if err != nil {
		return st, err
	}
	defer swarmLog.Close()
	cmd.Stdout, cmd.Stderr = swarmLog, swarmLog
	if err := cmd.Start(); err != nil {
		return st, fmt.Errorf("botswarm: %w", err)
	}
	swarmStart := time.Now() // the series' t counts from about here
	waited := false
	defer func() {
		if !waited {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()

	// Wait until every bot is connected (or the ramp is long overdue).
	gw := nd.Gateway()
	deadline := time.Now().Add(ramp + 30*time.Second)
	for ctx.Err() == nil && time.Now().Before(deadline) && gw.Stats().Conns < int64(n) {
		sleep(ctx, 250*time.Millisecond)
	}
	sleep(ctx, o.warmup)

	m := nd.Zones().Metrics()
	m.TickCost.Reset()
	missed0 := m.MissedTicks.Load()
	g0 := gw.Stats()
	var ms0 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	nw0, nerr := nd.NATSWrites(ctx)
	changes0, lagRaises0 := sizing.Raises.Load()+sizing.Lowers.Load(), sizing.LagRaises.Load()
	wakes0, lag0 := sizing.Wakes.Load(), sizing.LagNanos.Load()
	probe, endProbe := startProbe(ctx, o.probeEvery)
	var natsCPU0 time.Duration
	if ns != nil {
		if natsCPU0, _, err = ns.usage(); err != nil {
			return st, fmt.Errorf("nats-server: %w", err)
		}
	}
	cpu0, wall0 := cpuTime(), time.Now()
	profiling := false
	if o.cpuProfile != "" && n == o.profileAt {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return st, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return st, err
		}
		profiling = true
	}
	sleep(ctx, o.window)
	if profiling {
		pprof.StopCPUProfile()
	}
	endProbe() // its last burst done: every burst's CPU inside [cpu0, cpu1]
	cpu1, wall1 := cpuTime(), time.Now()
	var natsCPU1 time.Duration
	var natsRSS1 uint64
	if ns != nil {
		if natsCPU1, natsRSS1, err = ns.usage(); err != nil {
			return st, fmt.Errorf("nats-server: %w", err)
		}
	}
	var probeCPU time.Duration
	if probe != nil {
		st.HostWideP50Ns, st.HostWideP90Ns, st.HostProbes, probeCPU = probe.result()
		st.HostChainP50Ns = probe.chainP50()
		st.HostProbeCPUMs = ms(probeCPU)
	}
	st.Ps = runtime.GOMAXPROCS(0)
	st.PsChanges = sizing.Raises.Load() + sizing.Lowers.Load() - changes0
	st.PsLagRaises = sizing.LagRaises.Load() - lagRaises0
	if w := sizing.Wakes.Load() - wakes0; w > 0 {
		st.ProbeLagUs = float64(sizing.LagNanos.Load()-lag0) / float64(w) / 1e3
	}
	nw1, nerr1 := nd.NATSWrites(ctx)
	g1 := gw.Stats()
	var ms1 runtime.MemStats
	runtime.ReadMemStats(&ms1)
	q := m.TickCost.Quantiles(0.5, 0.99, 1)
	st.TickP50Ms, st.TickP99Ms, st.TickMax = ms(q[0]), ms(q[1]), ms(q[2])
	st.Missed = m.MissedTicks.Load() - missed0
	st.Connected = int(g1.Conns)
	st.GCs = ms1.NumGC - ms0.NumGC

	w := wall1.Sub(wall0).Seconds()
	st.WindowS = w
	if nerr == nil && nerr1 == nil {
		natsRates(&st, nw0, nw1, w)
	}
	if ns != nil {
		natsShare(&st, natsIdleRSS, natsCPU0, natsCPU1, natsRSS1, w)
	}
	used := serverCPU(cpu1-cpu0, probeCPU)
	st.CPUCores = used.Seconds() / w
	if st.Connected > 0 {
		st.CPUMsPerPlayer = 1000 * st.CPUCores / float64(st.Connected)
		st.PktsInPerPlayerS = float64(g1.DatagramsIn-g0.DatagramsIn) / w / float64(st.Connected)
		st.PktsOutPerPlayerS = float64(g1.DatagramsOut-g0.DatagramsOut) / w / float64(st.Connected)
	}
	if pk := float64(g1.DatagramsIn - g0.DatagramsIn + g1.DatagramsOut - g0.DatagramsOut); pk > 0 {
		st.CPUUsPerPacket = 1e6 * used.Seconds() / pk
	}
	st.InboundDropped = g1.InboundDropped - g0.InboundDropped
	batchRates(&st, g0, g1, w)
	st.WriteDropped = g1.WriteDropped - g0.WriteDropped

	if pz, err := playersByZone(nd.Zones(), 5*time.Second); err == nil {
		st.PlayersByZone = pz
	} else {
		fmt.Fprintf(stderr, "capacity: %d players: players by zone: %v\n", n, err)
	}

	var after runtime.MemStats
	st.HeapB = heapAfterGC(&after)
	st.StackB = after.StackInuse
	st.Goroutines = runtime.NumGoroutine()
	if st.Connected > 0 && st.HeapB > st.HeapIdleB {
		st.HeapPerPlayerB = float64(st.HeapB-st.HeapIdleB) / float64(st.Connected)
		if o.breakdown {
			st.HeapParts = perPlayer(idleParts, heapParts(), st.Connected)
		}
	}
	if o.memProfile != "" && n == o.profileAt {
		f, err := os.Create(o.memProfile)
		if err != nil {
			return st, err
		}
		err = pprof.Lookup("heap").WriteTo(f, 0)
		f.Close()
		if err != nil {
			return st, err
		}
	}

	// Let botswarm finish its run and write the report.
	werr := cmd.Wait()
	waited = true
	st.SwarmExit = cmd.ProcessState.ExitCode()
	if werr != nil && st.SwarmExit < 0 {
		return st, fmt.Errorf("botswarm: %w", werr)
	}
	window := [2]float64{wall0.Sub(swarmStart).Seconds(), wall1.Sub(swarmStart).Seconds()}
	if err := readSwarm(report, window, &st); err != nil {
		st.RTTP50Ms, st.RTTP99Ms, st.LostMoves, st.LostEvents = -1, -1, -1, -1 // not measured: no limit claimed
		fmt.Fprintf(stderr, "capacity: %d players: botswarm report: %v (log %s)\n", n, err, swarmLog.Name())
	}
	if o.keep {
		st.SwarmReport = report
	}
	stop()
	return st, nil
}

// readSwarm reads botswarm's report into st: its RTT, losses and CPU, and
// the ghosts a bot held averaged over the series' seconds inside window
// (seconds since the swarm started: the heap's and the CPU's window), not
// draining. The run's last seconds came after the heap was taken, while
// the crowd walked apart and the bots drained: 2–3 % fewer ghosts.
func readSwarm(path string, window [2]float64, st *Step) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var r struct {
		Metrics map[string]*float64 `json:"metrics"`
		Series  []struct {
			T        float64  `json:"t"`
			Ghosts   *float64 `json:"ghosts_per_bot"`
			Draining bool     `json:"draining"`
		} `json:"series"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return err
	}
	get := func(k string) float64 {
		if v := r.Metrics[k]; v != nil {
			return *v
		}
		return -1
	}
	st.RTTP50Ms, st.RTTP99Ms = 1000*get("rtt_p50"), 1000*get("rtt_p99")
	st.LostMoves, st.LostEvents = get("lost_moves"), get("lost_events")
	st.SwarmCPUMs = 1000 * get("cpu_per_bot")
	sum, n := 0.0, 0
	for _, p := range r.Series {
		if g := p.Ghosts; g != nil && !p.Draining && p.T >= window[0] && p.T <= window[1] {
			sum, n = sum+*g, n+1
		}
	}
	if n > 0 {
		st.GhostsPerBot = sum / float64(n)
	}
	return nil
}

// heapAfterGC forces two collections (the second frees what the first's
// finalizers released) and returns the live heap.
func heapAfterGC(ms *runtime.MemStats) uint64 {
	if ms == nil {
		ms = new(runtime.MemStats)
	}
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(ms)
	return ms.HeapAlloc
}

// cpuTime is the node process's CPU time so far (procs.ProcessCPU: getrusage).
func cpuTime() time.Duration {
	t, _ := procs.ProcessCPU() // 0 where there is none: no CPU figure claimed
	return t
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func writeTable(w io.Writer, steps []Step) {
	fmt.Fprintln(w, "| players | connected | server CPU (cores) | CPU per player-second | CPU per datagram | heap per player | ghosts per player | tick p50 / p99 | RTT p50 / p99 | datagrams in / out per player-s | lost moves | host Wide p50 |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, s := range steps {
		wide := "—" // --host-probe 0
		if s.HostProbes > 0 {
			wide = fmt.Sprintf("%.2f ns", s.HostWideP50Ns)
		}
		fmt.Fprintf(w, "| %d | %d | %.2f | %.3f ms | %.1f µs | %.1f KB | %.1f | %.2f / %.1f ms | %.1f / %.1f ms | %.1f / %.1f | %.0f | %s |\n",
			s.Players, s.Connected, s.CPUCores, s.CPUMsPerPlayer, s.CPUUsPerPacket, s.HeapPerPlayerB/1024, s.GhostsPerBot,
			s.TickP50Ms, s.TickP99Ms, s.RTTP50Ms, s.RTTP99Ms, s.PktsInPerPlayerS, s.PktsOutPerPlayerS, s.LostMoves, wide)
	}
}
